"""The interaction inbox a chunked render holds: each interaction is given the next boundary while
the inbox is locked, stored by the caller, then taken at exactly that boundary; none is left for
a render on its last chunk; a bad change is refused naming the field."""

from __future__ import annotations

import pytest

from inline_core.errors import Conflict, InvalidRequest
from inline_core.runtime.interactions import Interaction, InteractionInbox, checked_change


def test_an_interaction_is_taken_at_the_boundary_it_was_given_once() -> None:
    inbox = InteractionInbox(chunks=3)
    stored: list[Interaction] = []

    def store(chunk: int) -> Interaction:
        made = Interaction("a", chunk, prompt="rain")
        stored.append(made)
        return made

    assert inbox.queue(store).chunk == 1
    assert stored == [Interaction("a", 1, prompt="rain")]
    assert inbox.take(1) == stored
    assert inbox.take(1) == []  # taken once
    assert inbox.timeline() == [{"chunk": 1, "prompt": "rain"}]
    assert inbox.queue(lambda chunk: Interaction("b", chunk, guidance=3.0)).chunk == 2
    assert [i.id for i in inbox.take(2)] == ["b"]
    with pytest.raises(Conflict, match="last chunk"):
        inbox.queue(lambda chunk: Interaction("c", chunk, prompt="late"))


def test_stored_interactions_replay_at_their_boundaries() -> None:
    stored = (Interaction("b", 2, prompt="two"), Interaction("a", 1, guidance=2.0))
    inbox = InteractionInbox(chunks=4, stored=stored)
    assert [i.id for i in inbox.take(1)] == ["a"]
    assert [i.id for i in inbox.take(2)] == ["b"]
    assert Interaction.from_info(stored[0].to_info()) == stored[0]


def test_a_store_that_fails_queues_nothing() -> None:
    inbox = InteractionInbox(chunks=3)

    def failing(chunk: int) -> Interaction:
        raise Conflict("the run finished")

    with pytest.raises(Conflict):
        inbox.queue(failing)
    assert inbox.take(1) == []


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "at least one"),
        ({"seed": 3}, "seed"),
        ({"prompt": 3}, "'prompt' must be a string"),
        ({"guidance": True}, "'guidance' must be a number"),
        ({"guidance": 40}, "1..20"),
    ],
)
def test_a_bad_change_is_refused_naming_the_field(body: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        checked_change(body)
