"""Regional compilation: each repeated block of a denoiser's transformer compiled with
`torch.compile` (dynamic shapes, a bounded number of graphs), as the device policy chooses
(`device/compile.py`). `blocks` finds the blocks of any family's transformer, `regional` compiles
them, `progress` is what health shows, `cache` keeps inductor's compiled code in the data folder.
"""
