"""White-box checkers: what the brokers say they did, judged against the protocol's rules.

The black-box checkers beside this package (durability, queue, linearizable) see only the
clients' history. These also read every broker's node events (roles, HW changes, appends,
truncations, ISR writes) and check the replication design's invariants on them: HWs that
never go backwards (``hw``), one leader per epoch and one controller per controller epoch
(``leader``), acknowledgements covered by min.insync ISR members and an ISR that holds the
committed prefix (``invariants``), and they say unknown when the events do not cover every
broker (``checkers.event_coverage``) or a file's story ends early (``story_ends``). They catch a flaw
a run exercised even when its faults did not turn it into lost data.
"""
