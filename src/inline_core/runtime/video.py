"""Video takes: frames (uint8 RGB) encoded as H.264 MP4 or a lossless animated PNG (torch-free).

MP4 goes through PyAV (the `video` extra; `startup_checks` names it when missing): libx264,
yuv420p (what every player takes), fragmented so the first bytes are ready before the last frame;
a video with a soundtrack (`Audio`) carries it as an AAC track (an APNG has none: its soundtrack
is a take of its own, `runtime/audio.py`).
APNG goes through Pillow, lossless, for exact comparisons. Either carries the take's graph and
params as image takes do (MP4 metadata tags, the APNG's text chunks).
"""

from __future__ import annotations

import importlib
import importlib.util
import io
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import numpy.typing as npt
from PIL import Image, PngImagePlugin

from inline_core.errors import RunFailed
from inline_core.runtime.x264_asm import take_x264_asm

Frames = npt.NDArray[np.uint8]  # (frames, height, width, 3)
SUFFIXES = {"mp4": ".mp4", "png": ".apng"}  # the take file; its content type follows (media.py)
VIDEO_MODULE = "av"
VIDEO_HINT = "install the video extra for MP4 takes: pip install 'inline-core[video]'"


Samples = npt.NDArray[np.float32]  # (channels, samples), floats in -1..1


@dataclass(frozen=True)
class Audio:
    """A soundtrack: its samples and how many play a second."""

    samples: Samples
    sample_rate: int

    @property
    def channels(self) -> int:
        return int(self.samples.shape[0])

    @property
    def duration(self) -> float:
        return self.samples.shape[1] / self.sample_rate


@dataclass(frozen=True)
class Video:
    """A rendered video: its frames, how fast they play, how the take encodes them, and its
    soundtrack where it has one."""

    frames: Frames
    fps: int
    format: str = "mp4"
    audio: Audio | None = None

    @property
    def size(self) -> tuple[int, int]:
        return int(self.frames.shape[2]), int(self.frames.shape[1])

    @property
    def frame_count(self) -> int:
        return int(self.frames.shape[0])

    @classmethod
    def of_image(cls, image: Image.Image) -> Video:
        """An image as a one-frame video (the graph's `image` -> `video` coercion)."""
        frames = np.asarray(image.convert("RGB"), dtype=np.uint8)[np.newaxis]
        return cls(frames, fps=1, format="png")

    def frame(self, index: int) -> Image.Image:
        """Frame `index` as an RGB image (negative: from the end, -1 the last)."""
        count = self.frame_count
        if not -count <= index < count:
            raise IndexError(index)
        return Image.fromarray(self.frames[index], "RGB")


def video_available() -> bool:
    return importlib.util.find_spec(VIDEO_MODULE) is not None


def encode(video: Video, metadata: Mapping[str, str] | None = None) -> bytes:
    """The take's file; `metadata` (text by key) goes inside it: the APNG's text chunks, the
    MP4's metadata tags."""
    if video.format == "png":
        return encode_apng(video, metadata)
    if video.format == "mp4":
        return encode_mp4(video, metadata)
    raise RunFailed(f"unknown video format {video.format!r}")


def encode_apng(video: Video, metadata: Mapping[str, str] | None = None) -> bytes:
    images = [Image.fromarray(frame, "RGB") for frame in video.frames]
    info = PngImagePlugin.PngInfo()
    for key, value in (metadata or {}).items():
        info.add_text(key, value)
    buf = io.BytesIO()
    images[0].save(
        buf,
        format="PNG",
        save_all=True,
        append_images=images[1:],
        duration=1000 / video.fps,
        loop=0,
        compress_level=1,
        pnginfo=info,
    )
    return buf.getvalue()


def encode_mp4(video: Video, metadata: Mapping[str, str] | None = None) -> bytes:
    width, height = video.size
    buf = io.BytesIO()
    sound = video.audio is not None
    out, stream, av = open_h264(buf, video.fps, width, height, metadata=metadata, sound=sound)
    with out:
        sound = (
            None
            if video.audio is None
            else add_aac(out, video.audio.sample_rate, video.audio.channels)
        )
        for index, frame in enumerate(even_frames(video.frames)):
            image = av.VideoFrame.from_ndarray(frame, format="rgb24")
            image.pts = index  # in frames (the stream's time base is 1/fps)
            for packet in stream.encode(image):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
        if sound is not None and video.audio is not None:
            for packet in encode_samples(sound, video.audio.samples, video.audio.sample_rate, 0):
                out.mux(packet)
            for packet in sound.encode():
                out.mux(packet)
    return buf.getvalue()


