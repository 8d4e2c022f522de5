"""Compiles once, says so on stdout, then waits for a signal (or kills itself with
SIGKILL when told to), so the tests can stop it mid-run.

    python compile_then_wait.py wait|kill9|kill9-checkpointed

``kill9`` dies at once after its compile; ``kill9-checkpointed`` first waits until its run
is in the job's directory (its checkpoint, written while it runs), then dies the same way.
"""

import os
import signal
import sys
import time

import torch

fn = torch.compile(lambda x: x * 3, backend="eager")
fn(torch.ones(2))
print("compiled", flush=True)
if sys.argv[1] == "kill9-checkpointed":
    job_dir = os.environ["COMPILETRACE_JOB_DIR"]
    deadline = time.monotonic() + 300
    while not any(name.endswith(".run.json") for name in os.listdir(job_dir)):
        assert time.monotonic() < deadline, "no checkpoint in 300 s"
        time.sleep(0.05)
    print("checkpointed", flush=True)
if sys.argv[1] in ("kill9", "kill9-checkpointed"):
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(600)
