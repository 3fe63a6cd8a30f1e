"""The control plane's commands cross real gloo ranks unchanged: a tick, a stop and a forward as
one fixed-size broadcast, a forward too long for it and anything else pickled after it."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"


pytestmark = pytest.mark.worker_group  # starts groups of its own


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_every_kind_of_command_reaches_the_other_ranks_as_rank_0_sent_it(tmp_path: Path) -> None:
    port, world = str(free_port()), 3
    outs = [tmp_path / f"rank{r}.json" for r in range(world)]
    env = {"PYTHONPATH": f"{SRC}:{HERE.parents[1]}", "PATH": "/usr/bin:/bin"}
    ranks = [
        subprocess.Popen(
            [sys.executable, str(HERE / "command_ranks.py"), str(r), str(world), port, str(out)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for r, out in enumerate(outs)
    ]
    logs = [p.communicate(timeout=120)[0].decode(errors="replace") for p in ranks]
    assert [p.returncode for p in ranks] == [0] * world, logs
    for out in outs:
        assert json.loads(out.read_text()) == [True] * 8
