"""The standard step runner, whose rank 1 loses its C++ compiler on cue: a real failing compile in
one rank of a live group, for `test_parallel_compile.py`.

Loaded inside the ranks by dotted path (the tests put this folder on the ranks' PYTHONPATH). Until
the file named by `BREAK_FLAG` exists it is the step runner itself; once it does, rank 1 points
inductor at a C++ compiler that does not exist before its next command (inductor checks the
compiler before any cache lookup, so the next graph it compiles fails for real, whatever inductor's
caches on disk hold) and drops dynamo's compiled code once, so its next forward of the blocks
compiles again: the same shape class as before fails on rank 1 while rank 0 keeps its compiler
and its graphs (it compiles nothing new, which keeps a second cold compile out of the test). The
flag is checked between rank 0's commands, never inside a forward.
"""

from __future__ import annotations

import os
import queue
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import torch

from inline_core.parallel.collective import Command
from inline_core.parallel.protocol import Json, Message
from inline_core.parallel.runner import WorkerContext
from inline_core.parallel.step_runner import (
    Receive,
    Send,
    Share,
    StepLoopRunner,
    load_step_runner,
)

BREAK_FLAG = "INLINE_TEST_BREAK_COMPILER_FLAG"  # the file whose presence breaks the compiler
FAILING_RANK = 1


def missing_compiler(flag: Path) -> str:
    """The C++ compiler rank 1 is pointed at: a path beside the flag that nothing creates."""
    return str(flag.with_name(flag.name + ".no-such-c++"))


def _break_compiler(flag: Path) -> None:
    inductor: Any = cast(Any, torch)._inductor.config
    inductor.cpp.cxx = (missing_compiler(flag),)
    inductor.fx_graph_cache = False
    cast(Any, torch)._functorch.config.enable_autograd_cache = False
    cast(Any, torch)._dynamo.reset()  # the graphs compiled so far: gone, the next call compiles


class CompilerBreakingRunner:
    """`StepLoopRunner` with rank 1's compiler broken once `flag` exists."""

    def __init__(self, runner: StepLoopRunner, flag: Path) -> None:
        self._runner = runner
        self._flag = flag
        self._broken = False

    def describe(self) -> dict[str, Json]:
        return self._runner.describe()

    def serve_leader(
        self, inbox: queue.Queue[Message], send: Send, share: Share, idle_tick_s: float
    ) -> None:
        self._runner.serve_leader(inbox, send, share, idle_tick_s)

    def serve_follower(self, receive: Receive, send: Send) -> None:
        def receive_then_check() -> Command:
            command = receive()
            if not self._broken and self._flag.exists():
                _break_compiler(self._flag)
                self._broken = True
            return command

        self._runner.serve_follower(receive_then_check, send)


def load(
    context: WorkerContext, args: Mapping[str, Json]
) -> StepLoopRunner | CompilerBreakingRunner:
    runner = load_step_runner(context, args)
    flag = os.environ.get(BREAK_FLAG)
    if not flag or context.rank != FAILING_RANK:
        return runner
    return CompilerBreakingRunner(runner, Path(flag))
