"""The seam between the graph and the accelerator: `SampleJob` -> `BatchedSampler`. Torch-free."""
