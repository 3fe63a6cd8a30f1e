"""A running run's interactions, as the server takes them (`POST /v1/runs/{id}/interactions`
and the same message on the run's socket): checked, given the render's next chunk boundary,
stored with the run (durably, before the answer), then queued for the loop
(`runtime/interactions.py`). A restarted run reads them back and applies each at its boundary.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping
from typing import Any, cast

from inline_core.errors import Conflict, InvalidRequest, NotFound, PayloadTooLarge
from inline_core.graph.descriptor import NodeDescriptor
from inline_core.graph.registry import Registry
from inline_core.graph.sampler_names import CFG_PP_SAMPLERS
from inline_core.runtime.interactions import (
    Interaction,
    InteractionBoard,
    checked_change,
)
from inline_core.server.http_io import json_object
from inline_core.server.stores.run_store import RunStore
from inline_core.sizes import human_size

# A node descriptor's `extra` key: its family renders in chunks and takes interactions.
TAKES_INTERACTIONS = "interactions"
# An interaction's body, over HTTP or on the socket, is a few prompts at most.
MAX_INTERACTION_BYTES = 256 * 1024
# The one message a client sends on a run's events socket: the POST's body and this `type`.
SOCKET_MESSAGE_TYPE = "interaction"


class RunInteractions:
    def __init__(self, store: RunStore, registry: Registry) -> None:
        self.store = store
        self.registry = registry
        self.board = InteractionBoard()  # the renders on this server that take them now

    def stored(self, run_id: str, descriptors: Iterable[NodeDescriptor]) -> tuple[Interaction, ...]:
        """The run's interactions so far (a run resumed after a restart replays them); a run
        whose graph (its nodes' `descriptors`, as validated) has no node taking any has none
        (`interact` refuses them), so its store is not read."""
        if not any(d.extra.get(TAKES_INTERACTIONS) for d in descriptors):
            return ()
        return tuple(Interaction.from_info(i) for i in self.store.interactions_for_run(run_id))

    def interact(self, run_id: str, body: object) -> dict[str, Any]:
        """Queue a change for the run's next chunk boundary; the interaction as stored."""
        if not isinstance(body, Mapping):
            raise InvalidRequest("an interaction is a JSON object")
        change = checked_change(dict(cast(Mapping[str, Any], body)))
        record = self.store.get_run(run_id)
        if record is None:
            raise NotFound(f"no run {run_id!r}")
        if record.status.finished:
            raise Conflict(
                f"run {run_id} has already finished ({record.status.value}): an interaction "
                "changes a render while it runs"
            )
        if not self._takes_interactions(record.graph):
            takers = sorted(
                d.type for d in self.registry.descriptors() if d.extra.get(TAKES_INTERACTIONS)
            )
            raise InvalidRequest(
                f"run {run_id} renders no node that takes interactions: only nodes that render "
                f"a video chunk by chunk do ({', '.join(takers) or 'none served here'})"
            )
        _refuse_unguided_cfg_pp(record.graph, change)
        inbox = self.board.get(run_id)
        if inbox is None:
            raise Conflict(
                f"run {run_id} is not rendering its chunks on this server (it is queued, "
                "loading, or runs on another server): send the interaction once its "
                "chunk_started events come"
            )

        def store(chunk: int) -> Interaction:
            interaction = Interaction(id=f"ix_{secrets.token_hex(8)}", chunk=chunk, **change)
            if not self.store.add_interaction(run_id, interaction.to_info()):
                raise Conflict(f"run {run_id} finished before the interaction was stored")
            return interaction

        return inbox.queue(store).to_info()

    def interact_by_message(self, run_id: str, message: str | bytes) -> dict[str, Any]:
        """`interact` for a message on the run's events socket:
        `{"type": "interaction", "prompt"?, "negative_prompt"?, "guidance"?}` as JSON text."""
        if isinstance(message, bytes):
            raise InvalidRequest(
                "the run's socket takes JSON text messages "
                f'({{"type": "{SOCKET_MESSAGE_TYPE}", ...}}), not binary ones'
            )
        if len(message.encode()) > MAX_INTERACTION_BYTES:
            raise PayloadTooLarge(
                f"the message is larger than the {human_size(MAX_INTERACTION_BYTES)} limit"
            )
        body = json_object(message, "the message")
        kind = body.pop("type", None)
        if kind != SOCKET_MESSAGE_TYPE:
            shown = "no 'type'" if kind is None else f"type {str(kind)[:40]!r}"
            raise InvalidRequest(
                f"the run's socket takes messages of type '{SOCKET_MESSAGE_TYPE}' (got {shown})"
            )
        return self.interact(run_id, body)

    def _takes_interactions(self, graph: Mapping[str, Any]) -> bool:
        nodes = graph.get("nodes")
        if not isinstance(nodes, list):
            return False
        for node in cast(list[object], nodes):
            kind = cast(Mapping[str, Any], node).get("type") if isinstance(node, dict) else None
            if isinstance(kind, str) and kind in self.registry:
                if self.registry.descriptor(kind).extra.get(TAKES_INTERACTIONS):
                    return True
        return False


def _refuse_unguided_cfg_pp(graph: Mapping[str, Any], change: Mapping[str, Any]) -> None:
    """A guidance of 1 or less for a render whose sampler is a CFG++ one, as a 422: it steps along
    the unconditional prediction, which only a guided step computes."""
    guidance = change.get("guidance")
    nodes = graph.get("nodes")
    if guidance is None or guidance > 1 or not isinstance(nodes, list):
        return
    for node in cast(list[object], nodes):
        params = cast(Mapping[str, Any], node).get("params") if isinstance(node, dict) else None
        sampler = (
            cast(Mapping[str, Any], params).get("sampler") if isinstance(params, dict) else None
        )
        if sampler in CFG_PP_SAMPLERS:
            raise InvalidRequest(
                f"interaction field 'guidance' {guidance:g} leaves steps unguided, and the "
                f"render samples with the CFG++ sampler {sampler!r}, which steps along the "
                "unconditional prediction only a guided step computes: keep guidance above 1"
            )
