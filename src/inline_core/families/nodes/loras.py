"""`load/lora` and `input/lora`, for every family that takes LoRAs (torch-free).

At submit, `check` reads the picked file's tensor names (its header only) and asks each family
that declares LoRA namings whether they are its own: a file of no known naming, or one adapting
layers no family's model has, is refused with a 422 naming the file and what was expected. At run,
`load/lora` appends the LoRA to the model handle's stack (the weights load where the request is
denoised, once per file, into the resident cache) and `input/lora` outputs it for a high-level
node's `loras` input, with the experts of a two-model stack it adapts (`expert`: both, the first,
high-noise model, or the second, low-noise one; a one-model stack takes both only). The stack is
part of the model handle, so the node cache keys of everything downstream change with a LoRA or
its strength, and an encode upstream does not.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from inline_core.contract.handles import LoraHandle, ModelHandle
from inline_core.contract.lora_stacks import BOTH
from inline_core.contract.registry import Families
from inline_core.diffusion.adapters.naming import NamingMismatch, read_layout
from inline_core.diffusion.adapters.stack import LoraUse
from inline_core.diffusion.files.header import HeaderError, read_header
from inline_core.errors import InvalidRequest, ModelMissing, NotFound
from inline_core.families.nodes.inputs import handle_input
from inline_core.graph.runner import NodeCall, NodeResult, NodeRunner, SubmitFacts
from inline_core.models.catalog import Catalog


class LoraPicker:
    """The picked LoRA file, checked against the families' namings."""

    def __init__(self, families: Families, catalog: Catalog) -> None:
        self.families = families
        self.catalog = catalog

    def pick(
        self, params: Mapping[str, Any], node_id: str | None = None, family: str | None = None
    ) -> LoraHandle:
        """The picked file as a LoRA of `family` (the family of the model it adapts, read in
        that family's namings alone), or of the first family whose namings read it (None)."""
        name = str(params["name"])
        try:
            entry = self.catalog.entry("loras", name)
        except NotFound as exc:
            raise ModelMissing(exc.message, node_id=node_id) from exc
        if entry.is_folder:
            raise InvalidRequest(f"loras/{name} is a folder, not a LoRA file", node_id=node_id)
        try:
            keys = read_header(entry.path)
        except HeaderError as exc:
            raise InvalidRequest(f"loras/{name}: {exc.message}", node_id=node_id) from exc
        takers = [f for f in self.families if f.loras is not None and family in (None, f.name)]
        if not takers:
            who = "no model family this server runs" if family is None else family
            raise InvalidRequest(f"{who} takes no LoRAs", node_id=node_id)
        refusals: list[str] = []
        mismatches: list[str] = []  # families whose namings do not hold the file's layers
        for taker in takers:
            assert taker.loras is not None
            try:
                read_layout(name, keys, taker.loras)
            except NamingMismatch as exc:
                mismatches.append(exc.message)
                continue
            except InvalidRequest as exc:
                refusals.append(exc.message)
                continue
            clip = params.get("strength_clip")
            use = LoraUse(
                name,
                str(entry.path),
                entry.identity,
                float(params["strength"]),
                None if clip is None else float(clip),
            )
            return LoraHandle(taker.name, use)
        # A family that knew the file's naming says the most; a file with no tensors tells every
        # family the same story, once.
        distinct = list(dict.fromkeys(refusals or mismatches))
        if refusals or len(distinct) == 1:
            raise InvalidRequest("; ".join(distinct), node_id=node_id)
        # Each family's own refusal names the same layers again (and all of them would outgrow
        # the error envelope): say it once, with what each family reads.
        expected = "; or ".join(t.loras.expected() for t in takers if t.loras is not None)
        raise InvalidRequest(
            f"loras/{name} is a LoRA for no model family this server runs: its layers (such as "
            f"{sorted(keys)[0]!r}) fit none of their namings; it looks like a LoRA for another "
            f"model (expected {expected})",
            node_id=node_id,
        )


class _LoraRunner(NodeRunner):
    def __init__(self, picker: LoraPicker) -> None:
        self.picker = picker

    def check(self, node_id: str, params: Mapping[str, Any]) -> LoraHandle:
        return self.picker.pick(params, node_id)

    def _handle(self, call: NodeCall, family: str | None = None) -> LoraHandle:
        prepared = call.prepared
        if (
            isinstance(prepared, LoraHandle)
            and prepared.use.strength == call.params["strength"]
            and prepared.use.clip_strength == call.params.get("strength_clip")
        ):
            return prepared
        return self.picker.pick(call.params, call.node_id, family)


class LoadLora(_LoraRunner):
    def check_node(self, node_id: str, params: Mapping[str, Any], facts: SubmitFacts) -> LoraHandle:
        # The model wired in carries its family (as its loader, or the load/lora before,
        # checked it at submit): the file is read in that family's namings alone.
        models = [
            v for v in facts.upstream.get("model", ()) if isinstance(v, ModelHandle | LoraHandle)
        ]
        if not models:
            return self.picker.pick(params, node_id)
        family, wired = models[0].family, models[0]
        model = wired if isinstance(wired, ModelHandle) else wired.model
        try:
            return dataclasses.replace(self.picker.pick(params, node_id, family), model=model)
        except InvalidRequest:
            other = self.picker.pick(params, node_id)  # another family's file: say whose
            raise InvalidRequest(
                f"loras/{other.use.name} is a LoRA for {other.family}; the model it is wired to "
                f"is {family}",
                node_id=node_id,
            ) from None

    def run(self, call: NodeCall) -> NodeResult:
        model = handle_input(call, "model", ModelHandle)
        lora = self._handle(call, model.family)
        if lora.family != model.family:
            raise InvalidRequest(
                f"loras/{lora.use.name} is a LoRA for {lora.family}; model {model.name!r} is "
                f"{model.family}",
                node_id=call.node_id,
            )
        adapted = dataclasses.replace(model, loras=(*model.loras, lora.use))
        return NodeResult(outputs={"model": adapted})


class InputLora(_LoraRunner):
    def check(self, node_id: str, params: Mapping[str, Any]) -> LoraHandle:
        return self._with_expert(super().check(node_id, params), params)

    def run(self, call: NodeCall) -> NodeResult:
        handle = self._with_expert(self._handle(call), call.params)
        return NodeResult(outputs={"lora": handle})

    @staticmethod
    def _with_expert(handle: LoraHandle, params: Mapping[str, Any]) -> LoraHandle:
        return dataclasses.replace(handle, expert=str(params.get("expert") or BOTH))
