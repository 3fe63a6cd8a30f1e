"""A Wan decode left suspended (its consumer raised between two pieces: a cancelled stream) holds
nothing another thread needs, and whichever thread finally closes it closes it cleanly: the
decoder's lock is never held across a `yield`."""

from __future__ import annotations

import threading
from collections.abc import Generator
from typing import Any, cast

import pytest
import torch

from inline_core.components.interfaces import Latents
from inline_core.device.policy import Placement
from inline_core.diffusion.placement import OffloadSwap
from inline_core.diffusion.vae.wan_vae import WanVAE

pytest.importorskip("diffusers")


def _tiny_vae() -> WanVAE:
    from diffusers import AutoencoderKLWan  # pyright: ignore[reportPrivateImportUsage]

    torch.manual_seed(0)  # pyright: ignore[reportUnknownMemberType]
    autoencoder: Any = AutoencoderKLWan(  # diffusers' own test config
        base_dim=3, z_dim=16, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
        temperal_downsample=[False, True, True],
    )  # fmt: skip
    return WanVAE(autoencoder.eval(), Placement("cpu", "float32"), OffloadSwap())


def _latents(seed: int) -> Latents:
    value = torch.randn(1, 16, 3, 4, 4, generator=torch.Generator().manual_seed(seed))
    return Latents(value, tuple(value.shape))


def _in_thread(work: Any) -> list[Any]:
    """`work()`'s result or the exception it raised, run on another thread (a daemon: a
    deadlocked one is left behind, and the join's bound makes the test fail instead)."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(work())
        except BaseException as exc:  # handed back to the test
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive(), "the other thread is blocked on the suspended decode"
    return out


def test_another_thread_decodes_while_a_decode_is_suspended() -> None:
    vae = _tiny_vae()
    first, other = _latents(1), _latents(2)
    # The reference decoded on a thread of its own too: once a server has run in this process
    # (`diffusion/threads.py`), a new thread computes on one intra-op thread while this one keeps
    # its count, and another count may sum in another order.
    (alone,) = _in_thread(lambda: vae.decode(other))
    suspended = vae.decode_chunks(first)
    head = next(suspended)  # its consumer stops here (an `on_chunk` that raised, say)

    (decoded,) = _in_thread(lambda: vae.decode(other))
    assert isinstance(decoded, torch.Tensor)
    assert torch.equal(decoded, alone)

    # The suspended decode resumes with its own causal cache: the same as decoding it whole.
    rest = list(suspended)
    assert torch.equal(torch.cat([head, *rest], dim=2), vae.decode(first))


def test_a_suspended_decode_closes_cleanly_on_another_thread() -> None:
    vae = _tiny_vae()
    chunks = vae.decode_chunks(_latents(1))
    assert isinstance(chunks, Generator)  # a generator: `close` is what collecting it runs
    suspended = cast(Generator[torch.Tensor, None, None], chunks)
    next(suspended)
    close = suspended.close
    assert _in_thread(close) == [None]  # a GC or a future's thread, say
    assert vae.decode(_latents(2)).shape[2] == 9
