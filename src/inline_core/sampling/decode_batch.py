"""Decoding finished jobs together: which ones share one `post_decode_many` call, and running it.

A pipeline that implements `SupportsBatchedDecode` says which states may be decoded in one call
(`decode_key`, e.g. the latent shape) and what each costs (`decode_pixels`). A group is the oldest
waiting job and the jobs after it with the same pipeline and key, bounded by `max_batch` and the
decode pixel budget (`limits.py` has the measurements); a job with no key, or alone over the
budget, is decoded by itself. If the batched call raises, the group is decoded again one by one,
so one bad job fails alone and the others still get their images.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from inline_core.components.step import supports_batched_decode
from inline_core.errors import RunFailed
from inline_core.sampling.job import SampleJob
from inline_core.sampling.limits import BatchLimits

log = logging.getLogger(__name__)


@dataclass(eq=False)
class DecodeItem:
    """One finished job waiting for (or in) its decode."""

    job: SampleJob
    state: Any
    key: tuple[int, Hashable] | None = None  # (pipeline id, decode_key); None: decode alone
    pixels: int = 0
    taken: bool = False  # a group holds it: whoever took it decodes it
    value: Any = None
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)

    def settle(self, value: Any = None, error: BaseException | None = None) -> None:
        if self.done.is_set():
            return
        self.value, self.error = value, error
        self.done.set()

    def result(self) -> Any:
        self.done.wait()
        if self.error is not None:
            raise self.error
        return self.value


def decode_item(job: SampleJob, state: Any, limits: BatchLimits) -> DecodeItem:
    """A decode of `state`, keyed for grouping when the pipeline and the limits allow it."""
    item = DecodeItem(job=job, state=state)
    pipeline = job.step_pipeline
    if not limits.batched_decodes or not supports_batched_decode(pipeline):
        return item
    try:
        key = pipeline.decode_key(state)
        pixels = int(pipeline.decode_pixels(state))
    except Exception:  # the decode itself will say what is wrong, for this job alone
        log.debug("no decode key for %s; decoding it alone", job.label, exc_info=True)
        return item
    if key is not None:
        item.key, item.pixels = (id(pipeline), key), pixels
    return item


def take_group(pending: list[DecodeItem], limits: BatchLimits) -> list[DecodeItem]:
    """Remove from `pending` (oldest first, not empty) and mark taken the next group."""
    leader = pending[0]
    group = [leader]
    total = leader.pixels
    if leader.key is not None:
        for item in pending[1:]:
            if len(group) >= limits.max_batch:
                break
            if item.key != leader.key or total + item.pixels > limits.decode_pixel_budget:
                continue
            group.append(item)
            total += item.pixels
    for item in group:
        pending.remove(item)
        item.taken = True
    return group


def decode_group(group: list[DecodeItem]) -> int:
    """Decode `group` (one pipeline) and settle every item; returns how many shared one call."""
    try:
        live: list[DecodeItem] = []
        for item in group:
            try:
                item.job.cancel.raise_if_cancelled()
                item.job.on_phase("decode")
            except Exception as exc:
                item.settle(error=exc)
                continue
            live.append(item)
        if len(live) > 1 and _decode_together(live):
            return len(live)
        pipeline = group[0].job.step_pipeline
        for item in live:
            try:
                item.settle(value=pipeline.post_decode(item.state))
            except Exception as exc:
                item.settle(error=exc)
        return 0
    except BaseException as exc:  # never leave a waiter hanging
        for item in group:
            item.settle(error=exc)
        raise


def _decode_together(items: list[DecodeItem]) -> bool:
    pipeline = items[0].job.step_pipeline
    if not supports_batched_decode(pipeline):
        return False
    try:
        outputs = list(pipeline.post_decode_many([item.state for item in items]))
        if len(outputs) != len(items):
            raise RunFailed(f"post_decode_many returned {len(outputs)} outputs for {len(items)}")
    except Exception:
        log.warning("batched decode of %d jobs failed; decoding them one by one", len(items))
        log.debug("batched decode failure", exc_info=True)
        return False
    for item, output in zip(items, outputs, strict=True):
        item.settle(value=output)
    return True
