"""``python -m floodmark``: the same as the ``floodmark`` command.

One difference of CPython 3.11's own is undone here. When a KeyboardInterrupt is raised
inside code compiled from a string (a dataclass's generated ``__init__``, defined as a
module is imported, when Ctrl-C lands just then), the interpreter marks the interrupt as
unhandled even though floodmark caught it; ``python -m`` (not the installed command) then
ends by killing itself with SIGINT instead of exiting with the code floodmark returned
(130 for an interrupt). Evaluating any string resets that mark.
"""

import sys

from floodmark.cli import main

try:
    code = main()
finally:
    exec("pass")  # resets CPython's unhandled-interrupt mark (see above), however main ended
sys.exit(code)
