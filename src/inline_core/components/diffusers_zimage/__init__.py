"""Z-Image components over diffusers/transformers building blocks (imports torch)."""
