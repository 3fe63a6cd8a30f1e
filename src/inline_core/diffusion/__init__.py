"""The diffusers layer every family shares: file formats and config inference (torch-free), and,
importing torch, loading, placement, encoders, VAEs, the sampler library on sigma, the primitives'
ops, resident stacks, the kit's machinery and the rank-side rebuild. A new sampler goes in
`sigma/algorithms/`, a new shared component format in `formats/`."""

from inline_core.diffusion.hush import hush

hush()  # before any of them is imported
