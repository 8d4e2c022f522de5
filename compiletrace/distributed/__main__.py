"""``python -m compiletrace.distributed``: one rank of a job (see :mod:`.rank`)."""

import os
import sys

from compiletrace.distributed.rank import main

if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # The figures are out: leave without the interpreter's teardown. Destroying gloo's C++
    # state while a peer rank is still closing its connections can abort the process
    # ("terminate called without an active exception"), turning a finished job into a
    # failed one.
    os._exit(status)
