"""``python -m floodmark``: the same as the ``floodmark`` command."""

import sys

from floodmark.cli import main

sys.exit(main())
