"""Textual-inversion embeddings named in a prompt (`embedding:name`, ComfyUI's syntax), found in
`models/embeddings/` (torch-free: runs at submit).

A name is looked up as written, then with `.safetensors` (ComfyUI's order); a missing one is a
422 `model_missing` naming it and where it goes, and a pickled one (`.pt`, `.bin`) a 422 saying
to convert it. The files' vectors are read where the request renders (`EmbeddingFile`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from inline_core.errors import InvalidRequest, ModelMissing, NotFound
from inline_core.models.catalog import Catalog

CATEGORY = "embeddings"
# ComfyUI's `embedding:` word; the name ends at whitespace or prompt punctuation.
EMBEDDING_WORD = re.compile(r"embedding:([^\s,()\[\]:]+)")
SUFFIXES = ("", ".safetensors")
PICKLED = (".pt", ".bin", ".ckpt", ".pth")


@dataclass(frozen=True)
class EmbeddingFile:
    """One embedding a prompt names: its name as written, its file and identity."""

    name: str
    path: str
    identity: str


def named_embeddings(texts: Iterable[str]) -> list[str]:
    """The embedding names the prompts use, in first-use order."""
    found: dict[str, None] = {}
    for text in texts:
        for match in EMBEDDING_WORD.finditer(text):
            found[match[1]] = None
    return list(found)


def find_embeddings(
    catalog: Catalog, texts: Iterable[str], node_id: str | None = None
) -> tuple[EmbeddingFile, ...]:
    """Each embedding the prompts name, found in `embeddings/` (refused naming it otherwise)."""
    return tuple(_find(catalog, name, node_id) for name in named_embeddings(texts))


def _find(catalog: Catalog, name: str, node_id: str | None) -> EmbeddingFile:
    for suffix in SUFFIXES:
        try:
            entry = catalog.entry(CATEGORY, name + suffix)
        except NotFound:
            continue
        if entry.is_folder:
            break
        if entry.path.suffix.lower() in PICKLED:
            raise InvalidRequest(
                f"embeddings/{entry.name} is a pickled file; only .safetensors embeddings are "
                "read (convert it, e.g. with safetensors' torch save_file)",
                node_id=node_id,
            )
        return EmbeddingFile(name, str(entry.path), entry.identity)
    listed = ", ".join(repr(n) for n in catalog.options(CATEGORY)[:8]) or "nothing"
    raise ModelMissing(
        f"the prompt names embedding:{name}, which is not in {catalog.root / CATEGORY} (it holds "
        f"{listed}): put {name}.safetensors there",
        node_id=node_id,
    )
