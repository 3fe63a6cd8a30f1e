"""Torch-free video nodes: `video/frame` takes one frame out of a video as an image.

A frame can then feed any image input: Z-Image's img2img, Wan 2.2 TI2V's first frame (the last
frame of one clip starting the next), the image nodes. An `image` wired into a `video` input is a
one-frame video (`graph/schema.py`'s coercions), so this node takes an image too.
"""

from __future__ import annotations

from inline_core.errors import InvalidRequest, RunFailed
from inline_core.graph.descriptor import NodeDescriptor, ParamSpec, ParamWidget, PortSpec
from inline_core.graph.registry import Registry
from inline_core.graph.runner import NodeCall, NodeResult, NodeRunner
from inline_core.graph.schema import PortKind
from inline_core.runtime.video import Video

MAX_FRAMES = 100_000

VIDEO_FRAME = NodeDescriptor(
    type="video/frame",
    title="Frame",
    category="video",
    icon="image",
    output_kind="image",
    inputs=(PortSpec("video", PortKind.VIDEO),),
    outputs=(PortSpec("image", PortKind.IMAGE),),
    params=(
        ParamSpec(
            "index",
            ParamWidget.NUMBER,
            0,
            minimum=-MAX_FRAMES,
            maximum=MAX_FRAMES - 1,
            integer=True,
            label="Frame (0 the first; -1 the last)",
        ),
    ),
    description=(
        "One frame of a video as an image, saved as a PNG take: index 0 is the first frame, "
        "negative indices count from the end (-1 is the last)."
    ),
)


class FrameOfVideo(NodeRunner):
    def run(self, call: NodeCall) -> NodeResult:
        video = call.inputs.get("video")
        if not isinstance(video, Video):
            raise RunFailed(f"input 'video' is not a video (got {type(video).__name__})")
        index = int(call.params["index"])
        try:
            image = video.frame(index)
        except IndexError:
            raise InvalidRequest(
                f"param 'index' {index} is outside the video's {video.frame_count} frames "
                f"(0 to {video.frame_count - 1}, or -1 to -{video.frame_count} from the end)",
                node_id=call.node_id,
            ) from None
        report = call.ctx.reporter(call.node_id)
        report.phase("save")
        take = call.ctx.save_image(call.node_id, image, call.params)
        report.phase("save", 1.0)
        return NodeResult(outputs={"image": image}, takes=(take,))


def register_video_nodes(registry: Registry) -> None:
    registry.register(VIDEO_FRAME, FrameOfVideo())
