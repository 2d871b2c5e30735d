"""Whether the C extension `framework.windows._accel` is used: it is optional (not built
without a C compiler) and ``SAMPAN_WINDOWS_ACCEL=0`` turns it off. Below `accel` (the
reducers' C calls) and `state` (the due index's C loops), which both ask here."""

from __future__ import annotations

import os
from types import ModuleType

__all__ = ["ENV", "native"]

ENV = "SAMPAN_WINDOWS_ACCEL"
"""Set to ``0`` to run every reducer and the due index in Python (e.g. to compare)."""


def _load() -> ModuleType | None:
    try:
        from framework.windows import _accel
    except ImportError:
        return None
    return _accel


_module = _load()


def native() -> ModuleType | None:
    """The extension module, or None: not built, or turned off by `ENV`."""
    return None if os.environ.get(ENV) == "0" else _module
