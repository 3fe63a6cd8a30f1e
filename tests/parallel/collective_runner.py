"""A light runner for the group's own tests: real collectives per step, no model to load.

Loaded inside the ranks by dotted path (the tests put this folder on the ranks' PYTHONPATH). Each
step all-reduces every rank's contribution, so a dead or stopped rank blocks the others exactly as
it would inside a split transformer forward.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping

import numpy as np
import torch
import torch.distributed as dist

from inline_core.parallel.protocol import Json
from inline_core.parallel.runner import JobControl, JobOutput, WorkerContext


class CollectiveRunner:
    def __init__(self, context: WorkerContext, name: Json = None) -> None:
        self.context = context
        self.name = name  # the `name` of the args it was loaded with (a stand-in for a model)

    def describe(self) -> dict[str, Json]:
        return {"runner": "collective", "pid": os.getpid(), "loaded": self.name}

    def run(
        self, params: Mapping[str, Json], blobs: Mapping[str, bytes], control: JobControl
    ) -> JobOutput:
        steps = int(str(params.get("steps", 2)))
        pause = float(str(params.get("stepS", 0.0)))
        fail_rank = params.get("failRank")
        crash_rank = params.get("crashRank")  # dies the way native code does: a message, no reply
        control.phase("sample")
        total = 0.0
        for step in range(1, steps + 1):
            if fail_rank in (self.context.rank, "all"):
                raise ValueError(f"rank {self.context.rank} failed at step {step}")
            if crash_rank is not None:
                self._crash(
                    crash_rank,
                    later_words=bool(params.get("peersWriteLater")),
                    silent_peers=bool(params.get("peersDieSilently")),
                )
            value = torch.tensor([float(self.context.rank + 1)])
            dist.all_reduce(value)  # pyright: ignore[reportUnknownMemberType]
            total += float(value[0])
            if pause:
                time.sleep(pause)
            control.step(step, steps)
        payload = np.frombuffer(blobs.get("payload", b""), dtype=np.uint8)
        return JobOutput(
            meta={
                "rank": self.context.rank,
                "total": total,
                "pid": os.getpid(),
                "loaded": self.name,
            },
            arrays={"echo": payload[::-1].copy(), "ranks": np.arange(self.context.world_size)},
        )

    def _crash(self, crash_rank: Json, *, later_words: bool, silent_peers: bool = False) -> None:
        """`crash_rank` writes its last words and dies. With `later_words`, every other rank first
        writes an error line of its own, after those words and before the death (two barriers).
        With `silent_peers`, every other rank dies too, without a word, once those words are
        written (as a native abort in a collective does): the server sees the connections close
        in either order."""
        rank = self.context.rank
        if rank == crash_rank:
            print(f"RuntimeError: rank {rank} crashed in a collective", file=sys.stderr, flush=True)
        if silent_peers:
            dist.barrier()  # pyright: ignore[reportUnknownMemberType]
            os._exit(134)
        if later_words:
            dist.barrier()  # pyright: ignore[reportUnknownMemberType]
            if rank != crash_rank:
                line = f"RuntimeError: rank {rank} wrote this after rank {crash_rank}'s last words"
                print(line, file=sys.stderr, flush=True)
            dist.barrier()  # pyright: ignore[reportUnknownMemberType]
        if rank == crash_rank:
            os._exit(134)


def load(context: WorkerContext, args: Mapping[str, Json]) -> CollectiveRunner:
    if args.get("failToLoad"):
        raise FileNotFoundError(f"no model at {args['failToLoad']}")
    return CollectiveRunner(context, args.get("name"))
