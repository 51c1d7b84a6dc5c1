"""The one seam to the optional C extension, ``gym_recording._speedups``.

The extension is built at install when a C compiler is present. It holds three accelerated
pieces, each a drop-in for Python code that stays the reference:

- ``StepRecorder``: the recorded step (see :mod:`gym_recording.record.steps`);
- ``start_write``: a batch's files written as a group on a thread that never takes the GIL
  (see :class:`gym_recording.storage.local.LocalStorage`);
- ``views``: a list of array references checked and viewed (see
  :meth:`gym_recording.format.arrays.BatchBlob.arrays_of`).

Only this module imports the extension; :data:`speedups` is it, or ``None`` without it or
with the environment variable ``GYM_RECORDING_PURE_PYTHON`` set (read at import).
``benchmarks/bench.py --ablate`` measures what each piece buys, and ``tests/test_accelerated.py``
runs both paths over the same files.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

__all__ = ["speedups"]

speedups: Any
try:  # (by name: the extension imports nothing of gym-recording)
    speedups = importlib.import_module("gym_recording._speedups")
except ImportError:  # pragma: no cover - an install without a C compiler
    speedups = None
if os.environ.get("GYM_RECORDING_PURE_PYTHON"):
    speedups = None
