"""The optional C extension, ``gym_recording._speedups``, or ``None``.

It is built at install when a C compiler is at hand. Without it, or with the environment
variable ``GYM_RECORDING_PURE_PYTHON`` set (to compare or test both paths), every module that
uses it runs the same code in Python and writes and reads the same files.
"""

from __future__ import annotations

import os
from types import ModuleType

__all__ = ["speedups"]

speedups: ModuleType | None
try:
    from gym_recording import _speedups as speedups
except ImportError:  # pragma: no cover - a build without a C compiler
    speedups = None
if os.environ.get("GYM_RECORDING_PURE_PYTHON"):
    speedups = None
