"""``python -m compiletrace``: the same as the ``compiletrace`` command."""

from compiletrace.cli import console_main

if __name__ == "__main__":
    console_main()
