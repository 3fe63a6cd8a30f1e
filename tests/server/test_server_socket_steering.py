"""A socket's client messages (`server/socket_steering.py`), read faster than they are answered:
at most MAX_WAITING wait to be stored, the ones past that are refused (429) without being looked
at, and past MAX_HELD unanswered messages the rest are dropped, one 429 saying how many; every
message is answered in the order sent. The steer here stands in for the run's interactions: what
is tested is the socket's reading and answering. (The same on a real server with a real client
flooding its socket: tests/families/skyreels/test_skyreels_socket_flood.py.)
"""

from __future__ import annotations

import asyncio
from typing import Any

from inline_core.errors import InlineError
from inline_core.server.events import WireEvent
from inline_core.server.socket_steering import MAX_HELD, MAX_WAITING, SocketSteering

OVER = 10  # messages sent past MAX_HELD before any answer


class EchoSteer:
    """Queues every message it looks at, answering with it."""

    def __init__(self) -> None:
        self.looked_at: list[str | bytes] = []

    async def answer(self, message: str | bytes, /) -> WireEvent:
        self.looked_at.append(message)
        return WireEvent("interaction_queued", {"message": message})

    def refuse(self, error: InlineError, /) -> WireEvent:
        body = {"status": error.status, "code": error.code, "message": error.message}
        return WireEvent("interaction_refused", body)


def answers_to(steering: SocketSteering, batches: list[list[str]]) -> list[dict[str, Any]]:
    """Each batch read whole, then answered whole, in turn."""

    async def scenario() -> list[dict[str, Any]]:
        answers: list[dict[str, Any]] = []
        for batch in batches:
            messages: list[str | None] = [*batch, None]  # then the client leaves

            async def receive(messages: list[str | None] = messages) -> str | bytes | None:
                return messages.pop(0)

            await steering.read(receive)
            answers += [(await steering.next_answer()).body for _ in range(answered(batch))]
        return answers

    return asyncio.run(scenario())


def answered(batch: list[str]) -> int:
    """How many answers a batch gets: one a message, up to MAX_HELD; one for all the rest."""
    return min(len(batch), MAX_HELD) + (len(batch) > MAX_HELD)


def test_past_the_bounds_messages_are_refused_in_their_turn_unlooked_at() -> None:
    steer = EchoSteer()
    first = [f"m{i}" for i in range(MAX_HELD + OVER)]
    answers = answers_to(SocketSteering(steer), [first, ["again"]])

    assert answers[:MAX_WAITING] == [{"message": f"m{i}"} for i in range(MAX_WAITING)]
    busy = answers[MAX_WAITING:MAX_HELD]
    assert [(a["status"], a["code"]) for a in busy] == [(429, "busy")] * len(busy)
    assert all(a["message"].startswith(f"{MAX_WAITING} interactions sent") for a in busy)
    dropped = answers[MAX_HELD]
    assert (dropped["status"], dropped["code"]) == (429, "busy")
    assert dropped["message"].startswith(f"{OVER} messages dropped unanswered")
    # Once answered, the socket takes messages again.
    assert answers[MAX_HELD + 1 :] == [{"message": "again"}]
    assert steer.looked_at == [f"m{i}" for i in range(MAX_WAITING)] + ["again"]
