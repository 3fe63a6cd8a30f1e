"""The serving process's collector and allocator settings (collector.py, memory.py)."""

from __future__ import annotations

import gc
import platform
from collections.abc import Iterator

import pytest

from inline_core.server.collector import YOUNG_THRESHOLD, settle_startup_heap
from inline_core.server.memory import limit_malloc_arenas


@pytest.fixture
def restored_collector() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("restored_collector")
def test_settling_freezes_what_exists_and_raises_the_young_threshold() -> None:
    survivor = [object() for _ in range(100)]
    settle_startup_heap()
    assert gc.get_freeze_count() >= len(survivor)
    assert gc.get_threshold()[0] == YOUNG_THRESHOLD
    # Objects made afterwards are still collected: a cycle created now goes away.
    cycle: list[object] = []
    cycle.append(cycle)
    del cycle
    assert gc.collect() >= 1


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_arena_cap_applies_on_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert limit_malloc_arenas() is True


def test_a_user_set_arena_max_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert limit_malloc_arenas() is False
