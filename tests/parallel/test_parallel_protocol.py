"""Wire format and IPC: raw arrays, authenticated local socket, nothing secret on argv."""

from __future__ import annotations

import json
import os
import stat
import struct
import threading
from multiprocessing import AuthenticationError
from pathlib import Path
from typing import cast

import numpy as np
import pytest

from inline_core.parallel.ipc import Channel, IpcServer, connect
from inline_core.parallel.launch import LaunchPlan, summarize_failure
from inline_core.parallel.protocol import (
    Failure,
    Heartbeat,
    Hold,
    Job,
    Json,
    ProtocolError,
    Result,
    Shutdown,
    decode,
    encode,
)
from inline_core.parallel.remote import decode_output, encode_output


def test_arrays_travel_as_raw_bytes_with_dtype_and_shape() -> None:
    latents = np.random.default_rng(0).standard_normal((1, 16, 8, 8)).astype(np.float32)
    pixels = np.arange(64 * 64 * 3, dtype=np.uint8).reshape(64, 64, 3)
    message = Result(
        job_id=3,
        rank=0,
        meta={"computeS": 0.25, "tokens": [16, 32], "nested": {"ok": True}},
        arrays={"latents": latents, "pixels": pixels, "mask": np.array([True, False])},
    )
    frame = encode(message)
    (size,) = struct.unpack_from("!I", frame)
    header = json.loads(frame[4 : 4 + size])
    # The header describes the arrays; their values are only in the raw blobs after it.
    described = header["fields"]["arrays"]["latents"]
    assert described == {"$array": 0, "dtype": "<f4", "shape": [1, 16, 8, 8]}
    assert size < 400
    assert len(frame) == 4 + size + latents.nbytes + pixels.nbytes + 2
    back = decode(frame)
    assert isinstance(back, Result)
    assert back.meta == message.meta
    assert back.arrays["latents"].dtype == np.float32
    assert np.array_equal(back.arrays["latents"], latents)
    assert np.array_equal(back.arrays["pixels"], pixels)
    assert back.arrays["mask"].tolist() == [True, False]


def test_every_message_round_trips() -> None:
    for message in (
        Job(1, {"prompt": "a cat", "steps": 4, "guidance": 0.0}, {"image": b"\x00\x01"}),
        Failure(2, 1, "run_failed", 500, "ValueError: boom"),
        Failure(2, 0, "run_failed", 500, "RuntimeError: reset", at=12.5, peers_down=[1]),
        Heartbeat(1),
        Hold(4, 30.0),
        Shutdown(),
    ):
        assert decode(encode(message)) == message


def test_a_corrupt_frame_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        decode(b"\x00\x00\x00\x05{bad}")
    with pytest.raises(TypeError):
        encode(Job(1, cast(dict[str, Json], {"x": object()})))


def test_outputs_come_back_as_the_same_type_and_pixels() -> None:
    from PIL import Image

    image = Image.fromarray(np.arange(8 * 6 * 3, dtype=np.uint8).reshape(6, 8, 3))
    meta, arrays = encode_output([image, np.ones((2, 2), np.float32)])
    frame = encode(Result(1, 0, meta={"output": meta}, arrays=arrays))
    back = decode(frame)
    assert isinstance(back, Result)
    rebuilt = decode_output(back.meta["output"], back.arrays)
    assert isinstance(rebuilt[0], Image.Image)
    assert rebuilt[0].mode == "RGB" and rebuilt[0].size == (8, 6)
    assert rebuilt[0].tobytes() == image.tobytes()
    assert rebuilt[1].tolist() == [[1.0, 1.0], [1.0, 1.0]]


def test_a_video_comes_back_with_its_frames_rate_and_format() -> None:
    from inline_core.runtime.video import Video

    frames = np.arange(5 * 4 * 6 * 3, dtype=np.uint8).reshape(5, 4, 6, 3)
    meta, arrays = encode_output(Video(frames, fps=16, format="png"))
    back = decode(encode(Result(1, 0, meta={"output": meta}, arrays=arrays)))
    assert isinstance(back, Result)
    rebuilt = decode_output(back.meta["output"], back.arrays)
    assert isinstance(rebuilt, Video)
    assert (rebuilt.fps, rebuilt.format, rebuilt.frames.dtype) == (16, "png", np.uint8)
    assert np.array_equal(rebuilt.frames, frames)
    rebuilt.frames[0, 0, 0, 0] = 255  # writable, as the in-process video's frames are


