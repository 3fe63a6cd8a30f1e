"""ComfyUI workflow import: every piece of ComfyUI format knowledge lives in this package."""

from inline_core.importer.comfy import ImportResult, Skipped, import_comfy, import_request

__all__ = ["ImportResult", "Skipped", "import_comfy", "import_request"]
