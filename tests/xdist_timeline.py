"""Each xdist worker's timeline in the run's summary: when it finished, how long it worked, the
serial chains' spans (tests/worker_groups.py) and the idle tail, so CI's output says which chain
bounds the run's wall time and what a worker waited at the end; then the modules that took the
most worker time (setups, tests and teardowns together), where `--durations` names single tests.

Read on the xdist controller from the reports its workers send (each phase's start and stop,
the machine's clock), so it costs the run nothing; a run in one process prints nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

# What a worker did at the end that the other waited for: its last groups, this many.
LAST_GROUPS = 3
# The modules that took the most worker time, this many.
SLOWEST_MODULES = 15


@dataclass
class Span:
    start: float
    stop: float


@dataclass
class WorkerLine:
    spans: list[tuple[str, Span]] = field(default_factory=list[tuple[str, Span]])

    @property
    def stop(self) -> float:
        return max(span.stop for _group, span in self.spans)

    @property
    def busy(self) -> float:
        return sum(span.stop - span.start for _group, span in self.spans)

    def group_span(self, group: str) -> Span | None:
        mine = [span for name, span in self.spans if name == group]
        if not mine:
            return None
        return Span(min(s.start for s in mine), max(s.stop for s in mine))

    def last_groups(self) -> list[str]:
        order = [name for name, _span in sorted(self.spans, key=lambda g: g[1].stop)]
        last: list[str] = []
        for name in reversed(order):
            if name not in last:
                last.append(name)
            if len(last) == LAST_GROUPS:
                break
        return last


class Timeline:
    """The phases each worker ran, by its xdist group (a plugin: the conftest registers it)."""

    def __init__(self, chains: Sequence[str]) -> None:
        self.chains = tuple(chains)
        self.workers: dict[str, WorkerLine] = {}
        self.modules: dict[str, float] = {}  # worker seconds by test module

    def add(self, report: pytest.TestReport) -> None:
        node = getattr(report, "node", None)  # xdist's controller names the worker
        if node is None or not report.stop:
            return
        worker = str(node.gateway.id)
        head, at, group = report.nodeid.rpartition("@")
        name = group if at and "::" in head else report.nodeid.split("::", 1)[0]
        line = self.workers.setdefault(worker, WorkerLine())
        line.spans.append((name, Span(report.start, report.stop)))
        module = report.nodeid.split("::", 1)[0]
        self.modules[module] = self.modules.get(module, 0.0) + report.stop - report.start

    def lines(self) -> list[str]:
        if not self.workers:
            return []
        began = min(span.start for w in self.workers.values() for _g, span in w.spans)
        ended = max(w.stop for w in self.workers.values())
        out: list[str] = []
        for worker, line in sorted(self.workers.items()):
            chains = [
                f"{chain} {span.start - began:.0f}-{span.stop - began:.0f} s"
                for chain in self.chains
                if (span := line.group_span(chain)) is not None
            ]
            tail = ended - line.stop
            out.append(
                f"{worker}: ended at {line.stop - began:.0f} s, busy {line.busy:.0f} s, "
                f"idle at the end {tail:.0f} s" + (f"; {', '.join(chains)}" if chains else "")
            )
        last = max(self.workers.items(), key=lambda item: item[1].stop)
        out.append(f"last to end: {last[0]}, its last groups: {', '.join(last[1].last_groups())}")
        slowest = sorted(self.modules.items(), key=lambda item: -item[1])[:SLOWEST_MODULES]
        total = sum(self.modules.values())
        out.append(f"slowest modules, of {total:.0f} s of work in {len(self.modules)} modules:")
        out.extend(f"{seconds:6.1f} s {module}" for module, seconds in slowest)
        return out

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.add(report)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        lines = self.lines()
        if lines:
            terminalreporter.write_sep("=", "xdist workers' timeline")
            for line in lines:
                terminalreporter.write_line(line)
