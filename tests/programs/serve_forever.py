"""A model server that never ends by itself: it compiles a model, warms it up on two batch
sizes (the second recompiles it: the doctor's finding), then serves it over HTTP until it
is stopped. Nothing in it knows of compiletrace; ``--ready port:PORT`` says when it is ready.

    python serve_forever.py PORT [PID_FILE|-] [cold]

PID_FILE, when given, gets this process's pid appended (a test checks none is left). With
``cold`` it serves with no warm-up: its first requests compile (their sizes, GET /SIZE).
"""

import http.server
import json
import os
import sys

import torch


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).relu() * 2


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        batch = int(self.path.strip("/") or 4)
        with torch.no_grad():
            out = MODEL(torch.randn(batch, 8))
        body = json.dumps({"shape": list(out.shape)}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass  # quiet: the test reads compiletrace's lines


if __name__ == "__main__":
    port = int(sys.argv[1])
    if len(sys.argv) > 2 and sys.argv[2] != "-":
        with open(sys.argv[2], "a") as f:
            f.write(f"{os.getpid()}\n")
    torch.manual_seed(0)
    MODEL = torch.compile(Model(), backend="aot_eager")
    with torch.no_grad():
        for batch in () if sys.argv[3:] == ["cold"] else (4, 5):  # the second size recompiles
            MODEL(torch.randn(batch, 8))
    server = http.server.HTTPServer(("127.0.0.1", port), Handler)
    print(f"serving on {port}", flush=True)
    server.serve_forever()
