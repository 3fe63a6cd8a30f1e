"""A family's recipe names its sigmas classes' readers (`ComfyRecipe.sigma_sources`): what it
names is imported and checked, so a broken recipe is an error naming the family."""

from __future__ import annotations

import pytest

from inline_core.contract.comfy_recipe import ComfyRecipe
from inline_core.importer.custom_sampling import CORE_SIGMAS
from inline_core.importer.recipes import RecipeError, Recipes, recipe_sigma_sources


def test_a_recipes_sigma_sources_are_read_beside_the_cores() -> None:
    flux2 = ComfyRecipe(sigma_sources="inline_core.families.flux2.comfy_sigmas:SIGMA_SOURCES")
    found = Recipes({"flux-2": flux2, "other": ComfyRecipe()}).sigma_sources()
    assert list(found) == ["Flux2Scheduler"] and callable(found["Flux2Scheduler"])
    assert not found.keys() & CORE_SIGMAS.keys()


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("inline_core.importer.custom_sampling:KARRAS_RHO", "is not a mapping"),
        ("inline_core.importer.values:COMFY_KINDS", "not a ComfyUI class onto a callable"),
        ("inline_core.importer.no_such_module:SOURCES", "names"),
    ],
)
def test_a_broken_sigma_sources_names_the_family(path: str, says: str) -> None:
    with pytest.raises(RecipeError, match=f"family 'fam'.*{says}"):
        recipe_sigma_sources("fam", ComfyRecipe(sigma_sources=path))
