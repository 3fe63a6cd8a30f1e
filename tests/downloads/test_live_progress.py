"""`LiveProgress`: the rate and ETA a download shows, on a clock the test moves."""

from __future__ import annotations

import pytest

from inline_core.downloads.live import RATE_WINDOW_S, LiveProgress

MB = 1024 * 1024


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_rate_is_the_bytes_of_the_window_and_gives_an_eta() -> None:
    clock = Clock()
    live = LiveProgress([0, 0], clock)
    assert live.rate() == 0.0 and live.eta_s(4 * MB) is None  # nothing to measure yet
    live.update(0, 0)
    for _ in range(4):
        clock.now += 0.5
        live.update(0, live.held[0] + MB // 2)
    assert live.done == 2 * MB
    assert live.rate() == pytest.approx(MB)  # 2 MB in 2 s
    assert live.eta_s(4 * MB) == pytest.approx(2.0)


def test_a_stalled_link_shows_a_falling_rate_then_none() -> None:
    clock = Clock()
    live = LiveProgress([0], clock)
    live.update(0, 0)
    clock.now += 1.0
    live.update(0, MB)
    assert live.rate() == pytest.approx(MB)
    clock.now += 1.0  # no bytes for a second
    assert live.rate() == pytest.approx(MB / 2)
    clock.now += RATE_WINDOW_S
    assert live.rate() == 0.0 and live.eta_s(2 * MB) is None


def test_only_the_last_window_counts() -> None:
    clock = Clock()
    live = LiveProgress([0], clock)
    live.update(0, 0)
    clock.now += 1.0
    live.update(0, 10 * MB)  # a fast start
    for _ in range(20):  # then a slow link: 0.1 MB/s for 20 s
        clock.now += 1.0
        live.update(0, live.held[0] + MB // 10)
    assert live.rate() == pytest.approx(MB / 10, rel=0.05)


def test_a_file_that_starts_over_restarts_the_rate() -> None:
    clock = Clock()
    live = LiveProgress([3 * MB, 0], clock)  # resumed: bytes already on disk are not a rate
    live.update(0, 3 * MB)
    clock.now += 1.0
    live.update(0, 4 * MB)
    assert live.rate() == pytest.approx(MB)
    live.update(0, 0)  # the hub ignored the range: the whole file comes again
    clock.now += 1.0
    live.update(0, MB // 2)
    assert live.done == MB // 2
    assert live.rate() == pytest.approx(MB / 2)
