"""SkyReels-V2 diffusion forcing, a family on the shared model layer (torch-free at import)."""

from inline_core.families.skyreels.family import SkyReelsFamily

__all__ = ["SkyReelsFamily"]
