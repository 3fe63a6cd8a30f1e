"""ComfyUI's API beside `/v1`, on the same durable runs, and ComfyUI's own web frontend (the `ui`
extra's `comfyui-frontend-package`) as the server's web UI: `routes.py` serves them (`install`),
`paths.py` says which paths are the API (the access gates import it, so this stays import-free)."""
