"""A supervisor that restarts a crashing worker, again and again: each worker (a forked
child) becomes ready (``compiletrace.ready()``) and dies at once, and the next is started
0.3 s later. Under ``compiletrace run`` every worker is a process of the job with a ready
mark of its own, so the marks never stop coming.

    python restart_forever.py [WORKERS]

WORKERS (default: no end) bounds how many it starts before it ends by itself, exit status 0.
"""

import os
import sys
import time

import torch._dynamo  # noqa: F401  # recording starts here, under compiletrace run

import compiletrace

workers = int(sys.argv[1]) if len(sys.argv) > 1 else -1
while workers != 0:
    workers -= 1
    pid = os.fork()
    if pid == 0:
        compiletrace.ready()
        os._exit(1)  # the worker crashes, as soon as it is ready
    os.waitpid(pid, 0)
    time.sleep(0.3)
