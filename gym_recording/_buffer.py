"""Where a batch's observations and actions live until they are written: one store per leaf.

A *field* (the observations, or the actions) is a tree shaped like its first value: dicts and
tuples of leaves. Each leaf keeps the values of one leaf for every buffered step:

- small fixed-shape arrays: their bytes appended to one ``bytearray`` (``extend`` copies
  straight from the array's buffer: the cheapest copy CPython offers for a few dozen bytes);
- large fixed-shape arrays (images): rows of one preallocated array, so each byte is copied
  once on the way in and written straight from there (the array is handed to the writer and
  a fresh one takes its place);
- Python/numpy scalars: a list, stacked at flush;
- anything else: a snapshot per step, stored as JSON values.

Every store's ``put`` is a closure that returns ``False`` (storing nothing) when a value does not
fit the layout chosen from the first one; the field then falls back to per-step values, so the
recording stays exact whatever the env returns.
"""

from __future__ import annotations

import logging
import math
import sys
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from gym_recording import _format
from gym_recording._cext import speedups as _speedups

__all__ = ["BytesLeaf", "Field", "ScalarLeaf"]

logger = logging.getLogger(__name__)

#: Rows up to this many bytes are kept as ``bytes``; larger ones in a preallocated array.
SMALL_ROW_BYTES = 2048
_FIRST_ROWS = 32

Put = Callable[[Any], bool]


class BytesLeaf:
    """Small fixed-shape arrays: their bytes appended to one ``bytearray``, row after row.

    ``bytearray.extend`` copies an array's bytes straight from its buffer: no ``bytes``
    object per step, and no join at flush.
    """

    def __init__(self, dtype: np.dtype[Any], shape: tuple[int, ...]) -> None:
        self.dtype, self.shape = dtype, shape
        self.row = dtype.itemsize * math.prod(shape)  # > 0: empty arrays go to _ArrayLeaf
        self.buf = bytearray()
        ext = self.buf.extend  # the bytearray is never replaced: closures may keep this
        ndarray = np.ndarray

        def put(v: Any) -> bool:
            if type(v) is ndarray and v.shape == shape and (v.dtype is dtype or v.dtype == dtype):
                try:
                    ext(v)
                except (TypeError, BufferError, ValueError):  # not C-contiguous
                    ext(v.tobytes())
                return True
            return False

        self.put: Put = put

    def count(self) -> int:
        return len(self.buf) // self.row

    def take(self, start: int, stop: int) -> Any:
        # A copy (one memcpy): nothing keeps the bytearray exported, so it stays growable.
        arr = np.frombuffer(self.buf[start * self.row : stop * self.row], dtype=self.dtype)
        return arr.reshape(stop - start, *self.shape)

    def get(self, i: int) -> Any:
        row = self.buf[i * self.row : (i + 1) * self.row]
        return np.frombuffer(row, dtype=self.dtype).reshape(self.shape).copy()

    def release(self, keep_from: int) -> None:
        del self.buf[: keep_from * self.row]

    def row_bytes(self) -> int:
        return self.row


class _ArrayLeaf:
    """Large fixed-shape arrays: rows of one preallocated array, grown by doubling."""

    def __init__(self, dtype: np.dtype[Any], shape: tuple[int, ...]) -> None:
        self.dtype, self.shape = dtype, shape
        self.buf: np.ndarray = np.empty((_FIRST_ROWS, *shape), dtype=dtype)
        self.n = 0
        self._spare: np.ndarray | None = None  # the buffer handed to the last write
        ndarray = np.ndarray

        def put(v: Any) -> bool:
            if type(v) is ndarray and v.shape == shape and (v.dtype is dtype or v.dtype == dtype):
                n = self.n
                try:
                    self.buf[n] = v
                except IndexError:
                    self._grow()
                    self.buf[n] = v
                self.n = n + 1
                return True
            return False

        self.put: Put = put

    def _grow(self) -> None:
        new = np.empty((2 * len(self.buf), *self.shape), dtype=self.dtype)
        new[: self.n] = self.buf[: self.n]
        self.buf = new

    def count(self) -> int:
        return self.n

    def take(self, start: int, stop: int) -> Any:
        return self.buf[start:stop]

    def get(self, i: int) -> Any:
        return self.buf[i].copy()

    def release(self, keep_from: int) -> None:
        """Forget rows before ``keep_from``, which a background write may still be reading.

        The buffer is handed over to that write (arrays taken from it keep it alive) and
        another of the same size replaces it, holding the rows kept: the one handed over at
        the previous release, if nothing holds it any more (its write is done), else a fresh
        one. Reusing it spares the thread stepping the env a page fault for every 4 KiB of a
        fresh buffer (the allocator may hand back memory just returned to the OS): ~3 ms per
        6 MB batch of frames, measured on this project's VM.
        """
        k = self.n - keep_from
        new, self._spare = self._spare, None
        if new is None or new.shape != self.buf.shape or sys.getrefcount(new) > _SOLE_REFS:
            new = np.empty_like(self.buf)
        if k > 0:
            new[:k] = self.buf[keep_from : self.n]
        self._spare = self.buf
        self.buf, self.n = new, k

    def row_bytes(self) -> int:
        return self.dtype.itemsize * int(np.prod(self.shape, dtype=np.int64))


