"""Source nodes: where curated inputs enter a graph (`input/text`, `input/image`).

They are the closure boundary: a client feeds text or an image in as a source node, so nothing
upstream of it is recomputed. Hidden from the add-node menu; they write no takes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from PIL import Image

from inline_core.errors import InvalidGraph, InvalidRequest, NotFound
from inline_core.graph.descriptor import NodeDescriptor, ParamSpec, ParamWidget, PortSpec
from inline_core.graph.params import media_ref
from inline_core.graph.registry import Registry
from inline_core.graph.runner import (
    MediaResolver,
    NodeCall,
    NodeResult,
    NodeRunner,
    SubmitFacts,
)
from inline_core.graph.schema import PortKind

MAX_TEXT_LENGTH = 100_000

INPUT_TEXT = NodeDescriptor(
    type="input/text",
    title="Text",
    category="input",
    icon="type",
    hidden=True,
    params=(ParamSpec("text", ParamWidget.TEXTAREA, default="", max_length=MAX_TEXT_LENGTH),),
    outputs=(PortSpec("text", PortKind.TEXT),),
    description="A piece of text, such as a prompt.",
)

INPUT_IMAGE = NodeDescriptor(
    type="input/image",
    title="Image",
    category="input",
    icon="image",
    hidden=True,
    params=(ParamSpec("asset", ParamWidget.MEDIA, required=True, label="Image"),),
    outputs=(PortSpec("image", PortKind.IMAGE),),
    description="An uploaded asset or an earlier take, as an RGB image.",
)


class TextSource(NodeRunner):
    def check_node(self, node_id: str, params: Mapping[str, Any], facts: SubmitFacts) -> str:
        # Its text, so a node it feeds can check a curated prompt at submit (`Submit.upstream`);
        # no disk is read (`check` stays the base's: `may_wait_on_disk`).
        return str(params["text"])

    def run(self, call: NodeCall) -> NodeResult:
        return NodeResult(outputs={"text": str(call.params["text"])})


def _ref_param(params: Mapping[str, Any]) -> Mapping[str, Any]:
    return cast(Mapping[str, Any], params["asset"])


def open_image(path: Path, what: str) -> Image.Image:
    """Open an image file fully (so a truncated file fails here, not downstream), in its own
    mode (its alpha kept)."""
    try:
        with Image.open(path) as probe:
            probe.verify()  # checks the file's structure; the image must be reopened after it
        image = Image.open(path)
        try:
            image.load()
        except BaseException:
            image.close()
            raise
        return image
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise InvalidRequest(f"{what} is not a readable image: {exc}") from exc


def open_rgb(path: Path, what: str) -> Image.Image:
    """`open_image`, as RGB."""
    with open_image(path, what) as image:
        return image.convert("RGB")


class MediaSource(NodeRunner):
    """A source reading an uploaded asset or a take, named by its `asset` param."""

    def __init__(self, media: MediaResolver) -> None:
        self.media = media

    def check(self, node_id: str, params: Mapping[str, Any]) -> None:
        # Refuse a graph that names media we do not have at submit, not when the node runs.
        ref = media_ref(_ref_param(params))
        try:
            self.media.resolve(ref)
        except NotFound as exc:
            raise InvalidGraph(f"param 'asset': {exc.message}", node_id=node_id) from exc

    def image_size(self, params: Mapping[str, Any]) -> tuple[int, int] | None:
        try:
            with Image.open(self.media.resolve(media_ref(_ref_param(params)))) as image:
                return image.size  # the header's: the pixels are not read
        except (NotFound, OSError, SyntaxError, ValueError, Image.DecompressionBombError):
            return None  # refused by `check`, or when it runs

    def cache_identity(self, params: Mapping[str, Any], prepared: object | None = None) -> str:
        # Assets and takes are immutable and named by content or run, so the id is the identity.
        ref = media_ref(_ref_param(params))
        return f"{ref.ref}:{ref.id}"

    def path(self, params: Mapping[str, Any]) -> tuple[Path, str]:
        """The file behind the node's `asset`, and how to name it in an error."""
        ref = media_ref(_ref_param(params))
        return self.media.resolve(ref), f"{ref.ref} {ref.id!r}"


class ImageSource(MediaSource):
    def run(self, call: NodeCall) -> NodeResult:
        image = open_rgb(*self.path(call.params))
        return NodeResult(outputs={"image": image})


def register_sources(registry: Registry, media: MediaResolver) -> None:
    registry.register(INPUT_TEXT, TextSource())
    registry.register(INPUT_IMAGE, ImageSource(media))
