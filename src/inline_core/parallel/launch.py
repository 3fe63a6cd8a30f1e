"""Launching the group with `torchrun`, and taking the whole process tree down again.

The launcher runs in its own session (`start_new_session`), so a signal to its process group never
reaches the server. torchrun starts each rank in a session of its own, so teardown kills the ranks
by pid (reported in their `Hello`) as well as every descendant still linked to the launcher.
torchrun writes its own output to the plan's log and redirects each rank's stdout and stderr (the
file descriptors, so native output too) into that rank's own files under `rank_log_dir`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import psutil

WORKER_MODULE = "inline_core.parallel.worker"


@dataclass(frozen=True)
class LaunchPlan:
    nproc: int
    env: Mapping[str, str]
    log_path: Path
    rank_log_dir: Path
    python: str = sys.executable
    extra_torchrun_args: tuple[str, ...] = field(default_factory=tuple[str, ...])

    def command(self) -> list[str]:
        # Port 0: the launcher's rendezvous store binds a port the kernel picks at bind time, so
        # there is no fixed port and no window between choosing a free port and taking it.
        return [
            self.python,
            "-m",
            "torch.distributed.run",
            "--nnodes",
            "1",
            "--nproc-per-node",
            str(self.nproc),
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            "127.0.0.1:0",
            "--max-restarts",
            "0",
            "--monitor-interval",
            "0.1",
            "--log-dir",
            str(self.rank_log_dir),
            "--redirects",
            "3",  # stdout and stderr of every rank
            *self.extra_torchrun_args,
            "--module",
            WORKER_MODULE,
        ]


def launch(plan: LaunchPlan) -> subprocess.Popen[bytes]:
    """Start torchrun; its own output goes to `plan.log_path`, each rank's to its own files."""
    env = dict(os.environ)
    env.update(plan.env)
    with open(plan.log_path, "ab") as log:
        return subprocess.Popen(
            plan.command(),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )


def process_tree(root_pid: int, extra_pids: Iterable[int] = ()) -> list[psutil.Process]:
    """`root_pid`, its descendants, and `extra_pids` with theirs (processes still alive)."""
    found: dict[int, psutil.Process] = {}
    for pid in (root_pid, *extra_pids):
        try:
            proc = psutil.Process(pid)
            found[pid] = proc
            for child in proc.children(recursive=True):
                found[child.pid] = child
        except psutil.Error:
            continue
    return list(found.values())


def kill_tree(
    launcher: subprocess.Popen[bytes],
    rank_pids: Iterable[int] = (),
    *,
    grace_s: float = 0.0,
) -> None:
    """Stop the launcher and every rank; SIGTERM first when `grace_s` > 0, then SIGKILL.

    Returns once the launcher is reaped and no process of the tree is left running."""
    procs = process_tree(launcher.pid, rank_pids)
    if grace_s > 0:
        _signal_all(procs, signal.SIGTERM)
        _, procs = psutil.wait_procs(procs, timeout=grace_s)
    # Ranks first, then the launcher: a launcher that outlives its ranks reaps them.
    ranks = [p for p in procs if p.pid != launcher.pid]
    _signal_all(ranks, signal.SIGKILL)
    psutil.wait_procs(ranks, timeout=5.0)
    _signal_all([p for p in procs if p.pid == launcher.pid], signal.SIGKILL)
    try:
        launcher.wait(timeout=10.0)
    except subprocess.TimeoutExpired:  # pragma: no cover - a process stuck in the kernel
        pass
    _wait_gone(procs, timeout=5.0)


def _signal_all(procs: Iterable[psutil.Process], sig: signal.Signals) -> None:
    for proc in procs:
        try:
            proc.send_signal(sig)
        except psutil.Error:
            continue


def _wait_gone(procs: list[psutil.Process], timeout: float) -> None:
    """Wait until none is running (a zombie awaiting its parent's reap counts as gone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(is_running(p) for p in procs):
            return
        time.sleep(0.02)


def is_running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def is_down(proc: psutil.Process) -> bool:
    """Whether the process is gone or has begun to exit."""
    return not is_running(proc) or is_exiting(proc.pid)


_PF_EXITING = 0x4  # linux/sched.h


def is_exiting(pid: int) -> bool:
    """Whether the process has begun to exit without being a zombie yet (Linux; else False).

    Exactly what ordering needs: a process's sockets close only once all its threads are exiting,
    so a peer that sees a reset from it can already see its main thread's PF_EXITING."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        flags = int(stat.rsplit(")", 1)[1].split()[6])  # after the command name, which may hold ")"
    except (OSError, IndexError, ValueError):
        return False
    return bool(flags & _PF_EXITING)


def read_tail(path: Path, limit: int = 8000, since: int = 0) -> str:
    """The last `limit` bytes of a log, none from before byte offset `since`."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(since, size - limit, 0))
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def log_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def summarize_failure(log: str) -> str:
    """The most telling line of a failed start: the last exception line, else the last line."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    return last_exception_line(log) or (lines[-1] if lines else "no output")


def last_exception_line(log: str) -> str | None:
    """The last `SomeError: ...` line of a log, if it has one."""
    for line in reversed([ln.strip() for ln in log.splitlines()]):
        head = line.split(":", 1)[0]
        if head.endswith(("Error", "Exception")) and " " not in head:
            return line
    return None
