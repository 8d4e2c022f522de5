"""Compiles, then leaves in one of the ways that skip ``atexit`` or reuse the process:

python leave_early.py exec      compile, then os.execv itself as 'second', which compiles again
python leave_early.py _exit     compile, then os._exit(5)
python leave_early.py workers   compile, then iterate a DataLoader with 2 forked workers
python leave_early.py child     compile, then run a Python child that compiles too
python leave_early.py wait DIR  compile, write DIR/ready, wait for DIR/go
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import torch

fn = torch.compile(lambda x: x * 2, backend="eager")
fn(torch.ones(2))
mode = sys.argv[1]
if mode == "exec":
    os.execv(sys.executable, [sys.executable, __file__, "second"])
elif mode == "second":
    torch.compile(lambda x: x - 1, backend="eager")(torch.ones(3))
elif mode == "_exit":
    sys.stdout.flush()
    os._exit(5)
elif mode == "workers":
    data = torch.utils.data.TensorDataset(torch.arange(8.0))
    loader = torch.utils.data.DataLoader(data, batch_size=2, num_workers=2, multiprocessing_context="fork")
    assert sum(len(batch[0]) for batch in loader) == 8
elif mode == "child":
    code = "import torch; torch.compile(lambda x: x + 3, backend='eager')(torch.ones(1))"
    subprocess.run([sys.executable, "-c", code], check=True)
elif mode == "wait":
    directory = Path(sys.argv[2])
    (directory / "ready").write_text(os.environ["COMPILETRACE_JOB_DIR"])
    deadline = time.monotonic() + 300
    while not (directory / "go").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