def add_aac(out: Any, sample_rate: int, channels: int) -> Any:
    """An AAC track on the container `out`, before its first packet."""
    stream = out.add_stream("aac", rate=sample_rate)
    stream.layout = "mono" if channels == 1 else "stereo"
    return stream


def encode_samples(stream: Any, samples: Samples, sample_rate: int, first: int) -> list[Any]:
    """The packets of `samples` (channels, n), whose first sample is sample `first` of the
    track, in frames of the encoder's size (AAC's 1024)."""
    av = cast(Any, importlib.import_module(VIDEO_MODULE))
    planar = np.ascontiguousarray(np.clip(samples, -1.0, 1.0), dtype=np.float32)
    if planar.shape[0] > 2:
        raise RunFailed(f"a soundtrack of {planar.shape[0]} channels: MP4 takes carry 1 or 2")
    packets: list[Any] = []
    size = int(stream.codec_context.frame_size or 1024)
    for start in range(0, planar.shape[1], size):
        frame = av.AudioFrame.from_ndarray(
            planar[:, start : start + size],
            format="fltp",
            layout="mono" if planar.shape[0] == 1 else "stereo",
        )
        frame.sample_rate = sample_rate
        frame.pts = first + start
        packets.extend(stream.encode(frame))
    return packets


def even_frames(frames: Frames) -> Iterator[Frames]:
    """Each frame with even sides: yuv420p halves the chroma planes, so an odd side is padded by
    one edge row or column (a frame at a time, never a copy of the whole video)."""
    height, width = frames.shape[1], frames.shape[2]
    pad = ((0, height % 2), (0, width % 2), (0, 0))
    for frame in frames:
        yield np.pad(frame, pad, mode="edge") if height % 2 or width % 2 else frame


def open_h264(
    file: object,
    fps: int,
    width: int,
    height: int,
    *,
    live: bool = False,
    metadata: Mapping[str, str] | None = None,
    sound: bool = False,
) -> tuple[Any, Any, Any]:
    """An H.264 (yuv420p, sides rounded up to even) fragmented MP4 written to `file`: the
    container, its video stream and the `av` module. `live`: each frame's packet out at once
    (x264's zerolatency: no lookahead, no B-frames) and a fragment per frame, for a stream read
    while it is written. `metadata`: tags of any name, in the header. `sound`: a soundtrack
    will be added (`add_aac`); a live stream with one is cut into fragments by time (a fragment
    per packet), since a cut at every video frame mistimes the frames around the sound's."""
    if not video_available():
        raise RunFailed(f"MP4 takes need PyAV: {VIDEO_HINT}")
    av = cast(Any, importlib.import_module(VIDEO_MODULE))
    options: dict[str, str] = {}
    movflags = "frag_keyframe+empty_moov"
    if live and sound:
        movflags = "empty_moov+default_base_moof"
        options["frag_duration"] = "1"  # microseconds: every packet ends a fragment
        # and out at once: no holding a track's packets back to interleave them by time
        options["max_interleave_delta"] = "1"
    elif live:
        movflags += "+default_base_moof+frag_every_frame"
    if metadata:
        movflags += "+use_metadata_tags"  # names beyond the few MP4 knows (`inline:params`)
    out = av.open(file, "w", format="mp4", options={"movflags": movflags, **options})
    out.metadata.update(metadata or {})
    codec: dict[str, str] = {"tune": "zerolatency"} if live else {}
    asm = take_x264_asm()
    if asm is not None:  # without AVX-512: the same frames, the same bytes (x264_asm.py)
        codec["x264-params"] = f"asm={asm}"
    stream = out.add_stream("libx264", rate=fps, options=codec)
    stream.width, stream.height = width + width % 2, height + height % 2
    stream.pix_fmt = "yuv420p"
    return out, stream, av


def decode_apng(data: bytes) -> Frames:
    """The frames of an animated PNG (the tests' exact comparisons)."""
    image = Image.open(io.BytesIO(data))
    frames: list[Frames] = []
    for index in range(getattr(image, "n_frames", 1)):
        image.seek(index)
        frames.append(np.asarray(image.convert("RGB"), dtype=np.uint8))
    return np.stack(frames)
