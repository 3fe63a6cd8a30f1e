"""`load/diffusion-model`, `load/vae`, `load/text-encoder` for Z-Image (torch-free at import).

`check` (at submit) identifies the picked file from its header or config, so a checkpoint of
another model family is refused in milliseconds with `model_missing`. `run` loads the weights into
the engine's resident cache (a later run or the Z-Image node finds them there), or, where the model
is split across ranks, starts the worker group holding the transformer, and outputs a handle
naming the files.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inline_core.graph.runner import NodeCall, NodeResult, NodeRunner
from inline_core.models.zimage.primitives.handles import ModelHandle, TextEncoderHandle, VAEHandle
from inline_core.models.zimage.primitives.owner import EngineOwner


def _file(params: Mapping[str, Any]) -> str:
    return str(params["file"])


class LoadDiffusionModel(NodeRunner):
    def __init__(self, owner: EngineOwner) -> None:
        self.owner = owner

    def handle(self, params: Mapping[str, Any]) -> ModelHandle:
        name = _file(params)
        transformer, scheduler = self.owner.resolver.model_file(name)
        return ModelHandle(name, transformer, scheduler)

    def check(self, node_id: str, params: Mapping[str, Any]) -> None:
        self.handle(params)

    def cache_identity(self, params: Mapping[str, Any]) -> str:
        handle = self.handle(params)
        scheduler = "default" if handle.scheduler is None else handle.scheduler.identity()
        return f"{handle.transformer.identity()}|{scheduler}"

    def run(self, call: NodeCall) -> NodeResult:
        from inline_core.models.zimage.primitives import ops

        reporter = call.ctx.reporter(call.node_id)
        reporter.phase("loading")
        handle = self.handle(call.params)
        ops.load_model(self.owner, handle, call.node_id)
        reporter.phase("loading", 1.0)
        return NodeResult(outputs={"model": handle})


class LoadVAE(NodeRunner):
    def __init__(self, owner: EngineOwner) -> None:
        self.owner = owner

    def handle(self, params: Mapping[str, Any]) -> VAEHandle:
        name = _file(params)
        return VAEHandle(name, self.owner.resolver.vae_file(name))

    def check(self, node_id: str, params: Mapping[str, Any]) -> None:
        self.handle(params)

    def cache_identity(self, params: Mapping[str, Any]) -> str:
        return self.handle(params).source.identity()

    def run(self, call: NodeCall) -> NodeResult:
        from inline_core.models.zimage.primitives import ops

        reporter = call.ctx.reporter(call.node_id)
        reporter.phase("loading")
        handle = self.handle(call.params)
        ops.load_vae(self.owner, handle)
        reporter.phase("loading", 1.0)
        return NodeResult(outputs={"vae": handle})


class LoadTextEncoder(NodeRunner):
    def __init__(self, owner: EngineOwner) -> None:
        self.owner = owner

    def handle(self, params: Mapping[str, Any]) -> TextEncoderHandle:
        name = _file(params)
        encoder, tokenizer = self.owner.resolver.text_encoder_file(name)
        return TextEncoderHandle(name, encoder, tokenizer)

    def check(self, node_id: str, params: Mapping[str, Any]) -> None:
        self.handle(params)

    def cache_identity(self, params: Mapping[str, Any]) -> str:
        # The tokenizer may live outside the models folder (a single-file encoder's).
        handle = self.handle(params)
        return f"{handle.encoder.identity()}|{handle.tokenizer.identity()}"

    def run(self, call: NodeCall) -> NodeResult:
        from inline_core.models.zimage.primitives import ops

        reporter = call.ctx.reporter(call.node_id)
        reporter.phase("loading")
        handle = self.handle(call.params)
        ops.load_text_encoder(self.owner, handle)
        reporter.phase("loading", 1.0)
        return NodeResult(outputs={"text_encoder": handle})
