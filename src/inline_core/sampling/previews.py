"""`PreviewWorker`: step previews rendered off the step loop, newest first, stale ones dropped.

The loop hands each previewed job's x0 estimate to that job's `PreviewChannel` (`offer`: a store
into one slot, no copy, no wait). One worker thread renders what the channels hold: a channel
offered a newer estimate before the worker reached the older one keeps only the newer (the
older is dropped, counted), so a slow render or a slow client never builds a backlog, and the loop
never waits on a preview. Rendering is the caller's function (torch lives there, not here); a
render that raises is logged and the render goes on without that preview.

Each channel's renders take at most its `duty` of the time (10% unless the channel says: the
server gives each method its own, `runtime.preview.PREVIEW_DUTY`): after a render of r seconds
the worker rests r * (1/duty - 1) before the next, so a costly method (a tiny decoder on a CPU)
is coalesced into fewer previews instead of taking the step loop's processor (bench/previews.py).
A runner waiting for its last preview (`flush`) cuts the rest short, and so does a job's end that
must follow its last preview (`then`: a worker group's rank 0 sends a job's result only after
its last preview, so a client never sees a preview after the run's end, and the loop thread
never waits for it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

# (latents, latent format) -> an encoded image; (image, step, step count) -> delivered.
Render = Callable[[Any, str], Any]
Deliver = Callable[[Any, int, int], None]

DUTY = 0.1  # the share of the time the worker may spend rendering


@dataclass
class PreviewCounters:
    offered: int = 0
    rendered: int = 0
    dropped: int = 0  # replaced by a newer estimate before they were rendered
    failed: int = 0


@dataclass(frozen=True)
class _Offer:
    latents: Any
    latent_format: str
    step: int
    step_count: int


class PreviewChannel:
    """One job's previews: the newest offer waiting, rendered by its worker."""

    def __init__(
        self,
        worker: PreviewWorker,
        render: Render,
        deliver: Deliver,
        remote: dict[str, Any] | None = None,
        duty: float = DUTY,
    ) -> None:
        if not 0.0 < duty <= 1.0:
            raise ValueError(f"duty is a share of the time, in (0, 1]; got {duty}")
        self._worker = worker
        self.rest = 1.0 / duty - 1.0  # seconds of rest per second of its rendering
        self.render = render
        self.deliver = deliver
        self.remote = remote  # how a worker group's rank 0 renders them (see `PreviewSink`)
        self.pending: _Offer | None = None  # guarded by the worker's lock
        self.after: list[Callable[[], None]] = []  # run once all offered is delivered (`then`)

    def offer(self, latents: Any, latent_format: str, step: int, step_count: int, /) -> None:
        self._worker.put(self, _Offer(latents, latent_format, step, step_count))

    def show(self, image: Any, step: int, step_count: int, /) -> None:
        self.deliver(image, step, step_count)

    def flush(self, timeout: float) -> bool:
        """Wait until what was offered is delivered (the run's runner calls it once its job is
        done, so its last preview is out before the run ends); False if `timeout` passed."""
        return self._worker.wait_delivered(self, timeout)

    def then(self, action: Callable[[], None]) -> None:
        """Run `action` once what was offered is delivered, without waiting for it: at once, on
        this thread, when nothing is waiting or rendering; else on the worker's thread right
        after the last delivery (rendered without its rest), or at the worker's close."""
        self._worker.after_delivered(self, action)


