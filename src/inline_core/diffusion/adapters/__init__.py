"""Adapters on shared weights: LoRA stacks per request, applied per row of a batched forward."""
