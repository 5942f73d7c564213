"""Run directories: where a run's files live, what proves a replay, who is still making one.

``rundir`` lays out one run's directory and finds runs in a store; ``run_digests`` keeps the
digests that say whether a run's files are still the ones judged, and whether a replay
reproduced them byte for byte; ``unfinished_runs`` records the process making a run, so that
a run whose maker was killed is named unfinished rather than judged as if it were whole.
They sit above the contracts, whose files they hold, and below the runner, the checkers'
commands and the reports, which make and read runs.
"""
