"""The Wan VAE (`AutoencoderKLWan`) as a VAE component, decoding whole or in temporal chunks.

Latents are normalised per channel by the VAE's `latents_mean` / `latents_std`. The decoder is
causal with a feature cache: it decodes one latent frame at a time (the first gives one video
frame, each later one four), so `decode_chunks` yields each latent frame's frames as soon as they
are decoded, and their concatenation is exactly `decode` (the same calls in the same order;
diffusers' clamp is elementwise, and Wan 2.2's 2x2 unpatchify works frame by frame). Frames are
floats in `chunk_value_range`, (-1, 1) (`components.step.SupportsChunkedVAEDecode`). `encode`
gives an image's normalised latents, as `WanImageToVideoPipeline` takes them (the posterior's
mode).

A `DecodeSession` decodes one video in pieces, its latent frames in order, keeping the decoder's
causal cache between pieces (a chunked render decodes each chunk as it is done): the pieces'
frames are the whole decode's. The decoder's cache lives on the module, so every decode of one
module holds its lock (`decoding`) for each piece, whichever wrapper and thread runs it.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from typing import Any, cast

import torch
from torch import nn

from inline_core.components.interfaces import Latents
from inline_core.diffusion.placement import OffloadSwap, PlacementLike

_locks: weakref.WeakKeyDictionary[nn.Module, threading.RLock] = weakref.WeakKeyDictionary()
_locks_lock = threading.Lock()


def decoding(autoencoder: nn.Module) -> threading.RLock:
    """The lock of one autoencoder's decoder cache."""
    with _locks_lock:
        lock = _locks.get(autoencoder)
        if lock is None:
            lock = _locks[autoencoder] = threading.RLock()
        return lock


def unpatchify(x: torch.Tensor, patch_size: int) -> torch.Tensor:
    """diffusers' Wan 2.2 unpatchify (`autoencoder_kl_wan.unpatchify`)."""
    from diffusers.models.autoencoders import autoencoder_kl_wan

    return cast(torch.Tensor, cast(Any, autoencoder_kl_wan).unpatchify(x, patch_size=patch_size))


class WanVAE:
    chunk_value_range: tuple[float, float] = (-1.0, 1.0)

    def __init__(self, autoencoder: nn.Module, placement: PlacementLike, swap: OffloadSwap) -> None:
        self.autoencoder = autoencoder
        self.placement = placement
        self.swap = swap
        self.device = torch.device(placement.device)
        config = cast(Any, autoencoder).config
        self.latent_channels = int(config.z_dim)
        self.spatial_factor = int(config.scale_factor_spatial or 8)
        self.temporal_factor = int(config.scale_factor_temporal or 4)
        self.patch_size: int | None = config.patch_size  # Wan 2.2: pixels patchified 2x2
        self._mean = torch.tensor(config.latents_mean).view(1, -1, 1, 1, 1)
        self._std = torch.tensor(config.latents_std).view(1, -1, 1, 1, 1)

    @property
    def dtype(self) -> torch.dtype:
        return next(self.autoencoder.parameters()).dtype

    def denormalised(self, latents: Latents) -> torch.Tensor:
        x = cast(torch.Tensor, latents.value).to(self.device, self.dtype)
        mean = self._mean.to(x.device, x.dtype)
        inverse_std = 1.0 / self._std.to(x.device, x.dtype)  # as WanPipeline computes it
        return x / inverse_std + mean

    def encode(self, pixels: torch.Tensor, /) -> torch.Tensor:
        """(B, 3, frames, H, W) pixels in (-1, 1) -> normalised latents (the posterior's mode)."""
        vae = cast(Any, self.autoencoder)
        with decoding(self.autoencoder), self.swap.use(self.autoencoder, self.placement):
            x = pixels.to(self.device, self.dtype)
            with torch.inference_mode():  # its encoder's cache is cleared with the decoder's
                raw = cast(torch.Tensor, vae.encode(x).latent_dist.mode()).float()
        mean = self._mean.to(raw.device, raw.dtype)
        inverse_std = 1.0 / self._std.to(raw.device, raw.dtype)
        return (raw - mean) * inverse_std

    def decode(self, latents: Latents, /) -> torch.Tensor:
        """(B, 3, frames, H, W) floats in (-1, 1)."""
        return torch.cat(list(self.decode_chunks(latents)), dim=2)

    def decode_chunks(self, latents: Latents, /) -> Iterator[torch.Tensor]:
        """Each latent frame's video frames, (B, 3, 1 or 4, H, W) in (-1, 1), as they decode;
        the decoder's cache is cleared however the iteration ends."""
        return DecodeSession(self).decode(latents)


class DecodeSession:
    """One video decoded in pieces (each piece its next latent frames, in order), the decoder's
    causal cache kept between them."""

    def __init__(self, vae: WanVAE) -> None:
        self.vae = vae
        self.decoded = 0  # latent frames decoded so far
        self._cache: list[Any] | None = None

    def decode(self, latents: Latents, /) -> Iterator[torch.Tensor]:
        """Each latent frame's video frames, (B, 3, 1 or 4, H, W) in (-1, 1), as they decode."""
        owner = self.vae
        vae = cast(Any, owner.autoencoder)
        z = owner.denormalised(latents)
        with decoding(owner.autoencoder), owner.swap.use(owner.autoencoder, owner.placement):
            with torch.inference_mode():
                x = vae.post_quant_conv(z)
        for i in range(x.shape[2]):
            yield self._piece(x[:, :, i : i + 1])

    def _piece(self, x: torch.Tensor) -> torch.Tensor:
        """The next latent frame's video frames. The decoder's lock (and the swap's) is taken per
        piece, never held across a `yield`: a thread's lock cannot be released by the thread that
        closes an abandoned generator, and a suspended session would block every other decode.
        The session's causal cache is put back in the decoder for each piece and taken out after
        it, so another video may decode between two pieces. Inference mode, a thread's state,
        is likewise entered per piece."""
        owner = self.vae
        vae = cast(Any, owner.autoencoder)
        with decoding(owner.autoencoder), owner.swap.use(owner.autoencoder, owner.placement):
            try:
                with torch.inference_mode():
                    vae.clear_cache()
                    if self._cache is not None:
                        vae._feat_map = list(self._cache)
                    vae._conv_idx = [0]
                    out = vae.decoder(
                        x,
                        feat_cache=vae._feat_map,
                        feat_idx=vae._conv_idx,
                        first_chunk=self.decoded == 0,
                    )
                    self.decoded += 1
                    self._cache = list(vae._feat_map)
                    if owner.patch_size is not None:
                        out = unpatchify(out, patch_size=owner.patch_size)
                    return torch.clamp(out, min=-1.0, max=1.0)
            finally:
                vae.clear_cache()
