"""A graph's shape (node ids, types, edges, target) is checked against the registry once: the
same graph posted again with new params reads its descriptors, runners and order back, while its
params, required inputs and checks run every time; a change to the registry forgets it all."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, cast

import pytest
from graph_harness import ECHO, Echo, Harness, graph, node

from inline_core.errors import InlineError, InvalidGraph, ModelMissing
from inline_core.graph import validate
from inline_core.graph.runner import Needs, SubmitFacts
from inline_core.graph.validate import SHAPES_KEPT, may_wait_on_disk
from tests.call_counts import count_calls


def chain(suffix: str = "!") -> dict[str, Any]:
    return graph(
        node("unused", "test/echo"),
        node("t", "input/text", {"text": "hi"}),
        node("e", "test/echo", {"suffix": suffix}, text="t.text"),
    )


def test_the_same_shape_with_new_params_asks_the_registry_nothing(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = h.validate(chain("a"), "e")
    descriptors = count_calls(monkeypatch, h.registry, "descriptor")
    runners = count_calls(monkeypatch, h.registry, "runner")
    again = h.validate(chain("b"), "e")
    assert descriptors == [] and runners == []
    assert again.order == first.order == ("t", "e")
    assert again.graph.node("e").params == {"suffix": "b"}  # the params are its own
    assert set(again.descriptors) == {"unused", "t", "e"}
    assert again.runners["e"] is h.echo
    assert h.execute(chain("c"), "e").outputs["text"] == "hic"


def test_new_params_on_a_kept_shape_are_still_checked(h: Harness) -> None:
    h.validate(chain("ok"), "e")
    with pytest.raises(InvalidGraph, match="suffix"):
        h.validate(chain("far too long a suffix"), "e")  # `max_length` 8


def test_another_target_or_edge_is_another_shape(h: Harness) -> None:
    assert h.validate(chain(), "e").order == ("t", "e")
    assert h.validate(chain(), "t").order == ("t",)
    unwired = graph(
        node("unused", "test/echo"),
        node("t", "input/text", {"text": "hi"}),
        node("e", "test/echo", {"suffix": "!"}, text="unused.text"),
    )
    assert h.validate(unwired, "e").order == ("unused", "e")


def test_a_bad_shape_is_refused_every_time(h: Harness) -> None:
    bad = graph(node("t", "input/text"), node("x", "test/echo", text="t.image"))
    for _ in range(2):
        with pytest.raises(InvalidGraph, match="has no output 'image'"):
            h.validate(bad, "x")
    cycle = graph(node("a", "test/echo", text="b.text"), node("b", "test/echo", text="a.text"))
    for _ in range(2):
        with pytest.raises(InvalidGraph, match="cycle"):
            h.validate(cycle, "a")


def test_a_registration_forgets_the_kept_shapes(h: Harness) -> None:
    h.validate(chain(), "e")
    assert len(h.registry.derived) > 0
    h.registry.register(replace(ECHO, params=()), h.echo)  # `suffix` is no param any more
    assert len(h.registry.derived) == 0
    with pytest.raises(InvalidGraph, match="suffix"):
        h.validate(chain(), "e")


def test_a_type_marked_unavailable_is_refused_though_its_shape_was_kept(h: Harness) -> None:
    h.validate(chain(), "e")
    h.registry.mark_unavailable("test/echo", "needs torch")
    with pytest.raises(ModelMissing, match="needs torch"):
        h.validate(chain(), "e")


def test_a_change_while_a_shape_is_checked_leaves_nothing_stale_kept(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pack reloaded (on its own thread) while a graph is checked: what that check read of
    the registry before the change is not kept for the next graph."""
    real = h.registry.runner
    changed: list[str] = []

    def reloading(node_type: str) -> object:
        found = real(node_type)  # read before the change...
        if node_type == "test/echo" and not changed:
            changed.append(node_type)
            h.registry.mark_unavailable("test/echo", "its pack was removed")  # ...made here
        return found

    monkeypatch.setattr(h.registry, "runner", reloading)
    h.validate(chain(), "e")  # checked against the registry as it was
    with pytest.raises(ModelMissing, match="its pack was removed"):
        h.validate(chain(), "e")


def test_the_kept_shapes_are_bounded(h: Harness) -> None:
    for index in range(SHAPES_KEPT + 20):
        h.validate(graph(node(f"t{index}", "input/text", {"text": "x"})), f"t{index}")
    assert len(h.registry.derived) == SHAPES_KEPT
    assert h.validate(chain(), "e").order == ("t", "e")  # and work on as before


def test_whether_validation_may_wait_is_kept_per_node_types_and_forgotten_on_change(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    pure = graph(node("t", "input/text"), node("e", "test/echo", text="t.text"))
    assert not may_wait_on_disk(pure, h.registry)
    runners = count_calls(monkeypatch, h.registry, "runner")
    assert not may_wait_on_disk(pure, h.registry)
    assert runners == []
    h.registry.register(replace(ECHO, params=(h.registry.descriptor("test/load").params[0],)))
    assert may_wait_on_disk(pure, h.registry)  # a picker over the catalog now


def test_an_unknown_type_in_a_kept_shape_stays_refused(h: Harness) -> None:
    with pytest.raises(InlineError, match="unknown node type"):
        h.validate(graph(node("x", "no/such")), "x")
    with pytest.raises(InlineError, match="unknown node type"):
        h.validate(graph(node("x", "no/such")), "x")


def test_fitting_is_skipped_only_where_no_runner_of_the_closure_fits(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    fitted: list[object] = []
    real = validate.fit_to_consumers

    def counted(*args: Any) -> dict[str, object]:
        fitted.append(args)
        return real(*args)

    monkeypatch.setattr(validate, "fit_to_consumers", counted)
    h.validate(chain(), "e")
    assert fitted == []  # echo and input/text keep what they prepare whole

    class Cutting(Echo):  # says what it needs of its input: fitting runs
        def input_needs(
            self, params: Mapping[str, Any], facts: SubmitFacts, needs: Mapping[str, Needs]
        ) -> Mapping[str, Needs]:
            return {"text": frozenset({"short"})}

    h.registry.register(ECHO, Cutting())
    h.validate(chain(), "e")
    assert len(fitted) == 1


def test_each_check_is_told_the_registrys_state(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`SubmitFacts.generation`: what a runner keeping its checks' results keys them on, so a
    registration between two submits checks the node again."""
    checks = count_calls(monkeypatch, h.echo, "check_node")
    h.validate(chain(), "e")
    h.registry.register(replace(ECHO, type="test/other"), h.echo)
    h.validate(chain(), "e")
    before, after = (cast(tuple[Any, ...], call)[2].generation for call in checks)
    assert after == h.registry.generation and before < after
