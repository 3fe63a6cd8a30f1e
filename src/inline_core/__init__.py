"""Inline Core: a headless render server for typed diffusion node graphs."""

__version__ = "0.1.0"
