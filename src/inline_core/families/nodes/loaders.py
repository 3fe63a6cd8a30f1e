"""`load/diffusion-model`, `load/vae`, `load/text-encoder`, for every family (torch-free at import).

`check` (at submit) asks each family that serves the primitives, in turn, whether it takes the
picked file (from its header or folder config), so a checkpoint no family runs is refused in
milliseconds with `model_missing`; the handle it finds comes back to the run. A text encoder
file several families read (Qwen3-4B: Z-Image's and FLUX.2 klein's) is read as its `type` says
(ComfyUI's CLIPLoader type); without one, the ways the run's `sample`s take it (`fitted`, once
every node is checked), each such family's way where those are not known at submit. `run`
loads the weights into the server's resident cache (a later run, or the family's own node, finds
them there), or, where the model is split across ranks, starts the worker group holding the
transformer, and outputs the handle.
"""

from __future__ import annotations

import dataclasses
from abc import abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, Generic, Protocol, TypeVar

from inline_core.contract.family import Family
from inline_core.contract.handles import ModelHandle, TextEncoderHandle, VAEHandle
from inline_core.contract.registry import Families
from inline_core.engine.runtime import ModelRuntime
from inline_core.errors import InvalidRequest, ModelMissing, NotFound
from inline_core.graph.runner import Needs, NodeCall, NodeResult, NodeRunner
from inline_core.models.catalog import Catalog, CatalogEntry

H = TypeVar("H")


class _FamilyHandle(Protocol):
    @property
    def family(self) -> str: ...


L = TypeVar("L", bound=_FamilyHandle)


class Loaders:
    """What the three loaders share: the families to ask, the catalog, the runtime."""

    def __init__(self, families: Families, catalog: Catalog, runtime: ModelRuntime) -> None:
        self.families = families
        self.catalog = catalog
        self.runtime = runtime

    def entry(self, category: str, params: Mapping[str, Any]) -> CatalogEntry:
        try:
            return self.catalog.entry(category, str(params["file"]))
        except NotFound as exc:
            raise ModelMissing(exc.message) from exc

    def first(
        self,
        entry: CatalogEntry,
        take: Callable[[Family, CatalogEntry], H | None],
        refusal: Callable[[list[Family]], str],
        families: list[Family] | None = None,
    ) -> H:
        """The first family's handle on `entry` (of `families`, else of every family serving
        the primitives), or `ModelMissing` saying why none takes it."""
        families = self.families.with_primitives() if families is None else families
        for family in families:
            handle = take(family, entry)
            if handle is not None:
                return handle
        raise ModelMissing(refusal(families))


def _hints(families: list[Family], hint: Callable[[Family], str]) -> str:
    return "; ".join(family.files.hint(hint(family)) for family in families)


def _part_refusal(part: str, category: str, name: str) -> Callable[[list[Family]], str]:
    def refusal(families: list[Family]) -> str:
        titles = ", not a ".join(f.files.part_rule(part).title for f in families) or part
        hints = _hints(families, lambda f: f.files.part_rule(part).hint)
        return f"{category}/{name} is not a {titles}; {hints}"

    return refusal


class HandleLoader(NodeRunner, Generic[L]):
    """A loader: `check` finds the handle at submit, `run` loads what it names and outputs it."""

    kind: type[L]
    output: str  # the output port

    def __init__(self, loaders: Loaders) -> None:
        self.loaders = loaders

    @abstractmethod
    def handle(self, params: Mapping[str, Any]) -> L:
        """The handle on the picked file, or `ModelMissing` saying why no family takes it."""

    @abstractmethod
    def identity(self, handle: L) -> str:
        """What changes when the files behind the handle change."""

    @abstractmethod
    def load(self, family: Family, handle: L, call: NodeCall) -> None:
        """Bring the weights into the resident cache (or the worker group), for `call`'s run."""

    def check(self, node_id: str, params: Mapping[str, Any]) -> L:
        return self.handle(params)

    def _prepared(self, params: Mapping[str, Any], prepared: object | None) -> L:
        return prepared if isinstance(prepared, self.kind) else self.handle(params)

    def cache_identity(self, params: Mapping[str, Any], prepared: object | None = None) -> str:
        return self.identity(self._prepared(params, prepared))

    def run(self, call: NodeCall) -> NodeResult:
        handle = self._prepared(call.params, call.prepared)
        family = self.loaders.families.named(handle.family)
        reporter = call.ctx.reporter(call.node_id)
        reporter.phase("loading")
        self.load(family, handle, call)
        reporter.phase("loading", 1.0)
        return NodeResult(outputs={self.output: handle})


