"""`claim_compute_thread`: the claiming thread keeps every intra-op thread and every thread that
computes later gets one, so a CPU server's process holds one OpenMP team (diffusion/threads.py).
Run in a fresh interpreter: torch's thread defaults are process-wide."""

from __future__ import annotations

import json
import os
import subprocess
import sys

PROBE = """
import json, threading
import torch
from inline_core.diffusion.threads import COMPUTE_THREADS, claim_compute_thread

seen = {}
def loop():
    claim_compute_thread()
    x = torch.ones(256, 256)
    (x @ x).sum()
    seen["loop"] = torch.get_num_threads()
def other():
    seen["other"] = torch.get_num_threads()
t = threading.Thread(target=loop); t.start(); t.join()
t = threading.Thread(target=other); t.start(); t.join()
# A later claim (a second sampler in one process) still gets every thread.
t = threading.Thread(target=loop); t.start(); t.join()
print(json.dumps({"compute": COMPUTE_THREADS, **seen}))
"""


def test_the_claiming_thread_keeps_its_threads_and_later_threads_compute_on_one() -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out.strip().splitlines()[-1]) == {"compute": 2, "loop": 2, "other": 1}
