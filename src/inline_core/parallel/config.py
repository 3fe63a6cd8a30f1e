"""How a `WorkerGroup` is launched and watched (torch-free)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field

from inline_core.parallel.settings import RankSettings


@dataclass(frozen=True)
class GroupConfig:
    ranks: RankSettings
    # Deadlines. A rank that sends no heartbeat for `heartbeat_timeout_s` is hung; a job with no
    # step for `step_timeout_s` is hung (None: heartbeats only); after one rank reports a job
    # error, the others have `error_grace_s` to report theirs or the group is out of step.
    start_timeout_s: float = 180.0
    heartbeat_timeout_s: float = 10.0
    step_timeout_s: float | None = None
    error_grace_s: float = 2.0
    shutdown_grace_s: float = 5.0
    python: str = sys.executable
    env: Mapping[str, str] = field(default_factory=dict[str, str])
    # CPU ranks share the cores: by default each gets cores // ranks threads.
    threads_per_rank: int | None = None

    @property
    def nproc(self) -> int:
        return max(1, self.ranks.split.world_size)

    def rank_threads(self) -> int:
        if self.threads_per_rank is not None:
            return max(1, self.threads_per_rank)
        return max(1, (os.cpu_count() or 1) // self.nproc)
