"""The nodes every install serves, with or without torch: sources, primitives, image, mask and
video nodes."""

from __future__ import annotations

from inline_core.graph.image_nodes import register_image_nodes
from inline_core.graph.mask_nodes import register_mask_nodes
from inline_core.graph.primitives import register_primitive_descriptors
from inline_core.graph.registry import Registry
from inline_core.graph.runner import MediaResolver
from inline_core.graph.sources import register_sources
from inline_core.graph.video_nodes import register_video_nodes


def register_builtin_nodes(registry: Registry, media: MediaResolver) -> None:
    register_sources(registry, media)
    register_primitive_descriptors(registry)
    register_image_nodes(registry)
    register_mask_nodes(registry, media)
    register_video_nodes(registry)
