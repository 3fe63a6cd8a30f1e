"""Videos streamed while they decode (torch-free): `LiveVideos`, the server's board of the video
nodes decoding now, and `Mp4Fragments`, one client's fragmented MP4 of them.

A video node's runner opens a `LiveVideo` on the board before its job runs (`ExecutionContext.
streaming`), hands it each decoded chunk's frames (the same arrays the decode keeps for the take:
nothing is copied) and ends it once the take is written, or when the render fails. A client of
`GET /v1/runs/{id}/media/{node}` reads it from its first frame, whenever it joins, and encodes its
own H.264 stream as frames arrive: nothing is encoded for a video nobody watches, and a late joiner
gets the stream from the start. The stream's encoder runs with x264's `zerolatency` tuning (no
lookahead, no B-frames: each frame's packet is out as soon as it is encoded) into a fragmented MP4
cut at every frame, so a player can start on the first chunk; the take itself is encoded once the
whole video is decoded (`runtime.video`), and is what the route serves after the run. A video with
a soundtrack (`LiveVideo.set_audio`, before its first chunk) streams it as an AAC track from the
first chunk: each chunk's fragment carries the sound up to that chunk's last frame.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator
from contextlib import contextmanager
from typing import Any

from inline_core.runtime.video import (
    Audio,
    Frames,
    add_aac,
    encode_samples,
    even_frames,
    open_h264,
)


class LiveVideo:
    """One video node's decoded frames so far, shared by every client streaming it."""

    def __init__(self, fps: int) -> None:
        self.fps = fps
        self._chunks: list[Frames] = []
        self._ended = False
        self.ok = False  # ended with its take written (False: the render failed or stopped)
        self._changed = threading.Condition()
        self._audio: Audio | None = None

    def set_audio(self, audio: Audio) -> None:
        """The video's soundtrack, whole (before its first chunk: a stream's tracks are set at
        its start)."""
        with self._changed:
            self._audio = audio
            self._changed.notify_all()

    @property
    def audio(self) -> Audio | None:
        with self._changed:
            return self._audio

    def add(self, frames: Frames) -> None:
        with self._changed:
            self._chunks.append(frames)
            self._changed.notify_all()

    def end(self, ok: bool) -> None:
        with self._changed:
            self._ended, self.ok = True, ok
            self._changed.notify_all()

    @property
    def ended(self) -> bool:
        with self._changed:
            return self._ended

    def chunks_after(self, seen: int, timeout: float) -> tuple[list[Frames], bool]:
        """The chunks after the first `seen`, waiting up to `timeout` seconds for one, and
        whether the video has ended (no chunk follows those returned)."""
        with self._changed:
            self._changed.wait_for(lambda: len(self._chunks) > seen or self._ended, timeout)
            return self._chunks[seen:], self._ended


class LiveVideos:
    """The video nodes decoding on this server, by (run, node), and a wake-up for the clients
    waiting for one to start."""

    def __init__(self, video: Callable[[int], LiveVideo] = LiveVideo) -> None:
        self._video = video  # makes each node's live video from its fps
        self._videos: dict[tuple[str, str], LiveVideo] = {}
        self._changed = threading.Condition()

    def get(self, run_id: str, node_id: str) -> LiveVideo | None:
        with self._changed:
            return self._videos.get((run_id, node_id))

    def wait(self, run_id: str, node_id: str, timeout: float) -> LiveVideo | None:
        """The node's live video, waiting up to `timeout` seconds for it to open."""
        with self._changed:
            self._changed.wait_for(lambda: (run_id, node_id) in self._videos, timeout)
            return self._videos.get((run_id, node_id))

    @contextmanager
    def streaming(self, run_id: str, node_id: str, fps: int) -> Generator[LiveVideo]:
        """A live video for the block: ended ok if the block ends normally (after the take is
        written), not ok if it raises; off the board either way."""
        live = self._video(fps)
        key = (run_id, node_id)
        with self._changed:
            self._videos[key] = live  # a re-run of the node replaces an earlier attempt's
            self._changed.notify_all()
        ok = False
        try:
            yield live
            ok = True
        finally:
            live.end(ok)
            with self._changed:
                if self._videos.get(key) is live:
                    del self._videos[key]
                self._changed.notify_all()


# Samples of sound encoded ahead of a chunk's last frame, so the muxer releases all of the
# chunk's frames at once (three AAC frames: the encoder's delay and one more).
SOUND_LEAD = 3 * 1024


class _Sink:
    """Where the muxer writes: bytes collected until the stream's reader takes them."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        self._parts.append(chunk)
        return len(chunk)

    def take(self) -> bytes:
        out = b"".join(self._parts)
        self._parts.clear()
        return out


class Mp4Fragments:
    """One client's H.264 stream of a video's frames, as fragmented MP4 bytes: `add` encodes
    frames and gives what the muxer wrote for them, `finish` flushes the encoder (the last
    fragments). Not thread-safe: one reader drives it."""

    def __init__(self, fps: int) -> None:
        self.fps = fps
        self._sink = _Sink()
        self._out: Any = None
        self._stream: Any = None
        self._av: Any = None
        self._frames = 0  # frames encoded so far
        self._sound: Any = None  # the AAC track, where the video has a soundtrack
        self._audio: Audio | None = None
        self._heard = 0  # samples encoded so far

    def add(self, frames: Frames, audio: Audio | None = None) -> bytes:
        """Encode `frames`, and the soundtrack `audio` (the same every call; its track opens
        with the stream's first frames) up to their end."""
        if self._out is None:
            self._out, self._stream, self._av = open_h264(
                self._sink,
                self.fps,
                frames.shape[2],
                frames.shape[1],
                live=True,
                sound=audio is not None,
            )
            if audio is not None:
                self._sound = add_aac(self._out, audio.sample_rate, audio.channels)
                self._audio = audio
        for index, frame in enumerate(even_frames(frames), start=self._frames):
            image = self._av.VideoFrame.from_ndarray(frame, format="rgb24")
            image.pts = index  # in frames: the muxer interleaves a soundtrack by time
            for packet in self._stream.encode(image):
                self._out.mux(packet)
        self._frames += len(frames)
        if self._audio is not None:  # a little past the frames: the muxer interleaves by time,
            # and AAC's encoder hands its packets out a few frames late
            end = round(self._frames / self.fps * self._audio.sample_rate) + SOUND_LEAD
            self._hear(min(end, self._audio.samples.shape[1]))
        return self._sink.take()

    def _hear(self, until: int) -> None:
        """Encode the soundtrack's samples up to sample `until`."""
        audio = self._audio
        if audio is None or until <= self._heard:
            return
        samples = audio.samples[:, self._heard : until]
        for packet in encode_samples(self._sound, samples, audio.sample_rate, self._heard):
            self._out.mux(packet)
        self._heard += samples.shape[1]

    def finish(self) -> bytes:
        if self._out is None:
            return b""
        for packet in self._stream.encode():
            self._out.mux(packet)
        if self._audio is not None:
            self._hear(self._audio.samples.shape[1])
            for packet in self._sound.encode():
                self._out.mux(packet)
        self._out.close()
        self._out = None
        return self._sink.take()

    def close(self) -> None:
        """Drop an unfinished stream (its client went away, or the render failed)."""
        if self._out is not None:
            self._out.close()
            self._out = None
