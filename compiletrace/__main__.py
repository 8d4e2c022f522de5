"""``python -m compiletrace``: the same as the ``compiletrace`` command."""

import sys

from compiletrace.cli import main

if __name__ == "__main__":
    sys.exit(main())
