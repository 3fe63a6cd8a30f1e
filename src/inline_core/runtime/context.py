"""`ExecutionContext`: what a node runner sees of the run it is part of."""

from __future__ import annotations

import json
from collections.abc import Generator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

from PIL import Image

from inline_core.media import MediaKind
from inline_core.runtime.audio import AUDIO_SUFFIXES, encode_audio
from inline_core.runtime.cancel import CancelToken
from inline_core.runtime.interactions import Interaction, InteractionBoard, InteractionInbox
from inline_core.runtime.png import encode_png
from inline_core.runtime.preview import PreviewTarget
from inline_core.runtime.progress import EventSink, NodeReporter, RunEvent
from inline_core.runtime.step_cache import POLICY_CHOICE, StepCacheChoice
from inline_core.runtime.store import TakeStore
from inline_core.runtime.video import SUFFIXES, Audio, Video, encode
from inline_core.runtime.video_stream import LiveVideo, LiveVideos
from inline_core.takes import Take


def _drop(_event: RunEvent) -> None:
    return None


@dataclass
class ExecutionContext:
    run_id: str
    takes: TakeStore
    cancel: CancelToken = field(default_factory=CancelToken)
    events: EventSink = _drop
    # The graph JSON and target, embedded in PNG takes so a take can be re-rendered.
    graph_json: Mapping[str, Any] = field(default_factory=dict[str, Any])
    target: str = ""
    # The run's step previews (None: off), delivered by the server that runs it.
    preview: PreviewTarget | None = None
    # The run's step caching, as it asked (nothing: the device policy chooses per render).
    step_cache: StepCacheChoice = POLICY_CHOICE
    # The server's videos decoding now, streamed to clients as they decode (None: not streamed).
    videos: LiveVideos | None = None
    # The run's stored interactions (replayed at their boundaries after a restart), and where
    # a render that takes interactions is published for the server's route (None: nowhere).
    interactions: tuple[Interaction, ...] = ()
    interaction_board: InteractionBoard | None = None

    @contextmanager
    def interacting(self, inbox: InteractionInbox) -> Generator[None]:
        """The render's inbox reachable by the run's interactions for the block."""
        if self.interaction_board is None:
            yield
            return
        with self.interaction_board.open(self.run_id, inbox):
            yield

    @contextmanager
    def streaming(self, node_id: str, fps: int) -> Generator[LiveVideo | None]:
        """The node's video, live for the block (its clients stream the frames handed to it);
        None where nothing streams."""
        if self.videos is None:
            yield None
            return
        with self.videos.streaming(self.run_id, node_id, fps) as live:
            yield live

    def reporter(self, node_id: str) -> NodeReporter:
        return NodeReporter(self.run_id, node_id, self.events)

    def save_image(
        self,
        node_id: str,
        image: Image.Image,
        params: Mapping[str, Any],
        index: int = 0,
        chosen: Mapping[str, Any] | None = None,
    ) -> Take:
        """Encode `image` as a PNG take carrying the graph and params in its text chunks.
        `chosen`: params of this node the run chose itself (e.g. the model, left empty for
        "auto"), written into the embedded graph so re-submitting it renders the same take."""
        data = encode_png(image, self._embedded(node_id, params, chosen))
        return self.takes.write(
            run_id=self.run_id,
            node_id=node_id,
            index=index,
            kind=MediaKind.IMAGE,
            data=data,
            suffix=".png",
            params=params,
        )

    def save_video(
        self,
        node_id: str,
        video: Video,
        params: Mapping[str, Any],
        index: int = 0,
        chosen: Mapping[str, Any] | None = None,
    ) -> Take:
        """Encode `video` (MP4 or APNG, as it says) as a video take carrying the graph and
        params as an image take does (MP4 metadata tags, APNG text chunks)."""
        return self.takes.write(
            run_id=self.run_id,
            node_id=node_id,
            index=index,
            kind=MediaKind.VIDEO,
            data=encode(video, self._embedded(node_id, params, chosen)),
            suffix=SUFFIXES[video.format],
            params=params,
        )

    def save_audio(
        self,
        node_id: str,
        audio: Audio,
        params: Mapping[str, Any],
        format: str = "wav",
        index: int = 0,
        chosen: Mapping[str, Any] | None = None,
    ) -> Take:
        """Encode `audio` (WAV or FLAC) as an audio take carrying the graph and params."""
        return self.takes.write(
            run_id=self.run_id,
            node_id=node_id,
            index=index,
            kind=MediaKind.AUDIO,
            data=encode_audio(audio, format, self._embedded(node_id, params, chosen)),
            suffix=AUDIO_SUFFIXES[format],
            params=params,
        )

    def _embedded(
        self, node_id: str, params: Mapping[str, Any], chosen: Mapping[str, Any] | None
    ) -> dict[str, str]:
        """What a take file carries so it can be rendered again: its params, the run's graph
        (with the params the run chose itself), the target and the node."""
        graph = _with_params(self.graph_json, node_id, chosen or {})
        return {
            "inline:params": json.dumps(dict(params), sort_keys=True, default=str),
            "inline:graph": json.dumps(graph, sort_keys=True),
            "inline:target": self.target or node_id,
            "inline:node": node_id,
        }


def _with_params(
    graph: Mapping[str, Any], node_id: str, chosen: Mapping[str, Any]
) -> dict[str, Any]:
    out = dict(graph)
    if not chosen or not isinstance(out.get("nodes"), list):
        return out
    nodes: list[Any] = []
    for node in cast(list[Any], out["nodes"]):
        if isinstance(node, Mapping) and cast(Mapping[str, Any], node).get("id") == node_id:
            node = dict(cast(Mapping[str, Any], node))
            node["params"] = {**cast(Mapping[str, Any], node.get("params") or {}), **chosen}
        nodes.append(node)
    out["nodes"] = nodes
    return out
