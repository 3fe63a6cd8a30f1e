"""The serving process's collector and allocator settings (collector.py, memory.py)."""

from __future__ import annotations

import gc
import platform
from collections.abc import Iterator

import pytest

from inline_core.server.collector import YOUNG_THRESHOLD, settle_startup_heap
from inline_core.server.memory import SERVER_MALLOC, tune_malloc


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
def test_malloc_settings_apply_on_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    for _parameter, _value, variable in SERVER_MALLOC:
        monkeypatch.delenv(variable, raising=False)
    assert tune_malloc() == [
        "MALLOC_ARENA_MAX=2",
        f"MALLOC_MMAP_THRESHOLD_={64 * 1024 * 1024}",
        f"MALLOC_TRIM_THRESHOLD_={128 * 1024 * 1024}",
    ]


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_a_users_own_malloc_setting_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "131072")
    assert tune_malloc() == ["MALLOC_ARENA_MAX=2", f"MALLOC_TRIM_THRESHOLD_={128 * 1024 * 1024}"]
