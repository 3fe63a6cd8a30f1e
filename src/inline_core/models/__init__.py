"""The model catalog and one subpackage per model family (imported best-effort at start-up)."""
