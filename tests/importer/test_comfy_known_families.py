"""The node classes that tell a family we do not run apart (`importer/known_families.py`)."""

from __future__ import annotations

from inline_core.importer.known_families import known_by_class


def test_model_sampling_flux_tells_no_family_apart() -> None:
    # It sets any flow model's `mu`: Z-Image's, FLUX.2's and Krea 2's workflows import it too.
    assert known_by_class("ModelSamplingFlux") is None


def test_the_nodes_only_flux1_workflows_use_name_flux1() -> None:
    for class_type in ("FluxGuidance", "CLIPTextEncodeFlux", "FluxKontextImageScale"):
        family = known_by_class(class_type)
        assert family is not None and family.title == "FLUX.1", class_type
