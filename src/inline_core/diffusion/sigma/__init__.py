"""The family-independent sampler library, on the noise level sigma as k-diffusion and ComfyUI
work (what runs, under ComfyUI's names: `graph/sampler_names`): `sampling` (a model's sigma table
and prediction type), `prediction` (a model output as the clean latent it points at),
`schedules`, `noise` (each row's own seeded draws), `algorithms/` (the samplers: a new sampler
goes there) and `stepper` (one request's sampler, one model call at a time)."""
