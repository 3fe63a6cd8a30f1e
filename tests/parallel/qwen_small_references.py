"""A rank loader for the Qwen-Image split tests: the standard one, with the edit references
encoded at small areas in the rank (64x64 pixels' for the VAE, 56x56's for the vision tower)
instead of a megapixel, as `qwen_harness.small_references` has them in the test's own process.
An edit with three references then costs the split tests seconds, not minutes; the pipeline's
code is the one the server runs, only the two area constants differ.
"""

from __future__ import annotations

from typing import Any

from inline_core.engine.group import LOADER
from inline_core.parallel.runner import resolve

SMALL_REFERENCE = 64 * 64
SMALL_CONDITION = 56 * 56
RANK_LOADER = "qwen_small_references:load"  # as the ranks import it (this folder on their path)


def load(**args: Any) -> Any:
    from inline_core.families.qwen_image import request

    request.REFERENCE_AREA = SMALL_REFERENCE
    request.CONDITION_AREA = SMALL_CONDITION
    return resolve(LOADER)(**args)
