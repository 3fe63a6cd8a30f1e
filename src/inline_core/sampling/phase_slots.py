"""`PhaseSlots`: how many one-off phases (encodes, decodes) run at once off the step loop, and the
decodes that wait for a slot, so that whoever gets one decodes the waiting jobs together.

A finished job's decode is first added to the waiting list (`add`, never blocks: the loop thread
calls it), then someone `finish`es it: while its own decode is not taken, that thread takes a slot
and decodes the next group, oldest first (`decode_batch.take_group`). So sixteen jobs that finish
in one forward are decoded in one call by the first thread to get a slot, and the other fifteen
find their images ready.
"""

from __future__ import annotations

import threading
from collections.abc import Generator
from contextlib import contextmanager
from typing import Any

from inline_core.sampling.decode_batch import DecodeItem, decode_group, decode_item, take_group
from inline_core.sampling.job import SampleJob
from inline_core.sampling.limits import BatchLimits


class PhaseSlots:
    def __init__(self, count: int, limits: BatchLimits) -> None:
        self.limits = limits
        self._cond = threading.Condition()
        self._free = max(1, count)
        self._waiting: list[DecodeItem] = []
        self._adding = 0  # threads inside `adding`: groups are not taken meanwhile
        self._decoding = 0  # added and not yet finished
        self.batched_decodes = 0  # decode calls that carried more than one job
        self.batch_decoded_jobs = 0  # jobs decoded in those calls

    @contextmanager
    def slot(self) -> Generator[None, None, None]:
        with self._cond:
            while self._free == 0:
                self._cond.wait()
            self._free -= 1
        try:
            yield
        finally:
            self._release()

    @contextmanager
    def adding(self) -> Generator[None, None, None]:
        """Hold group-taking while several decodes are added (the jobs one forward finished)."""
        with self._cond:
            self._adding += 1
        try:
            yield
        finally:
            with self._cond:
                self._adding -= 1
                self._cond.notify_all()

    def add(self, job: SampleJob, state: Any) -> DecodeItem:
        item = decode_item(job, state, self.limits)
        with self._cond:
            self._waiting.append(item)
            self._decoding += 1
        return item

    def finish(self, item: DecodeItem) -> Any:
        """Decode groups until `item` is taken, then wait for it; its output, or its error."""
        try:
            while True:
                with self._cond:
                    while not item.taken and (self._free == 0 or self._adding):
                        self._cond.wait()
                    if item.taken:
                        break
                    self._free -= 1
                    group = take_group(self._waiting, self.limits)
                    self._cond.notify_all()  # those whose items were taken stop waiting for a slot
                shared = 0
                try:
                    shared = decode_group(group)
                finally:
                    self._release(shared)
            return item.result()
        finally:
            with self._cond:
                self._decoding -= 1

    def discard(self, item: DecodeItem) -> None:
        """Forget an added decode that nobody will `finish` (its sampler closed)."""
        with self._cond:
            if item in self._waiting:
                self._waiting.remove(item)
            self._decoding -= 1

    def counts(self) -> int:
        """Jobs added for decode and not yet finished."""
        with self._cond:
            return self._decoding

    def _release(self, shared: int = 0) -> None:
        with self._cond:
            self._free += 1
            if shared:
                self.batched_decodes += 1
                self.batch_decoded_jobs += shared
            self._cond.notify_all()
