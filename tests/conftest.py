"""Fixtures every area may use: the run store's two backends.

`store_backend` runs a test once on SQLite and once on PostgreSQL; `database_url` is then None
(SQLite, the data dir's runs.db) or a fresh database on one real PostgreSQL server that the
session starts on first use (tests/postgres_cluster.py).
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING

import pytest

from tests.postgres_cluster import PostgresCluster, postgres_bin
from tests.worker_groups import (
    SHARED,
    XDIST_INDUCTOR,
    XDIST_WORKER_GROUPS,
    SharedGroups,
    after_teardown,
    check_xdist_grouped,
    group_for_xdist,
    run_beside_each_other,
)
from tests.xdist_timeline import Timeline

if TYPE_CHECKING:
    from xdist.remote import Producer
    from xdist.scheduler.protocol import Scheduling
    from xdist.workermanage import WorkerController

pytest_plugins = ["tests.family_dists"]  # the test families' distributions, for any area
BACKENDS = ("sqlite", "postgresql")
# The tiny-model parity tests compare with diffusers in float32 on any CPU (auto would pick bf16
# on one with native bf16): servers and ranks the tests start inherit this, and tests of bf16
# ask for it themselves.
os.environ.setdefault("INLINE_DTYPE", "float32")
# Before anything loads torch (libgomp reads it once, at load; nothing above loads it): the
# compute threads of the xdist workers and of the servers and ranks they start (which inherit
# it) sleep at a barrier instead of spinning out libgomp's 300,000 rounds there. The suite keeps
# 2 cores busier than they have threads for, so a spinning thread mostly burns the core another
# process waits for: tests/families/zimage, sdxl and sampling on 2 workers took 102-113 s with
# the spin against 92-97 s passive, two rounds each way (`server/openmp.py`: servers alike).
os.environ.setdefault("OMP_WAIT_POLICY", "passive")


# The serial chains, handed out first (xdist_order.py) and timed in the summary (xdist_timeline.py).
CHAINS = (XDIST_WORKER_GROUPS, XDIST_INDUCTOR)
# Then the modules long in time but few in tests (the timeline's slowest modules): xdist hands
# out the most tests first, so these came last and one of them ran alone on one worker while the
# other idled (43 s of a fresh-clone run). Handed out early, quick modules fill the end instead.
LONG_FIRST = (
    "tests/families/ltx2/test_ltx25_upscale.py",
    "tests/hardening/test_hardening_fleet_crash.py",
    "tests/hardening/test_hardening_fleet_renders.py",
    "tests/hardening/test_hardening_crash.py",
    "tests/hardening/test_hardening_database_restart.py",
    "tests/server/test_server_readme_demo.py",
    "tests/server/test_server_fleet.py",
    "tests/server/test_server_live.py",
    "tests/downloads/test_downloads_api.py",
)


def pytest_configure(config: pytest.Config) -> None:
    config.stash[SHARED] = SharedGroups()
    config.pluginmanager.register(Timeline(CHAINS), "xdist-timeline")


# First: xdist's own hook (on its workers) reads the `xdist_group` marks added here.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    run_beside_each_other(items)  # the modules on one shared worker group, one after another
    group_for_xdist(items)  # ... and on one xdist worker, each module on one


# On the xdist controller, as each worker reports the tests it collected.
@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: WorkerController, ids: list[str]) -> None:
    check_xdist_grouped(node.config, ids)


# On the xdist controller, before xdist's own: the serial chains handed out first (xdist_order.py).
@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> Scheduling | None:
    if config.getoption("dist", None) != "loadgroup":
        return None
    from tests.xdist_order import ChainsFirst

    return ChainsFirst(config, log, (*CHAINS, *LONG_FIRST))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None]:
    yield  # the test's own fixtures first
    after_teardown(item.config.stash[SHARED], item, nextitem)


def pytest_unconfigure(config: pytest.Config) -> None:
    if SHARED in config.stash:
        config.stash[SHARED].close_all()  # a run stopped early (-x, Ctrl-C)


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    bin_dir = postgres_bin()
    if bin_dir is None:
        reason = (
            "PostgreSQL's server programs are not installed (scripts/ensure-postgres.sh "
            "installs Debian's postgresql; scripts/test.sh runs it)"
        )
        if os.environ.get("INLINE_TEST_REQUIRE_POSTGRES") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    cluster = PostgresCluster.create(bin_dir)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture
def own_postgres(postgres_cluster: PostgresCluster) -> Iterator[PostgresCluster]:
    """A PostgreSQL server of the test's own, for tests that stop it under the store."""
    cluster = PostgresCluster.create(postgres_cluster.bin)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture(params=BACKENDS)
def store_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def database_url(store_backend: str, request: pytest.FixtureRequest) -> str | None:
    if store_backend == "sqlite":
        return None
    cluster: PostgresCluster = request.getfixturevalue("postgres_cluster")
    return cluster.new_database()
