"""The one seam to the optional C extension, ``gym_recording._speedups``.

The extension is built at install when a C compiler is present. It holds three accelerated
pieces, each a drop-in for Python code that stays the reference:

- ``StepRecorder``: the recorded step (see :mod:`gym_recording.record.steps`);
- ``start_write``: a batch's files written as a group on a thread that never takes the GIL
  (see :class:`gym_recording.storage.local.LocalStorage`);
- ``views``: a list of array references checked and viewed (see
  :meth:`gym_recording.format.arrays.BatchBlob.arrays_of`).

Only this module imports the extension; :data:`speedups` is it, or ``None`` without it or
when the environment variable ``GYM_RECORDING_PURE_PYTHON`` is ``1``, ``true`` or ``yes`` (upper
or lower case; read at import): :data:`PURE_PYTHON_FORCED`. Any other value (``0``, ``false``,
empty) leaves the extension in use.
``benchmarks/bench.py --ablate`` measures what each piece buys, and ``tests/test_accelerated.py``
runs both paths over the same files.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

__all__ = ["PURE_PYTHON_FORCED", "speedups"]

_YES = ("1", "true", "yes")
#: Whether ``GYM_RECORDING_PURE_PYTHON`` asks for the pure-Python path (``1``/``true``/``yes``).
PURE_PYTHON_FORCED = os.environ.get("GYM_RECORDING_PURE_PYTHON", "").strip().lower() in _YES

speedups: Any
try:  # (by name: the extension imports nothing of gym-recording)
    speedups = importlib.import_module("gym_recording._speedups")
except ImportError:  # pragma: no cover - an install without a C compiler
    speedups = None
if PURE_PYTHON_FORCED:
    speedups = None
