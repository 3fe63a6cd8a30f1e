"""How the server's forwards applied their LoRAs since it started (`/v1/health`'s `adapters`):
the mode its denoisers were placed with, the last fuse decision and its reason, and counts
(torch-free; updated from the step loop, read by health)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from inline_core.device.adapters import AdapterMode, FuseDecision


@dataclass
class AdapterTotals:
    mode: AdapterMode | None = None  # the last adapted model's (None: none has loaded a LoRA)
    decision: FuseDecision | None = None  # the last time a held stack was weighed for a copy
    fused_forwards: int = 0  # forwards on a fused private copy
    per_row_forwards: int = 0  # forwards with LoRAs applied per row on the shared weights
    fuses: int = 0  # fused copies made
    drops: int = 0  # fused copies let go as their stack went away (the residency counts the
    # ones it evicted for memory among its evictions)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def placed(self, mode: AdapterMode) -> None:
        with self._lock:
            self.mode = mode

    def forward(self, fused: bool) -> None:
        with self._lock:
            if fused:
                self.fused_forwards += 1
            else:
                self.per_row_forwards += 1

    def decided(self, decision: FuseDecision) -> None:
        with self._lock:
            self.decision = decision

    def fused(self) -> None:
        with self._lock:
            self.fuses += 1

    def dropped(self) -> None:
        with self._lock:
            self.drops += 1

    def to_json(self) -> dict[str, object]:
        with self._lock:
            mode = self.mode
            return {
                "mode": None if mode is None else mode.mode,
                "reason": None if mode is None else mode.reason,
                "lastDecision": None if self.decision is None else self.decision.to_json(),
                "fusedForwards": self.fused_forwards,
                "perRowForwards": self.per_row_forwards,
                "fuses": self.fuses,
                "drops": self.drops,
            }
