"""The order pytest-xdist hands out its groups under `--dist loadgroup`: the serial chains first,
then the modules conftest names as long in time.

xdist hands a free worker the group with the most tests next. The worker groups' chain
(`XDIST_WORKER_GROUPS`, tests/worker_groups.py) and the inductor one are long in time, not in
tests: each family adds split renders to the first, so counted by tests it was handed out third,
then fourth, after modules of quick tests, and started that much later on a run whose wall time it
bounds once it holds half the work. Handed out first, each chain starts at once on its own worker,
and the other worker's groups fill in around it.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadGroupScheduling
from xdist.workermanage import WorkerController


class ChainsFirst(LoadGroupScheduling):
    """`--dist loadgroup`, handing out `chains` (in that order) before every other group."""

    def __init__(self, config: pytest.Config, log: Producer, chains: Sequence[str]) -> None:
        super().__init__(config, log)
        self.chains = tuple(chains)

    def _assign_work_unit(self, node: WorkerController) -> None:
        for scope in reversed(self.chains):
            if scope in self.workqueue:
                self.workqueue.move_to_end(scope, last=False)
        super()._assign_work_unit(node)
