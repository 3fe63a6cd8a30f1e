"""Live videos whose decodes are held after a given number of chunks until the test releases
them: the decode is in progress (the run running, no take) for as long as a test wants, whatever
the machine's load. Only the producer is slowed; the decode, the route and the stream's encoder
are the real ones."""

from __future__ import annotations

import threading

from inline_core.runtime.video import Frames
from inline_core.runtime.video_stream import LiveVideo, LiveVideos

HOLD_LIMIT_S = 120.0  # a held decode goes on by itself after this (no test may hang a run)


class HeldVideo(LiveVideo):
    def __init__(self, fps: int, hold_after: int, release: threading.Event) -> None:
        super().__init__(fps)
        self.hold_after = hold_after
        self.release = release
        self.added = 0
        self.held = threading.Event()  # set once the decode waits

    def add(self, frames: Frames) -> None:
        super().add(frames)
        self.added += 1
        if self.added == self.hold_after:
            self.held.set()
            self.release.wait(HOLD_LIMIT_S)


def held_videos(hold_after: int) -> tuple[LiveVideos, threading.Event, list[HeldVideo]]:
    """A board whose videos hold their decode after `hold_after` chunks; the event releases
    them; the list gets each video as it opens."""
    release = threading.Event()
    opened: list[HeldVideo] = []

    def video(fps: int) -> LiveVideo:
        opened.append(HeldVideo(fps, hold_after, release))
        return opened[-1]

    return LiveVideos(video), release, opened