def test_socket_is_private_and_needs_the_key() -> None:
    server = IpcServer()
    try:
        assert stat.S_IMODE(os.stat(server.directory).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(server.address).st_mode) == 0o600
        env = server.env()
        assert env["INLINE_PARALLEL_AUTHKEY"] == server.authkey.hex()

        import threading

        accepted: list[object] = []

        def accept() -> None:
            try:
                accepted.append(server.accept(timeout=5.0))
            except AuthenticationError as exc:
                accepted.append(exc)

        thread = threading.Thread(target=accept)
        thread.start()
        with pytest.raises(AuthenticationError):
            connect(server.address, b"not the key")
        thread.join()
        assert isinstance(accepted[0], AuthenticationError)

        thread = threading.Thread(target=accept)
        thread.start()
        client = connect(server.address, server.authkey)
        thread.join()
        channel = accepted[1]
        assert isinstance(channel, Channel)
        client.send(Heartbeat(1))
        assert channel.recv(timeout=5.0) == Heartbeat(1)
        client.close()
    finally:
        server.close()
    assert not Path(server.directory).exists()


def test_launch_command_has_no_fixed_port_and_no_secrets(tmp_path: Path) -> None:
    secret = {"INLINE_PARALLEL_AUTHKEY": "ab" * 32}
    plan = LaunchPlan(nproc=2, env=secret, log_path=tmp_path / "log", rank_log_dir=tmp_path)
    command = plan.command()
    assert command[1:3] == ["-m", "torch.distributed.run"]
    assert command[command.index("--rdzv-endpoint") + 1] == "127.0.0.1:0"
    assert "--master-port" not in command
    assert not any("ab" * 32 in part for part in command)
    assert command[-2:] == ["--module", "inline_core.parallel.worker"]


def test_failure_summary_picks_the_exception_line() -> None:
    log = "Traceback (most recent call last):\n  File x\nModuleNotFoundError: No module named 'q'\n"
    assert summarize_failure(log + "[W] torchrun: exiting\n") == (
        "ModuleNotFoundError: No module named 'q'"
    )
    assert summarize_failure("") == "no output"


def test_a_channel_tells_unread_messages_without_taking_them() -> None:
    """What keeps a loaded server from calling a rank hung: the rank's heartbeats may sit unread
    while this process is starved, and the monitor asks the channel before it blames the rank."""
    from multiprocessing import Pipe

    ours, theirs = Pipe()
    channel, rank = Channel(ours), Channel(theirs)
    assert not channel.unread()
    rank.send(Heartbeat(1))
    rank.send(Heartbeat(1))
    assert channel.unread() and channel.unread()  # asking takes nothing
    assert channel.recv(timeout=5.0) == Heartbeat(1)
    assert channel.unread()
    assert channel.recv(timeout=5.0) == Heartbeat(1)
    assert not channel.unread()
    channel.close()
    assert not channel.unread()
    rank.close()


def test_a_channel_waits_for_bytes_without_taking_them() -> None:
    """The server's reader counts a heartbeat when its bytes arrive, before it reads them: so the
    monitor, which takes unread bytes as life, never finds them read and their beat uncounted."""
    from multiprocessing import Pipe

    ours, theirs = Pipe()
    channel, rank = Channel(ours), Channel(theirs)
    sender = threading.Timer(0.1, rank.send, args=(Heartbeat(1),))
    sender.start()
    channel.wait()
    assert channel.unread()  # it arrived and is still there
    assert channel.recv(timeout=5.0) == Heartbeat(1)
    sender.join()
    rank.close()
    channel.wait()  # a peer that closed ends the wait too
    with pytest.raises(EOFError):
        channel.recv(timeout=None)
    channel.close()
