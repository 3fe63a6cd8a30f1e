"""A node whose output follows the run's step caching keys its cache entries by what the run
asked for (`options.cache`): cached steps are an approximation, never the same output."""

from __future__ import annotations

from dataclasses import replace

from graph_harness import ECHO, Echo, Harness, graph, node

from inline_core.graph.cache import NodeCache
from inline_core.runtime.progress import NodeDone
from inline_core.runtime.step_cache import StepCacheChoice, StepCacheSettings


class SteppedEcho(Echo):
    caches_steps = True


def _cached(h: Harness) -> dict[str, bool]:
    return {e.node_id: e.cached for e in h.events if isinstance(e, NodeDone)}


def test_the_runs_step_caching_is_part_of_the_key_of_nodes_that_follow_it(h: Harness) -> None:
    stepped = SteppedEcho()
    h.registry.register(replace(ECHO, type="test/stepped"), stepped)
    cache = NodeCache()
    raw = graph(node("s", "test/stepped"), node("e", "test/echo", text="s.text"))
    choices = [
        StepCacheChoice(),  # the policy's choice
        StepCacheChoice(True, StepCacheSettings()),
        StepCacheChoice(True, StepCacheSettings(threshold=0.2)),
        StepCacheChoice(True, None),  # {"method": "none"}
    ]
    for choice in choices:
        h.events.clear()
        h.execute(raw, "e", cache=cache, ctx=replace(h.ctx(), step_cache=choice))
        assert _cached(h) == {"s": False, "e": False}  # a new key, and so downstream too
    for choice in choices:
        h.events.clear()
        h.execute(raw, "e", cache=cache, ctx=replace(h.ctx(), step_cache=choice))
        assert _cached(h) == {"s": True, "e": True}
    assert len(stepped.runs) == len(choices)
    # A node that does not follow it keys the same whatever the run asked.
    plain = graph(node("e", "test/echo"))
    before = len(h.echo.runs)
    for choice in choices:
        h.events.clear()
        h.execute(plain, "e", cache=cache, ctx=replace(h.ctx(), step_cache=choice))
    assert len(h.echo.runs) == before + 1
