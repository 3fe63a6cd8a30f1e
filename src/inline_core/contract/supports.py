"""A family's optional capabilities, as protocols (torch-free).

`Family` keeps what every family needs. What only some families do is a protocol here, which a
family implements by defining its methods (no base class to name, nothing to register), and the
shared code checks with the `supports_*` helpers before it asks, the way `components/step.py`
checks a pipeline's optional capabilities. A family without one is never asked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, TypeGuard, runtime_checkable

from inline_core.contract.comfy_recipe import ComfyRecipe


@runtime_checkable
class SupportsControl(Protocol):
    """A family that takes control models: `load/controlnet` picks its file, and the control
    reaches its `sample` requests."""

    def control_use(self, name: str, strength: float, node_id: str | None) -> object | None:
        """The family's record of `controlnet/<name>` at `strength` (what its requests take as
        `control`); None: the file is not one of its control models. Raise an `InlineError`
        for a file it cannot use, naming it and what was expected."""
        ...

    def check_control_inputs(self, name: str, wired: frozenset[str], node_id: str) -> None:
        """Refuse at submit the inputs wired into a `load/controlnet` of `controlnet/<name>`
        that the model cannot take (raise an `InlineError` naming the file and what to use
        instead)."""
        ...


@runtime_checkable
class SupportsControlInpaint(Protocol):
    """A family whose control models may inpaint: take an inpaint mask and an image to inpaint
    (`load/controlnet`'s `mask` and `inpaint_image`). The importer asks it too."""

    def control_inpaints(self, name: str) -> bool | None:
        """Whether `controlnet/<name>` takes them; None: the file is not one of its control
        models (or cannot be read)."""
        ...


@runtime_checkable
class ImportsComfy(Protocol):
    """A family whose ComfyUI workflows import onto its nodes by its own recipe
    (`contract/comfy_recipe.py`): its own node's chain, its ComfyUI classes' handlers."""

    def comfy_recipe(self) -> ComfyRecipe | None: ...


@runtime_checkable
class ChecksTexts(Protocol):
    """A family that refuses something in the texts wired into its node at submit (an
    `input/text`'s prompt). `Family.check` never sees them, so its result is kept across
    renders that change only a text or the seed; this is asked on every submit, kept nowhere."""

    def check_texts(self, node_type: str, texts: Mapping[str, Sequence[str]], node_id: str) -> None:
        """Refuse (raise an `InlineError`) a text the node cannot render; `texts`: input name ->
        the texts wired into it, in edge order."""
        ...


def checks_texts(family: object) -> ChecksTexts | None:
    """`family` as a family that checks the texts wired in (None: it checks none)."""
    return family if isinstance(family, ChecksTexts) else None


def supports_control(family: object) -> TypeGuard[SupportsControl]:
    return isinstance(family, SupportsControl)


def control_of(family: object) -> SupportsControl | None:
    """`family` as a family that takes control models (None: it takes none)."""
    return family if supports_control(family) else None


def supports_control_inpaint(family: object) -> TypeGuard[SupportsControlInpaint]:
    return isinstance(family, SupportsControlInpaint)


def imports_comfy(family: object) -> TypeGuard[ImportsComfy]:
    return isinstance(family, ImportsComfy)


def comfy_recipe_of(family: object) -> ComfyRecipe | None:
    """`family`'s ComfyUI recipe (None: it has none)."""
    return family.comfy_recipe() if imports_comfy(family) else None
