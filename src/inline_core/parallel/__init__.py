"""The worker group: one image's denoise split across ranks launched by `torchrun`.

Server side (torch-free at import): `WorkerGroup` (launch, IPC, faults) and `ParallelSampler`
(the `BatchedSampler` seam). Worker side (imports torch): `worker` (the torchrun entry),
`step_runner` (a resident step pipeline driven collectively), `engines` (cache-dit / xDiT split).
"""