class LoadDiffusionModel(HandleLoader[ModelHandle]):
    kind = ModelHandle
    output = "model"

    def handle(self, params: Mapping[str, Any]) -> ModelHandle:
        entry = self.loaders.entry("diffusion_models", params)

        def take(family: Family, found: CatalogEntry) -> ModelHandle | None:
            files = family.files.model_file(found)
            return None if files is None else ModelHandle(family.name, found.name, *files)

        def refusal(families: list[Family]) -> str:
            # Each family's title said whole ("not a FLUX.2 ..., not a Z-Image ...").
            titles = ", not a ".join(f.files.rules.model.title for f in families) or "model"
            names = " or ".join(f.title for f in families) or "no model family"
            runs = "is the model family" if len(families) == 1 else "are the model families"
            hints = _hints(families, lambda f: f.files.rules.model.hint)
            return (
                f"diffusion_models/{entry.name} is not a {titles}, and {names} {runs} this "
                f"server runs; {hints}"
            )

        return self.loaders.first(entry, take, refusal)

    def identity(self, handle: ModelHandle) -> str:
        scheduler = "default" if handle.scheduler is None else handle.scheduler.identity()
        return f"{handle.family}|{handle.transformer.identity()}|{scheduler}"

    def load(self, family: Family, handle: ModelHandle, call: NodeCall) -> None:
        from inline_core.families.nodes import ops

        ops.load_model(self.loaders.runtime, family, handle, call.node_id, call.ctx.run_id)


class LoadVAE(HandleLoader[VAEHandle]):
    kind = VAEHandle
    output = "vae"

    def handle(self, params: Mapping[str, Any]) -> VAEHandle:
        entry = self.loaders.entry("vae", params)

        def take(family: Family, found: CatalogEntry) -> VAEHandle | None:
            source = family.files.part_file("vae", found)
            return None if source is None else VAEHandle(family.name, found.name, source)

        return self.loaders.first(entry, take, _part_refusal("vae", "vae", entry.name))

    def identity(self, handle: VAEHandle) -> str:
        return f"{handle.family}|{handle.source.identity()}"

    def load(self, family: Family, handle: VAEHandle, call: NodeCall) -> None:
        from inline_core.families.nodes import ops

        ops.load_vae(self.loaders.runtime, family, handle, call.ctx.run_id)


class LoadTextEncoder(HandleLoader[TextEncoderHandle]):
    kind = TextEncoderHandle
    output = "text_encoder"

    def handle(self, params: Mapping[str, Any]) -> TextEncoderHandle:
        entry = self.loaders.entry("text_encoders", params)
        tokenizer_missing: list[str] = []

        def take(family: Family, found: CatalogEntry) -> TextEncoderHandle | None:
            encoder = family.files.part_file("text_encoder", found)
            if encoder is None:
                return None
            tokenizer = family.files.tokenizer_for(encoder)
            if tokenizer is None:
                rule = family.files.rules.tokenizer
                tokenizer_missing.append(rule.hint if rule is not None else "no tokenizer found")
                return None
            return TextEncoderHandle(family.name, found.name, encoder, tokenizer)

        part_refusal = _part_refusal("text_encoder", "text_encoders", entry.name)

        def refusal(families: list[Family]) -> str:
            if tokenizer_missing:
                return f"text_encoders/{entry.name} has no tokenizer: {tokenizer_missing[0]}"
            return part_refusal(families)

        readers = self.readers(params)
        found = self.loaders.first(entry, take, refusal, readers)
        if readers is not None:
            return found
        # Not told whose reading: the other families that take the file read it too.
        others = self.loaders.families.with_primitives()
        also = [take(f, entry) for f in others if f.name != found.family]
        return dataclasses.replace(found, also=tuple(h for h in also if h is not None))

    def readers(self, params: Mapping[str, Any]) -> list[Family] | None:
        """The families whose reading `type` names (ComfyUI's CLIPLoader type); None: any."""
        kind = str(params.get("type") or "").strip().lower()
        if not kind:
            return None
        served = self.loaders.families.with_primitives()
        found = [f for f in served if kind in f.comfy_text_encoder_types]
        if not found:
            known = sorted({t for f in served for t in f.comfy_text_encoder_types})
            listed = ", ".join(repr(t) for t in known) or "none"
            raise InvalidRequest(
                f"no model family here reads text encoders of type {kind!r} through the "
                f"primitives (the types: {listed})"
            )
        return found

    def fitted(self, prepared: object | None, needs: Mapping[str, Needs]) -> object | None:
        """An untyped encoder read only the ways the run's consumers take its prompts (each
        `sample`'s model's family): one reading per model family, not one per family that reads
        the file. Where a consumer's family is not known at submit, every way, as before."""
        wanted = needs.get(self.output)
        if wanted is None or not isinstance(prepared, TextEncoderHandle) or not prepared.also:
            return prepared
        kept = [h for h in (prepared, *prepared.also) if h.family in wanted]
        if not kept:  # a reading no family here makes: `sample`'s 422 at submit says so
            return prepared
        return dataclasses.replace(kept[0], also=tuple(kept[1:]))

    def identity(self, handle: TextEncoderHandle) -> str:
        # The tokenizer may live outside the models folder (a single-file encoder's).
        return "+".join(
            f"{h.family}|{h.encoder.identity()}|{h.tokenizer.identity()}"
            for h in (handle, *handle.also)
        )

    def load(self, family: Family, handle: TextEncoderHandle, call: NodeCall) -> None:
        from inline_core.families.nodes import ops

        ops.load_text_encoder(self.loaders.runtime, family, handle, call.ctx.run_id)
