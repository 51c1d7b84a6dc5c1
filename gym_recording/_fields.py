"""Walking decoded fields: arrays (steps first), dicts and tuples of fields, or per-step lists."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = ["as_array", "leaves", "slice_field"]


def as_array(values: Any) -> np.ndarray:
    """One leaf's per-step values as an array (a list of objects becomes an object array)."""
    if isinstance(values, np.ndarray):
        return values
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out


def leaves(f: Any, name: str) -> Iterator[tuple[str, Any]]:
    """The leaves (arrays or lists, steps first) of field ``f``, named ``name.key``/``name.0``."""
    if isinstance(f, dict):
        for k, v in f.items():
            yield from leaves(v, f"{name}.{k}")
    elif isinstance(f, tuple):
        for i, v in enumerate(f):
            yield from leaves(v, f"{name}.{i}")
    else:
        yield name, f


def slice_field(f: Any, start: int, stop: int | None) -> Any:
    """Steps ``start:stop`` of field ``f``, keeping its dict/tuple structure."""
    if isinstance(f, dict):
        return {k: slice_field(v, start, stop) for k, v in f.items()}
    if isinstance(f, tuple):
        return tuple(slice_field(v, start, stop) for v in f)
    return f[start:stop]
