"""A server's first requests (``run --traffic``): GET /SIZE for each SIZE, in order, each
answered with 200 or this exits 1.

    python send_requests.py PORT SIZE [SIZE...]
"""

import sys
import urllib.request

port = int(sys.argv[1])
for size in sys.argv[2:]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/{size}", timeout=300) as reply:
        if reply.status != 200:
            sys.exit(1)
print(f"sent {len(sys.argv) - 2} requests", flush=True)
