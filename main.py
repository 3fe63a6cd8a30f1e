"""Development entry point: `python main.py [flags]` starts the server with the same flags as
`webui.sh` and the `inline-core` command (see `python main.py --help`)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "src"))

from inline_core.cli import main  # noqa: E402  (needs the src path above)

if __name__ == "__main__":
    raise SystemExit(main())
