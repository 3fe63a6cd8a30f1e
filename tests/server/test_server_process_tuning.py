"""The serving process's collector, allocator and OpenMP settings (collector.py, memory.py,
openmp.py)."""

from __future__ import annotations

import gc
import platform
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from inline_core.server import openmp
from inline_core.server.collector import YOUNG_THRESHOLD, settle_startup_heap
from inline_core.server.memory import SERVER_MALLOC, tune_malloc
from tests.server.server_support import running_server


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


@pytest.mark.parametrize(
    ("environ", "setting"),
    [
        ({}, openmp.SpinSetting(openmp.LIBGOMP_DEFAULT, "libgomp")),
        ({"GOMP_SPINCOUNT": "10000"}, openmp.SpinSetting(10_000, "GOMP_SPINCOUNT")),
        ({"GOMP_SPINCOUNT": "infinite"}, openmp.SpinSetting("infinite", "GOMP_SPINCOUNT")),
        ({"OMP_WAIT_POLICY": "PASSIVE"}, openmp.SpinSetting(0, "OMP_WAIT_POLICY")),
        ({"OMP_WAIT_POLICY": "active"}, openmp.SpinSetting(30_000_000_000, "OMP_WAIT_POLICY")),
        # GOMP_SPINCOUNT wins over the policy, as in libgomp
        (
            {"OMP_WAIT_POLICY": "passive", "GOMP_SPINCOUNT": "500"},
            openmp.SpinSetting(500, "GOMP_SPINCOUNT"),
        ),
    ],
)
def test_the_spin_is_read_as_libgomp_reads_it(
    environ: dict[str, str], setting: openmp.SpinSetting
) -> None:
    assert openmp.spin_setting(environ) == setting


def test_a_real_server_reports_how_its_compute_threads_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(openmp.POLICY, raising=False)
    monkeypatch.setenv(openmp.VARIABLE, "10000")  # what a user on a shared machine starts with
    with running_server(tmp_path) as live:
        device = httpx.get(live.base + "/v1/health", timeout=30).json()["device"]
    assert device["openmp"] == {"spinCount": 10_000, "source": "GOMP_SPINCOUNT"}


@pytest.fixture
def forget_choice() -> Iterator[None]:
    yield
    openmp._chosen = None  # pyright: ignore[reportPrivateUsage]


@pytest.mark.usefixtures("forget_choice")
@pytest.mark.parametrize(
    ("environ", "load", "chosen"),
    [
        ({}, 17.3, "load 17.3 on 2 CPUs"),  # three fleet servers and more on 2 cores
        ({}, 3.9, None),  # busy, not oversubscribed: libgomp's default spin was fastest
        ({"GOMP_SPINCOUNT": "10000"}, 17.3, None),  # the user's own choice wins
        ({"OMP_WAIT_POLICY": "active"}, 17.3, None),
    ],
)
def test_oversubscribed_cpus_make_the_compute_threads_wait_passively(
    environ: dict[str, str], load: float, chosen: str | None
) -> None:
    before = dict(environ)
    assert openmp.choose_wait(environ, lambda: load, lambda: 2) == chosen
    if chosen is None:
        assert environ == before
    else:
        assert environ == {"OMP_WAIT_POLICY": "passive"}
        assert openmp.spin_setting(environ) == openmp.SpinSetting(0, f"inline-core ({chosen})")
