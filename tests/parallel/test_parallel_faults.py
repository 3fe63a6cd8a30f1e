"""Faults that need a group of their own: a group that cannot start (a rank that cannot load its
model, a launcher that dies at once) and a server that dies first. Each is reported clearly and
leaves no process behind. (Faults of a running group are in test_parallel_group.py.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
from parallel_support import HERE, alive, group_config, group_pids, wait_gone

from inline_core.parallel.errors import WorkerStartError
from inline_core.parallel.group import WorkerGroup

pytestmark = pytest.mark.worker_group  # starts groups of its own


def test_a_missing_model_is_a_clear_start_error() -> None:
    config = group_config()
    ranks = config.ranks
    bad = replace(config, ranks=replace(ranks, runner_args={"failToLoad": "/nowhere/zimage"}))
    g = WorkerGroup(bad)
    with pytest.raises(WorkerStartError, match="FileNotFoundError: no model at /nowhere/zimage"):
        g.start()
    pids = group_pids(g)
    assert len(pids) == 3 and alive(pids) == []
    g.close()
    assert g.last_failure is not None and "no model at /nowhere/zimage" in g.last_failure


def test_a_launcher_that_dies_at_once_is_explained_from_its_stderr(tmp_path: Path) -> None:
    # A broken torch install: the launcher itself fails before any rank could report.
    broken = tmp_path / "torch"
    broken.mkdir()
    (broken / "__init__.py").write_text("raise ImportError('this torch install is broken')\n")
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), str(HERE)])}
    g = WorkerGroup(group_config(env=env))
    with pytest.raises(WorkerStartError, match="ImportError: this torch install is broken"):
        g.start()
    launcher = g.pids()["launcher"]
    assert launcher is not None and alive([launcher]) == []
    g.close()


def test_ranks_exit_when_the_server_dies_first(tmp_path: Path) -> None:
    server = tmp_path / "server.py"
    server.write_text(
        textwrap.dedent(
            f"""
            import json, sys, time
            sys.path.insert(0, {str(HERE)!r})
            from parallel_support import group_config, group_pids
            from inline_core.parallel.group import WorkerGroup

            group = WorkerGroup(group_config())
            group.submit({{"steps": 1}})
            folder = group._session.ipc.directory  # the private socket folder
            print(json.dumps([group_pids(group), folder]), flush=True)
            time.sleep(600)
            """
        )
    )
    proc = subprocess.Popen([sys.executable, str(server)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        pids, folder = json.loads(proc.stdout.readline())
        assert len(alive(pids)) == 3 and Path(folder).is_dir()
    finally:
        proc.kill()  # SIGKILL: the server gets no chance to clean up
        proc.wait()
    # The ranks notice (socket closed, server pid gone) and exit; the launcher follows them.
    assert wait_gone(pids, timeout=30.0) == []
    assert not Path(folder).exists()  # the socket and log the dead server could not remove
