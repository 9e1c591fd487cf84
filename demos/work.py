"""The demo's work area: every file the app serves is one it wrote here (or one the user uploaded).

No request parameter is ever a path on the server: outputs go to fresh sub-folders of one root, and Gradio
is allowed to serve that root and its own upload cache only.
"""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path


class WorkArea:
    """A root folder (a fresh temporary one by default) handing out unique sub-folders per request."""

    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root else Path(tempfile.mkdtemp(prefix="vidlab-demo-"))
        self.root.mkdir(parents=True, exist_ok=True)
        self.root = self.root.resolve()

    def new_dir(self, kind: str) -> Path:
        d = self.root / kind / uuid.uuid4().hex[:12]
        d.mkdir(parents=True, exist_ok=False)
        return d

    def contains(self, path: str | Path) -> bool:
        try:
            Path(path).resolve().relative_to(self.root)
        except ValueError:
            return False
        return True