def _sole_refs() -> int:
    """What ``sys.getrefcount`` says of an array referenced by nothing but a local."""
    new = np.empty(1)
    return sys.getrefcount(new)


#: ``sys.getrefcount`` of a buffer nothing else references (no view, no write holds it).
_SOLE_REFS = _sole_refs()


def stack_numbers(values: list[Any], stop: int, kind: str) -> np.ndarray | None:
    """``values[:stop]`` as an int64 (``kind`` "q") or float64 ("d") array, stacked in C.

    ``None`` without the C extension, or if any value is not an exact int within int64
    ("q") or an exact float ("d"): then NumPy stacks them (to the same values, when it can).
    """
    if _speedups is None:
        return None
    packed = _speedups.pack_list(values, stop, kind)
    if packed is None:
        return None
    return np.frombuffer(packed, np.int64 if kind == "q" else np.float64)


class ScalarLeaf:
    """Python or numpy scalars (Discrete values, flags): a list, stacked at flush."""

    def __init__(self, pytype: type, dtype: np.dtype[Any]) -> None:
        self.pytype = pytype
        self.dtype = dtype
        self.values: list[Any] = []
        # Python ints as int64 and floats as float64 are stacked in C when the extension is
        # there (_speedups.pack_list); any other value, there or not, by NumPy.
        self._pack_kind = {(int, "int64"): "q", (float, "float64"): "d"}.get((pytype, dtype.name))
        app = self.values.append
        lo, hi = (
            (int(np.iinfo(dtype).min), int(np.iinfo(dtype).max)) if dtype.kind in "iu" else (0, 0)
        )

        def put(v: Any) -> bool:
            if type(v) is pytype:
                app(v)
                return True
            if isinstance(v, np.generic):
                ok = v.dtype == dtype
            elif type(v) is bool:
                ok = dtype.kind == "b"
            elif type(v) is int:
                ok = dtype.kind in "iu" and lo <= v <= hi
            elif type(v) is float:
                ok = dtype == np.float64
            else:
                ok = False
            if ok:
                app(v)
            return ok

        self.put: Put = put

    def count(self) -> int:
        return len(self.values)

    def take(self, start: int, stop: int) -> Any:
        if self._pack_kind is not None and start == 0:
            packed = stack_numbers(self.values, stop, self._pack_kind)
            if packed is not None:
                return packed
        vals = self.values[start:stop]
        try:
            return np.array(vals, dtype=self.dtype)
        except OverflowError:  # a Python int beyond 64 bits: keep it exact as JSON
            return _format.PerStep(vals)

    def get(self, i: int) -> Any:
        return self.values[i]

    def release(self, keep_from: int) -> None:
        del self.values[:keep_from]

    def row_bytes(self) -> int:
        return self.dtype.itemsize


class _ListLeaf:
    """Anything else (text, variable shapes, objects): a snapshot per step."""

    def __init__(self, values: list[Any] | None = None) -> None:
        self.values: list[Any] = values if values is not None else []
        app = self.values.append
        snapshot = _format.snapshot

        def put(v: Any) -> bool:
            app(snapshot(v))
            return True

        self.put: Put = put

    def count(self) -> int:
        return len(self.values)

    def take(self, start: int, stop: int) -> Any:
        return _format.PerStep(self.values[start:stop])

    def get(self, i: int) -> Any:
        return self.values[i]

    def release(self, keep_from: int) -> None:
        del self.values[:keep_from]

    def row_bytes(self) -> int:
        return 64


class _Branch:
    """What a Dict and a Tuple node share: children stored in step."""

    children: list[Any]

    def count(self) -> int:
        return min(c.count() for c in self.children)

    def release(self, keep_from: int) -> None:
        for c in self.children:
            c.release(keep_from)

    def row_bytes(self) -> int:
        return sum(c.row_bytes() for c in self.children)