class PreviewWorker:
    def __init__(self, name: str = "inline-previews", duty: float = DUTY) -> None:
        if not 0.0 < duty <= 1.0:
            raise ValueError(f"duty is a share of the time, in (0, 1]; got {duty}")
        self._name = name
        self._duty = duty  # a channel's unless it says
        self._rest_until = 0.0  # monotonic: no render starts before it (unless hurried)
        self._hurry = 0  # flushes and `then` actions waiting: no rest meanwhile
        self._cond = threading.Condition()
        self._ready: list[PreviewChannel] = []  # channels with an offer waiting, oldest first
        self._thread: threading.Thread | None = None
        self._closed = False
        self._rendering: PreviewChannel | None = None  # whose render is in progress
        self._awaiting: list[PreviewChannel] = []  # channels with actions waiting (`then`)
        self.counters = PreviewCounters()

    def channel(
        self,
        render: Render,
        deliver: Deliver,
        remote: dict[str, Any] | None = None,
        duty: float | None = None,
    ) -> PreviewChannel:
        return PreviewChannel(self, render, deliver, remote, self._duty if duty is None else duty)

    def put(self, channel: PreviewChannel, offer: _Offer) -> None:
        with self._cond:
            if self._closed:
                return
            self.counters.offered += 1
            idle = not self._ready  # the worker waits for work, not for the end of its rest
            if channel.pending is not None:
                self.counters.dropped += 1  # the worker had not reached it: newest wins
            else:
                self._ready.append(channel)
            channel.pending = offer
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()
            # Woken only when it waits for work: a worker resting or rendering finds the offer
            # by itself, and a wake-up it does not need would take the interpreter lock from
            # the step loop (the loop offers every step; bench/previews.py).
            if idle:
                self._cond.notify()

    def after_delivered(self, channel: PreviewChannel, action: Callable[[], None]) -> None:
        with self._cond:
            now = self._closed or self._delivered(channel)
            if not now:
                channel.after.append(action)
                if channel not in self._awaiting:
                    self._awaiting.append(channel)
                self._hurry += 1  # no rest before this channel's last render
                self._cond.notify_all()
        if now:
            _run(action)

    def _delivered(self, channel: PreviewChannel) -> bool:
        return channel.pending is None and self._rendering is not channel

    def wait_idle(self, timeout: float) -> bool:
        """Block until nothing waits or renders (tests, benches); False after `timeout`."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._ready and self._rendering is None, timeout)

    def wait_delivered(self, channel: PreviewChannel, timeout: float) -> bool:
        with self._cond:
            self._hurry += 1
            self._cond.notify_all()
            try:
                return self._cond.wait_for(
                    lambda: self._closed or self._delivered(channel), timeout
                )
            finally:
                self._hurry -= 1

    def stats(self) -> dict[str, int]:
        c = self.counters
        return {
            "offered": c.offered,
            "rendered": c.rendered,
            "dropped": c.dropped,
            "failed": c.failed,
        }

    def close(self) -> None:
        with self._cond:
            self._closed = True
            for channel in self._ready:
                channel.pending = None
            self._ready.clear()
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10.0)
        with self._cond:
            awaiting = list(self._awaiting)
        for channel in awaiting:  # what waited on a delivery runs all the same
            for action in self._take_after(channel):
                _run(action)

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._closed:
                    resting = self._rest_until - time.monotonic()
                    if self._ready and (resting <= 0 or self._hurry):
                        break
                    self._cond.wait(resting if self._ready else None)
                if self._closed:
                    return
                channel = self._ready.pop(0)
                offer, channel.pending = channel.pending, None
                self._rendering = channel
            started = time.monotonic()
            actions: list[Callable[[], None]] = []
            try:
                if offer is not None:
                    self._render(channel, offer)
            finally:
                ended = time.monotonic()
                with self._cond:
                    self._rendering = None
                    self._rest_until = ended + (ended - started) * channel.rest
                    if channel.pending is None:
                        actions = self._take_after(channel)
                    self._cond.notify_all()
            for action in actions:
                _run(action)

    def _take_after(self, channel: PreviewChannel) -> list[Callable[[], None]]:
        """The channel's actions waiting on its delivery, taken (the caller runs them)."""
        with self._cond:
            actions, channel.after = channel.after, []
            self._hurry -= len(actions)
            if channel in self._awaiting:
                self._awaiting.remove(channel)
            return actions

    def _render(self, channel: PreviewChannel, offer: _Offer) -> None:
        try:
            image = channel.render(offer.latents, offer.latent_format)
            channel.deliver(image, offer.step, offer.step_count)
        except Exception:
            self.counters.failed += 1
            log.exception("a step preview failed; the render goes on without it")
            return
        self.counters.rendered += 1


def _run(action: Callable[[], None]) -> None:
    try:
        action()
    except Exception:
        log.exception("an action waiting on a step preview's delivery failed")
