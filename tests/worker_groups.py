"""Worker groups shared by the tests that only render on one (`worker_group(shared=KEY)`).

Starting a group (torchrun, two gloo ranks importing torch and loading the pipeline) costs more
than most of the renders the tests send it, so the modules marked with the same key get one group
per test run: `tests/conftest.py` runs those modules one after another and closes the group after
the last of their tests, so no other test (one that counts the processes below it, or kills
ranks) ever sees it. The group's ranks load another stack in place of theirs when the stack it
renders changes (another family's or model's files; no relaunch): modules on one key that render
one stack say so (`worker_group(shared=KEY, stack=NAME)`) and run next to each other, so it loads
once for them.
A module that renders through a runtime (a family node's split) hands the runtime the shared
sampler as the group of the split it chooses (`tests/parallel/test_parallel_wan.py`). A test that
kills ranks, tests a group's start, or counts or stops a server's processes keeps a group of its
own (`worker_group` without a key).

Under pytest-xdist (`scripts/test.sh` runs `-n 2 --dist loadgroup`) every module is one
`xdist_group` (or in the one it names, `XDIST_INDUCTOR`), so its module-scoped fixtures (servers,
kits) start once and its tests keep their order. Every test marked `worker_group` (a whole
module's, by its `pytestmark`) is in one `xdist_group` together: they run one after another on
one xdist worker, as in a lone process, so the shared groups start and close as they do there,
and no two worker groups ever compute on the machine's cores at once (a rank starved by another
group's ranks misses its heartbeats and is taken for hung). That chain bounds the run's wall
time once it holds half the work: a test that starts no group stays off it (a module with one
group test marks that test, not the module).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # the conftest imports this module: torch-side imports wait for a group
    from inline_core.parallel.sampler import ParallelSampler

MARK = "worker_group"


def shared_key(item: pytest.Item) -> str | None:
    """The shared group `item`'s module renders on, from its `worker_group(shared=...)` mark."""
    mark = item.get_closest_marker(MARK)
    if mark is None:
        return None
    key = mark.kwargs.get("shared")
    return None if key is None else str(key)


class SharedGroups:
    """The run's shared samplers by key, each started on first use and closed after its last
    test."""

    def __init__(self) -> None:
        self._samplers: dict[str, ParallelSampler] = {}

    def sampler(
        self, request: pytest.FixtureRequest, key: str, make: Callable[[], ParallelSampler]
    ) -> ParallelSampler:
        marked = {shared_key(item) for item in _module_items(request)}
        if marked != {key}:
            raise pytest.UsageError(
                f"{request.path}: a module on the shared worker group {key!r} must be "
                f"marked `pytestmark = pytest.mark.{MARK}(shared={key!r})` (so its tests run "
                "beside the others on that group, and the group is closed after the last)"
            )
        sampler = self._samplers.get(key)
        if sampler is None or sampler.closed:
            sampler = self._samplers[key] = make()
        return sampler

    def close(self, key: str) -> None:
        """Close `key`'s group; nothing of it may be left running."""
        sampler = self._samplers.pop(key, None)
        if sampler is None:
            return
        from tests.parallel.parallel_support import group_children

        sampler.close()
        left = group_children()
        assert left == [], f"the shared worker group {key!r} left {left}"

    def close_all(self) -> None:
        for key in list(self._samplers):
            self.close(key)


SHARED = pytest.StashKey[SharedGroups]()


def shared_stack(item: pytest.Item) -> str | None:
    """The stack `item`'s module renders on its shared group (`worker_group(stack=...)`)."""
    mark = item.get_closest_marker(MARK)
    stack = None if mark is None else mark.kwargs.get("stack")
    return None if stack is None else str(stack)


def run_beside_each_other(items: list[pytest.Item]) -> None:
    """Reorder `items` in place so the modules on one shared group run one after another, at the
    place of the first of them, those that name one `stack` next to each other (the group's ranks
    load it again each time the stack they hold changes); every other module keeps its place,
    every test its module's order."""
    first_of_key: dict[str, int] = {}
    first_of_stack: dict[tuple[str, str], int] = {}
    module_rank: dict[object, tuple[int, int]] = {}
    for item in items:
        module = _module_of(item)
        if module in module_rank:
            continue
        key, stack = shared_key(item), shared_stack(item)
        index = len(module_rank)
        if key is None:
            module_rank[module] = (index, index)
            continue
        beside = first_of_stack.setdefault((key, stack), index) if stack else index
        module_rank[module] = (first_of_key.setdefault(key, index), beside)
    order = {module: (*rank, i) for i, (module, rank) in enumerate(module_rank.items())}
    items.sort(key=lambda item: order[_module_of(item)])


# The `xdist_group` of every module that starts worker groups.
XDIST_WORKER_GROUPS = "worker-groups"
# The modules that compile with inductor: on one xdist worker, one after another, those that
# compile the tiny transformer's blocks find the kernels the first compiled (a cold compile costs
# tens of CPU seconds), and no two cold compiles compete for the cores.
XDIST_INDUCTOR = "inductor"


def group_for_xdist(items: list[pytest.Item]) -> None:
    """Mark each item with the `xdist_group` it is scheduled in: the worker groups' one if it is
    marked `worker_group` (by its module, or itself), else the one its module names itself
    (modules that share a process-wide cache, such as inductor's compiled kernels), else its
    module's. A module whose one test starts a group marks that test only: its other tests
    (in-process renders) run on the other xdist worker, off the worker groups' serial chain."""
    for item in items:
        own = item.get_closest_marker("xdist_group")
        name = item.nodeid.split("::", 1)[0] if own is None else str(own.args[0])
        name = XDIST_WORKER_GROUPS if item.get_closest_marker(MARK) is not None else name
        item.add_marker(pytest.mark.xdist_group(name))


def check_xdist_grouped(config: pytest.Config, node_ids: list[str]) -> None:
    """Under `--dist loadgroup`, the node ids a worker collected must each name their group, or
    xdist scatters a module's tests over the workers (its fixtures set up on each, two worker
    groups computing at once): a pytest that no longer lets xdist rename node ids (9.2) does
    that silently. Stops the run, saying so."""
    if config.getoption("dist", None) != "loadgroup":
        return
    scattered = [node_id for node_id in node_ids if "@" not in node_id.rpartition("]")[2]]
    if scattered:
        pytest.exit(
            f"pytest-xdist could not name the xdist_group of {len(scattered)} tests in their node "
            f"ids (first: {scattered[0]}), so --dist loadgroup would scatter each module's tests "
            "over the workers: use a pytest this pytest-xdist supports (pyproject.toml's dev pin)",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )


def after_teardown(groups: SharedGroups, item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Close the group `item` ran on when the next test is not on it (or there is none)."""
    key = shared_key(item)
    if key is not None and (nextitem is None or shared_key(nextitem) != key):
        groups.close(key)


def _module_of(item: pytest.Item) -> object:
    return item.getparent(pytest.Module) or item.path


def _module_items(request: pytest.FixtureRequest) -> Iterable[pytest.Item]:
    return [i for i in request.session.items if i.path == request.path]


def shared_sampler(
    request: pytest.FixtureRequest, key: str, make: Callable[[], ParallelSampler]
) -> ParallelSampler:
    """The run's sampler for `key` (made by `make` on first use) for the module asking."""
    return request.config.stash[SHARED].sampler(request, key, make)
