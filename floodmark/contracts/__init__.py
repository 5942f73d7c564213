"""The contracts between the parts: what a run records and what every judge reads.

A run's history (``history``), its nodes' events (``node_events``, with one frozen type per
kind in ``node_event_kinds`` and the rules their fields follow in ``node_event_fields``), its
configuration (``run_config``), the id that ties its events to it (``run_ids``) and its
verdicts (``results``) are all that the harness, the backends, the checkers, the reports
and the pipeline agree on. Each module holds one
contract: its frozen types, how they are written, and how they are read back from bytes that
may be hostile. They sit above the readers' ``inputs`` and below everything that makes or
judges a run; the broker image carries them, since a real broker writes its own events.
"""
