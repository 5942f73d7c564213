"""The composition root: one chaos test from start to verdict, and the commands that start it.

``assemble`` picks the backend, nemeses and view a configuration asks for; ``runner`` walks a
run through its steps; ``fault_driver`` executes the schedule; ``commands`` are ``floodmark
run``, ``repro``, ``cleanup`` and ``images``. Everything below is reached from here, and
nothing below reaches back.
"""
