"""Subscriber buffers: progress coalesced per node and phase, all else delivered, in order."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from inline_core.server.events import Subscriber, WireEvent


def progress(node: str, fraction: float) -> WireEvent:
    return WireEvent("progress", {"type": "progress", "nodeId": node, "fraction": fraction}, node)


def done(node: str) -> WireEvent:
    return WireEvent("node_done", {"type": "node_done", "nodeId": node}, node)


def test_a_lagging_reader_gets_each_nodes_latest_progress_and_every_milestone() -> None:
    async def scenario() -> list[dict[str, object]]:
        sub = Subscriber(asyncio.get_running_loop())
        sub.publish(WireEvent("run_started", {"type": "run_started"}))
        for i in range(1000):  # the reader is not reading: these must not pile up
            sub.publish(progress("a", i / 1000))
        sub.publish(progress("b", 0.5))
        sub.publish(progress("a", 1.0))
        sub.publish(done("a"))
        sub.publish(progress("b", 0.9))
        sub.publish(done("b"))
        sub.publish(WireEvent("run_done", {"type": "run_done"}))
        sub.publish(progress("b", 1.0))  # after the terminal event: dropped
        assert sub.coalesced == 1001
        out: list[dict[str, object]] = []
        while (event := await sub.next()) is not None:
            out.append(event.body)
        return out

    bodies = asyncio.run(scenario())
    assert bodies == [
        {"type": "run_started"},
        {"type": "progress", "nodeId": "a", "fraction": 1.0},
        {"type": "progress", "nodeId": "b", "fraction": 0.9},
        {"type": "node_done", "nodeId": "a"},
        {"type": "node_done", "nodeId": "b"},
        {"type": "run_done"},
    ]


def test_each_phase_keeps_its_latest_tick() -> None:
    async def scenario() -> list[dict[str, object]]:
        sub = Subscriber(asyncio.get_running_loop())
        for step in range(1, 5):  # a fast node: every step and its decode before the reader reads
            sub.publish(phased("z", "sample", step))
        sub.publish(phased("z", "decode", 0))
        sub.publish(phased("z", "decode", 1))
        sub.publish(done("z"))
        sub.close()
        assert sub.coalesced == 4
        return [event.body async for event in _drained(sub)]

    bodies = asyncio.run(scenario())
    assert [(b.get("phase"), b.get("step")) for b in bodies] == [
        ("sample", 4),
        ("decode", 1),
        (None, None),
    ]


def phased(node: str, phase: str, step: int) -> WireEvent:
    body = {"type": "progress", "nodeId": node, "phase": phase, "step": step}
    return WireEvent("progress", body, node)


async def _drained(sub: Subscriber) -> AsyncIterator[WireEvent]:
    while (event := await sub.next()) is not None:
        yield event


def test_a_reader_that_keeps_up_sees_every_tick() -> None:
    async def scenario() -> list[float]:
        sub = Subscriber(asyncio.get_running_loop())
        seen: list[float] = []
        for i in range(5):
            sub.publish(progress("a", i / 4))
            event = await sub.next()
            assert event is not None
            seen.append(float(event.body["fraction"]))
        sub.close()
        assert await sub.next() is None
        return seen

    assert asyncio.run(scenario()) == [0.0, 0.25, 0.5, 0.75, 1.0]


def test_events_published_from_another_thread_wake_the_reader() -> None:
    async def scenario() -> list[str]:
        loop = asyncio.get_running_loop()
        sub = Subscriber(loop)

        def produce() -> None:
            sub.publish(progress("a", 0.5))
            sub.publish(WireEvent("cancelled", {"type": "cancelled"}))

        await loop.run_in_executor(None, produce)
        out: list[str] = []
        while (event := await sub.next()) is not None:
            out.append(event.type)
        return out

    assert asyncio.run(scenario()) == ["progress", "cancelled"]
