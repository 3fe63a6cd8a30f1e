"""A flow family's schedule over the sigma library (`diffusion/sigma/`, where a new sampler
goes): its shift, its pipelines' own spacing, img2img and noise masks (torch, except
`steps.py`)."""