class _DictNode(_Branch):
    """A Dict value: one child per key, in the first value's key order."""

    def __init__(self, keys: tuple[str, ...], children: list[Any]) -> None:
        self.keys, self.children = keys, children
        pairs = list(zip(keys, [c.put for c in children], strict=True))
        n = len(keys)

        def put(v: Any) -> bool:
            if not isinstance(v, Mapping) or len(v) != n:
                return False
            try:
                for k, p in pairs:
                    if not p(v[k]):
                        return False
            except KeyError:
                return False
            return True

        self.put: Put = put

    def take(self, start: int, stop: int) -> Any:
        pairs = zip(self.keys, self.children, strict=True)
        return _format.FieldDict((k, c.take(start, stop)) for k, c in pairs)

    def get(self, i: int) -> Any:
        return {k: c.get(i) for k, c in zip(self.keys, self.children, strict=True)}


class _TupleNode(_Branch):
    """A Tuple value: one child per position."""

    def __init__(self, children: list[Any]) -> None:
        self.children = children
        puts = [c.put for c in children]
        n = len(children)

        def put(v: Any) -> bool:
            if type(v) is not tuple or len(v) != n:
                return False
            for x, p in zip(v, puts, strict=True):  # noqa: SIM110 - a loop is faster
                if not p(x):
                    return False
            return True

        self.put: Put = put

    def take(self, start: int, stop: int) -> Any:
        return _format.FieldTuple(c.take(start, stop) for c in self.children)

    def get(self, i: int) -> Any:
        return tuple(c.get(i) for c in self.children)


_Node = BytesLeaf | _ArrayLeaf | ScalarLeaf | _ListLeaf | _DictNode | _TupleNode


def _infer(v: Any, depth: int = 0) -> _Node:
    """Choose how to store values shaped like ``v``."""
    if depth > 32:
        return _ListLeaf()
    if type(v) is np.ndarray:
        if not _format.blob_dtype_ok(v.dtype):
            return _ListLeaf()
        if 0 < v.dtype.itemsize * v.size <= SMALL_ROW_BYTES:
            return BytesLeaf(v.dtype, v.shape)
        return _ArrayLeaf(v.dtype, v.shape)
    if isinstance(v, np.generic):
        if _format.blob_dtype_ok(v.dtype):
            return ScalarLeaf(type(v), v.dtype)
        return _ListLeaf()
    if type(v) is bool:
        return ScalarLeaf(bool, np.dtype(np.bool_))
    if type(v) is int:
        return ScalarLeaf(int, np.dtype(np.int64)) if -(2**63) <= v < 2**63 else _ListLeaf()
    if type(v) is float:
        return ScalarLeaf(float, np.dtype(np.float64))
    if type(v) is tuple and v:
        return _TupleNode([_infer(x, depth + 1) for x in v])
    if isinstance(v, Mapping) and v and all(type(k) is str for k in v):
        return _DictNode(tuple(v), [_infer(x, depth + 1) for x in v.values()])
    return _ListLeaf()


class Field:
    """The observations (or the actions) of the buffered steps.

    ``put(value)`` stores one step and returns whether the value fitted the layout; on
    ``False`` the caller calls :meth:`fallback` with the number of rows stored before.
    """

    def __init__(self, what: str) -> None:
        self.what = what
        self.root: _Node | None = None
        self.put: Put = self._first_put

    def _first_put(self, v: Any) -> bool:
        self.root = _infer(v)
        self.put = self.root.put
        return self.put(v)

    def fallback(self, v: Any, rows: int) -> None:
        """``v`` did not fit: keep the first ``rows`` values, store per-step values from now on."""
        root = self.root
        values = [root.get(i) for i in range(rows)] if root is not None else []
        logger.warning(
            "%s: a %s does not match the layout of the earlier values; storing them as "
            "per-step JSON values from now on, which is slower",
            self.what,
            type(v).__name__,
        )
        leaf = _ListLeaf(values)
        self.root, self.put = leaf, leaf.put
        leaf.put(v)

    def take(self, start: int, stop: int) -> Any:
        """The stored steps ``start .. stop-1`` as a field for :func:`_format.encode_field`.

        What it returns stays valid after :meth:`release` (it may share memory only with
        buffers that release hands over).
        """
        if self.root is None:
            return np.zeros((0,), dtype=np.float64)
        return self.root.take(start, stop)

    def get(self, i: int) -> Any:
        """A copy of step ``i``'s value."""
        return self.root.get(i) if self.root is not None else None

    def release(self, keep_from: int) -> None:
        """Drop the steps before ``keep_from`` (after they were written)."""
        if self.root is not None:
            self.root.release(keep_from)

    def row_bytes(self) -> int:
        """About how many bytes one step takes."""
        return self.root.row_bytes() if self.root is not None else 0
