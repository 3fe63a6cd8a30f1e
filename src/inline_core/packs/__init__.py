"""Node packs: third-party nodes run out of process, each pack in its own environment.

manifest (the pack's pyproject.toml), wire (its declarations -> NodeDescriptor), environment +
index_options + sdk_wheel (building its venv), sources + install (`packs install`), store (the
packs folder), loaded (an installed pack checked), process (one worker, watched), media_io
(values by reference), host (the server's packs and their nodes), cli (`inline-core packs`).
"""
