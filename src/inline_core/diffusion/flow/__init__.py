"""Flow-matching samplers and schedules: a new sampler goes in `samplers.py` (torch, except
`steps.py`)."""
