"""A request's step cache state: one `RowCache` per row it puts into a forward (its positive
prompt, and its negative one under guidance), each deciding on its own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from inline_core.runtime.step_cache import StepCacheSettings


@dataclass(eq=False)
class RowCache:
    settings: StepCacheSettings
    forwards: int = 0  # forwards this row went through
    streak: int = 0  # reuses in a row since it last computed
    computed: int = 0
    reused: int = 0
    skipped_blocks: int = 0  # block calls this row skipped (its middle blocks, when reused)
    computed_blocks: int = 0  # and the block calls it made
    front: torch.Tensor | None = None  # the front blocks' residual at its last computed step
    middle: torch.Tensor | None = None  # the middle blocks' residual at that step
    # And of the second stream, for a dual-stream block (`BlockLayout.context`).
    middle_context: torch.Tensor | None = None
    # The backend whose blocks made those residuals: a request handed to another transformer
    # (e.g. the next expert of a two-expert model) computes before it compares again.
    owner: object | None = None

    def may_reuse(self) -> bool:
        """Whether this forward may reuse at all (before its residual is compared): never in
        warmup, never past the cap on consecutive reuses, never before one computed step."""
        s = self.settings
        return (
            s.threshold > 0
            and self.forwards >= s.warmup
            and self.streak < s.max_consecutive
            and self.front is not None
            and self.middle is not None
        )

    def record(self, reuse: bool, middle: int, blocks: int) -> None:
        """One forward's decision: `middle` blocks skipped when it reused, of `blocks`."""
        self.forwards += 1
        skipped = middle if reuse else 0
        self.skipped_blocks += skipped
        self.computed_blocks += blocks - skipped
        if reuse:
            self.reused += 1
            self.streak += 1
        else:
            self.computed += 1
            self.streak = 0


class RequestCache:
    """A request's rows by branch ("positive", "negative")."""

    def __init__(self, settings: StepCacheSettings) -> None:
        self.settings = settings
        self._rows: dict[str, RowCache] = {}

    def row(self, branch: str) -> RowCache:
        found = self._rows.get(branch)
        if found is None:
            found = self._rows[branch] = RowCache(self.settings)
        return found

    def stats(self) -> dict[str, Any]:
        rows = self._rows.values()
        return {
            "computedSteps": sum(r.computed for r in rows),
            "reusedSteps": sum(r.reused for r in rows),
            "skippedBlocks": sum(r.skipped_blocks for r in rows),
            "computedBlocks": sum(r.computed_blocks for r in rows),
        }

    def release(self) -> None:
        """Drop the cached residuals (the counts stay)."""
        for r in self._rows.values():
            r.front = r.middle = r.middle_context = None


def request_cache(settings: StepCacheSettings | None) -> RequestCache | None:
    """A new request's cache state (None: its render is not cached)."""
    return None if settings is None else RequestCache(settings)


def branch_row(cache: object, branch: str) -> RowCache | None:
    """A request's row for `branch` of a forward, from its state's `cache` (None: not cached)."""
    return cache.row(branch) if isinstance(cache, RequestCache) else None


def release(cache: object) -> None:
    """Drop a finished request's residuals (a state may outlive its render)."""
    if isinstance(cache, RequestCache):
        cache.release()
