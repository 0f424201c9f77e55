"""Load a script of the repository (``benchmark/``, ``examples/``) as a module, by its path."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).parents[1]


def load_script(relative: str) -> ModuleType:
    """The script at ``relative`` (to the repository root), executed as a fresh module with
    its folder first on ``sys.path`` while it loads, as ``python SCRIPT`` runs it (so it finds
    the helpers beside it, e.g. ``benchmark/_labelled.py``)."""
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(path.parent))
    return mod
