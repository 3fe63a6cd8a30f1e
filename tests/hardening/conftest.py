from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Helpers import as `tests.server.server_support` (so pyright resolves them from the project root);
# the test plugins load by module name (`server_nodes`, `hardening_nodes`) as the server does.
for folder in (HERE.parents[1], HERE, HERE.parent / "server"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
