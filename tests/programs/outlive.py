"""Outlives the command that started it, as a server started with ``&`` does: writes its
environment to ``STATE/env.json``, waits for ``STATE/go``, then starts a Python child that
compiles (with the environment it inherited) and writes that child's exit status and
stderr to ``STATE/child.json``.

    python outlive.py STATE
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

state = Path(sys.argv[1])
(state / "env.json.tmp").write_text(json.dumps(dict(os.environ)))
os.replace(state / "env.json.tmp", state / "env.json")
deadline = time.monotonic() + 300
while not (state / "go").exists():
    if time.monotonic() > deadline:
        sys.exit("outlive.py: no go within 300 s")
    time.sleep(0.05)
code = "import torch; f = torch.compile(lambda x: x + 1, backend='eager'); print(f(torch.ones(1)).item())"
child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
result = {"status": child.returncode, "stdout": child.stdout, "stderr": child.stderr}
(state / "child.json.tmp").write_text(json.dumps(result))
os.replace(state / "child.json.tmp", state / "child.json")
