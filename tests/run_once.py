"""A folder a session fixture builds once per test run, whichever xdist worker asks first.

Under pytest-xdist every worker runs its own session, so a session fixture that builds files
(a subprocess importing torch, a pip install) would build them once per worker. Here the first
worker to ask builds the folder in the run's own temporary folder (the one xdist gives each
worker a folder below), under a lock; the others wait on the lock and use it. In one process it
is the session's folder as before. Only for folders the tests read and never change.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def built_once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder `name`, filled by `build(folder)` once for the whole run."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        folder = factory.mktemp(name)
        build(folder)
        return folder
    run = factory.getbasetemp().parent  # the controller's folder for this run: shared
    folder, done = run / name, run / f"{name}.built"
    with (run / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # a worker that failed half way
            folder.mkdir()
            build(folder)
            done.touch()
    return folder
