"""A run's events (the stored history every `/v1` socket reads) as ComfyUI's websocket messages.

Per prompt, in ComfyUI's order: `execution_start`, `execution_cached`, then for each node as it
runs `executing` (the prompt's node id, mapped back from ours), `progress` per sampler step and
`progress_state`; `executed` with the output node's files; then `execution_success`,
`execution_error` or `execution_interrupted`. The hub sends the queue's `status` and `executing`
with `node: null` after the end.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

from inline_core.server.comfy.prompt_meta import PromptMeta, node_map
from inline_core.server.comfy.views import end_message, node_output
from inline_core.server.events import WireEvent
from inline_core.server.run_state import RunRecord
from inline_core.takes import Take

Message = dict[str, Any]


def message(kind: str, data: Mapping[str, Any]) -> Message:
    return {"type": kind, "data": dict(data)}


def now_ms() -> int:
    return int(time.time() * 1000)


class PromptMessages:
    """Turns one run's events into ComfyUI messages, in order (one per run, not thread-safe).

    `takes`: the run's takes for ids (their file names are what `/view` takes back);
    `finished`: the run as stored once it has ended (its error, its end time)."""

    def __init__(
        self,
        record: RunRecord,
        meta: PromptMeta,
        takes: Callable[[str, Iterable[str]], list[Take]],
        finished: Callable[[], RunRecord | None],
    ) -> None:
        self.id = record.id
        self.meta = meta
        self.target = record.target
        self._record = record
        self._nodes = node_map(record.graph, meta)
        self._takes = takes
        self._finished = finished
        self.started = False
        self.ended = False
        self.current: str | None = None  # the prompt node executing now
        self._done: list[str] = []  # prompt nodes finished, in order
        self._cached: set[str] = set()
        # How many of our nodes each prompt node became: it has finished once all of them have.
        self._left: dict[str, int] = {}
        for node in self._nodes.values():
            self._left[node] = self._left.get(node, 0) + 1

    def prompt_node(self, our_id: str | None) -> str | None:
        return None if our_id is None else self._nodes.get(our_id)

    def _base(self) -> dict[str, Any]:
        return {"prompt_id": self.id}

    def _start(self) -> list[Message]:
        if self.started:
            return []
        self.started = True
        stamp = {**self._base(), "timestamp": now_ms()}
        return [
            message("execution_start", stamp),
            message("execution_cached", {"nodes": [], **stamp}),
        ]

    def _executing(self, node: str) -> list[Message]:
        if node == self.current:
            return []
        self.current = node
        return [message("executing", {"node": node, "display_node": node, **self._base()})]

    def _state(self, node: str, value: float, top: float, state: str) -> Message:
        entry = {
            "value": value,
            "max": top,
            "state": state,
            "node_id": node,
            "prompt_id": self.id,
            "display_node_id": node,
            "parent_node_id": None,
            "real_node_id": node,
        }
        return message("progress_state", {**self._base(), "nodes": {node: entry}})

    def on_event(self, event: WireEvent) -> list[Message]:
        """The ComfyUI messages for one of the run's events (none for most)."""
        body = event.body
        if event.type == "snapshot":
            state = cast(Mapping[str, Any], body.get("state", {}))
            return self._caught_up(state) if state.get("status") == "running" else []
        if event.type == "run_started":
            return self._start()
        if event.type == "progress":
            return self._progress(body)
        if event.type == "node_done":
            return self._node_done(body)
        if event.terminal:
            return self._end()
        return []

    def _caught_up(self, state: Mapping[str, Any]) -> list[Message]:
        """A run followed once it is running: the nodes it already finished (a fast loader may
        end before the prompt's socket follows it) announced as if seen live, in run order."""
        out = self._start()
        nodes = cast(Mapping[str, Mapping[str, Any]], state.get("nodes", {}))
        for our_id, node in nodes.items():
            if our_id == self.target:
                continue  # its `executed` needs its takes: the live `node_done` brings them
            status = node.get("state")
            if status in ("done", "cached"):
                out += self._node_done({"nodeId": our_id, "cached": status == "cached"})
        return out

    def _progress(self, body: Mapping[str, Any]) -> list[Message]:
        node = self.prompt_node(cast(str | None, body.get("nodeId")))
        if node is None or body.get("state") != "running":
            return []
        out = self._start() + self._executing(node)
        step, count = body.get("step"), body.get("stepCount")
        if isinstance(step, int) and isinstance(count, int) and count > 0:
            out.append(
                message("progress", {"value": step, "max": count, **self._base(), "node": node})
            )
            out.append(self._state(node, step, count, "running"))
        else:
            fraction = body.get("fraction")
            value = float(fraction) if isinstance(fraction, int | float) else 0.0
            out.append(self._state(node, value, 1.0, "running"))
        return out

    def _node_done(self, body: Mapping[str, Any]) -> list[Message]:
        our_id = cast(str | None, body.get("nodeId"))
        node = self.prompt_node(our_id)
        out = self._start()
        if node is not None:
            if body.get("cached") and node not in self._cached and node not in self._done:
                self._cached.add(node)
                out.append(
                    message(
                        "execution_cached",
                        {"nodes": [node], **self._base(), "timestamp": now_ms()},
                    )
                )
            else:
                out += self._executing(node)
            self._left[node] = self._left.get(node, 1) - 1
            if self._left[node] <= 0 and node not in self._done:
                self._done.append(node)
                out.append(self._state(node, 1.0, 1.0, "finished"))
        if our_id == self.target:
            ids = [str(t["id"]) for t in cast(list[Mapping[str, Any]], body.get("takes", []))]
            takes = self._takes(self.id, ids) if ids else []
            if takes:
                output = self.meta.output
                out += self._executing(output)
                data = {
                    "node": output,
                    "display_node": output,
                    "output": node_output(takes),
                    **self._base(),
                }
                out.append(message("executed", data))
                self._done.append(output)
        return out

    def _end(self) -> list[Message]:
        if self.ended:
            return []
        self.ended = True
        record = self._finished() or self._record
        kind, data = end_message(self.meta, record)
        data = {**data, "timestamp": data.get("timestamp") or now_ms()}
        if "executed" in data:
            data["executed"] = list(self._done)
        if kind != "execution_success" and data.get("node_id") is None:
            data["node_id"] = self.current
            data["node_type"] = self.meta.class_type(self.current)
        self.current = None
        return self._start() + [message(kind, data)]

    def end_of_prompt(self) -> Message:
        """`executing` with `node: null`: the last message of a prompt, after the final status."""
        return message("executing", {"node": None, "display_node": None, **self._base()})
