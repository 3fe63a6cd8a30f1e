"""The xdist workers' timeline in the run's summary (tests/xdist_timeline.py), from the reports
the workers send: each worker's end, work and idle tail, the chains' spans, what ended last, and
the modules that took the most worker time."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.xdist_timeline import Timeline


def report(worker: str, nodeid: str, start: float, stop: float) -> pytest.TestReport:
    made = pytest.TestReport(
        nodeid, ("x.py", 0, "x"), {}, "passed", None, "call", start=start, stop=stop
    )
    # xdist attaches the sending worker's node to each report; TestReport does not declare it.
    made.node = SimpleNamespace(gateway=SimpleNamespace(id=worker))  # type: ignore[attr-defined]
    return made


def test_each_worker_its_end_work_tail_and_chains() -> None:
    timeline = Timeline(("worker-groups", "inductor"))
    for phase in (
        report("gw0", "tests/p/test_a.py::test_one@worker-groups", 100.0, 130.0),
        report("gw0", "tests/p/test_b.py::test_two@worker-groups", 130.0, 170.0),
        report("gw0", "tests/s/test_c.py::test_three@tests/s/test_c.py", 170.0, 175.0),
        report("gw1", "tests/d/test_d.py::test_four@inductor", 100.0, 150.0),
        report("gw1", "tests/h/test_e.py::test_five[x@y]@tests/h/test_e.py", 152.0, 160.0),
    ):
        timeline.add(phase)
    assert timeline.lines() == [
        "gw0: ended at 75 s, busy 75 s, idle at the end 0 s; worker-groups 0-70 s",
        "gw1: ended at 60 s, busy 58 s, idle at the end 15 s; inductor 0-50 s",
        "last to end: gw0, its last groups: tests/s/test_c.py, worker-groups",
        "slowest modules, of 133 s of work in 5 modules:",
        "  50.0 s tests/d/test_d.py",
        "  40.0 s tests/p/test_b.py",
        "  30.0 s tests/p/test_a.py",
        "   8.0 s tests/h/test_e.py",
        "   5.0 s tests/s/test_c.py",
    ]


def test_a_module_s_phases_add_up_and_only_the_slowest_are_named() -> None:
    timeline = Timeline(())
    for i in range(20):  # 20 modules of i + 1 seconds each, the last with a setup of its own
        timeline.add(report("gw0", f"tests/m/test_{i}.py::t@tests/m/test_{i}.py", 0.0, i + 1.0))
    timeline.add(report("gw1", "tests/m/test_19.py::u@tests/m/test_19.py", 50.0, 52.5))
    lines = timeline.lines()
    start = lines.index("slowest modules, of 212 s of work in 20 modules:")
    named = lines[start + 1 :]
    assert named[0] == "  22.5 s tests/m/test_19.py"  # its two tests' phases together
    assert len(named) == 15 and named[-1] == "   6.0 s tests/m/test_5.py"


def test_a_run_in_one_process_prints_nothing() -> None:
    timeline = Timeline(("worker-groups",))
    lone = pytest.TestReport(
        "tests/a.py::t", ("a.py", 0, "t"), {}, "passed", None, "call", start=1.0, stop=2.0
    )
    timeline.add(lone)
    assert timeline.lines() == []
