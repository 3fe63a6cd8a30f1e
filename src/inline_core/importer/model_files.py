"""Map a model file name from a ComfyUI workflow onto the catalog's listing of one category."""

from __future__ import annotations

from dataclasses import dataclass

from inline_core.graph.runner import CatalogView


@dataclass(frozen=True)
class FileMatch:
    name: str  # the name to put in the graph
    note: str | None  # what was changed and why, for the warnings; None for an exact match
    found: bool  # the workflow's own file is there (under this name)


def _basename(name: str) -> str:
    return name.rsplit("/", 1)[-1]


def match_model_file(catalog: CatalogView, category: str, wanted: str) -> FileMatch:
    """Exact name, then the same path with `/`, then the same file name anywhere in the category;
    failing those, the name as written: never another file (validation then refuses the graph
    with `model_missing`, and the caller may map the name with the import's `models`)."""
    listed = catalog.options(category)
    if wanted in listed:
        return FileMatch(wanted, None, True)
    # Windows ComfyUI installs write sub-folder paths with backslashes.
    normal = wanted.replace("\\", "/").strip("/")
    if normal in listed:
        return FileMatch(normal, None, True)
    for fold in (False, True):
        base = _basename(normal).lower() if fold else _basename(normal)
        same = [n for n in listed if (_basename(n).lower() if fold else _basename(n)) == base]
        if same:
            note = f"model {wanted!r} was found in {category}/ as {same[0]!r}"
            if len(same) > 1:
                note += f" (also named so: {', '.join(repr(n) for n in same[1:])})"
            return FileMatch(same[0], note, True)
    if not listed:
        return FileMatch(wanted, f"model {wanted!r} is not installed: {category}/ is empty", False)
    shown = ", ".join(repr(n) for n in listed)
    return FileMatch(
        wanted,
        f"model {wanted!r} is not in {category}/ (it holds {shown}); map it onto one there with "
        "the import's models",
        False,
    )
