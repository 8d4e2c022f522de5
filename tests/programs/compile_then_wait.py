"""Compiles once, says so on stdout, then waits for a signal (or kills itself with
SIGKILL when told to), so the tests can stop it mid-run.

    python compile_then_wait.py wait|kill9
"""

import os
import signal
import sys
import time

import torch

fn = torch.compile(lambda x: x * 3, backend="eager")
fn(torch.ones(2))
print("compiled", flush=True)
if sys.argv[1] == "kill9":
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(600)
