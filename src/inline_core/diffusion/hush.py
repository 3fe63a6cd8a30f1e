"""Warnings the libraries print on import that are not the user's concern, silenced.

torchao (pulled in by diffusers' quantizers) warns that it cannot load its CUDA kernels on a CPU
or an older GPU, torch warns about torchao's enums, and diffusers that it cannot import torchao's
tensor types: on every `kit` run and model load, they read as breakage. Only their level is
raised: errors still print. Torch-free (logging only), so it can run before anything imports.
"""

from __future__ import annotations

import logging

QUIET = (
    "torchao",
    "torch.utils._pytree",
    "diffusers.quantizers.torchao.torchao_quantizer",
)


def hush() -> None:
    for name in QUIET:
        logging.getLogger(name).setLevel(logging.ERROR)
