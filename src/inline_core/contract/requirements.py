"""What a family's high-level node needs, piece by piece (torch-free; behind
`GET /v1/models/{type}/requirements`).

Each piece is a part of the stack as the family's rules name it (the diffusion model, each part
rule's component, the tokenizer): the catalog folder it is looked for in, the names the family's
download targets land as, whether the resolver found it (and which file), where to put it, and the
targets that provide it. Nothing here reaches the network: the hub's sizes are the server's to add.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from inline_core.contract.family import Family
from inline_core.contract.files import TOKENIZER, TRANSFORMER
from inline_core.downloads.targets import Target
from inline_core.models.source import Source

DIFFUSION_MODEL = "diffusion_model"


@dataclass(frozen=True)
class Satisfied:
    """The files that satisfy a piece: a catalog entry's (or an override's, or a package's)."""

    path: Path
    subfolder: str | None
    category: str | None  # None: outside the models root (an override, a packaged tokenizer)
    name: str | None  # its catalog name
    bytes: int


@dataclass(frozen=True)
class Piece:
    role: str  # "diffusion_model", "vae", "text_encoder", "tokenizer"
    label: str  # how messages name it: "diffusion model", "text encoder"
    category: str | None  # the catalog folder it is looked for in (None: found beside another)
    expected: tuple[str, ...]  # where its download targets land: "vae/ae.safetensors"
    satisfied: Satisfied | None
    hint: str | None  # where to put it, when it is missing
    sources: tuple[tuple[str, Target], ...]

    @property
    def present(self) -> bool:
        return self.satisfied is not None


def node_requirements(family: Family, node_type: str) -> list[Piece]:
    """Each piece the node's default render needs (its model param unset)."""
    rules = family.rules()
    found = family.files.found(family.model_param(node_type, {}))
    hints = {m.component: m.hint for m in found.missing}
    table = family.downloads()
    root = family.catalog.root
    roles: list[tuple[str, str, str, str | None, str | None]] = [
        (DIFFUSION_MODEL, TRANSFORMER, "diffusion model", "diffusion_models", None)
    ]
    roles += [(r.part, r.part, r.label, r.category, r.hint) for r in rules.parts]
    if rules.tokenizer is not None:
        roles.append((TOKENIZER, TOKENIZER, "tokenizer", None, rules.tokenizer.hint))
    pieces: list[Piece] = []
    for role, part, label, category, fallback_hint in roles:
        sources = tuple(table.providing(role)) if table is not None else ()
        source = found.parts.get(part)
        hint = None if source is not None else hints.get(label, fallback_hint)
        pieces.append(
            Piece(
                role=role,
                label=label,
                category=category,
                expected=tuple(f"{t.category}/{t.destination(root).name}" for _, t in sources),
                satisfied=None if source is None else _satisfied(source, root),
                hint=None if hint is None else hint.format(root=root),
                sources=sources,
            )
        )
    return pieces


def _satisfied(source: Source, root: Path) -> Satisfied:
    category = name = None
    try:
        relative = source.path.resolve().relative_to(root.resolve())
    except ValueError:
        relative = None
    if relative is not None and len(relative.parts) >= 2:
        category, name = relative.parts[0], "/".join(relative.parts[1:])
    return Satisfied(source.path, source.subfolder, category, name, _size(source.location))


def _size(location: Path) -> int:
    try:
        if location.is_file():
            return location.stat().st_size
        total = 0
        for folder, _dirs, files in os.walk(location):
            for file in files:
                total += os.stat(os.path.join(folder, file)).st_size
        return total
    except OSError:
        return 0
