"""Where buffered steps live until they are written: one store per leaf of each field.

A *field* (the observations, or the actions) is a tree shaped like its first value: dicts and
tuples of leaves. Each leaf keeps one leaf's value for every buffered step:

- :class:`RowLeaf`: values of one dtype and shape (Box arrays, numpy scalars, Python ints,
  floats and bools), their bytes appended row after row to a ``bytearray``: the cheapest
  copy CPython offers for a few dozen bytes, and the form the C step recorder appends to;
- :class:`FrameLeaf`: the same for rows of more than 4 KiB (images): rows of a preallocated
  array, so each byte is copied once on the way in and written from there; in a
  compressed recording, a :class:`~gym_recording.record.frames.StreamedFrames` instead (a
  field's root only), which compresses them as they come;
- :class:`ListLeaf`: anything else (text, variable shapes, objects), a snapshot per step.

A leaf's ``put`` returns ``False`` (storing nothing) when a value does not fit the layout chosen
from the first one; the field then falls back to per-step values, so the recording stays exact
whatever the env returns.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import struct
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from gym_recording._errors import RecordingError
from gym_recording.format.arrays import blob_dtype
from gym_recording.format.batch import Span, frame_problem
from gym_recording.format.codec import Compressor
from gym_recording.format.limits import MAX_NDIM, MAX_VALUE_COST, fits_int64
from gym_recording.format.values import check_int, is_text, snapshot, value_cost
from gym_recording.format.wire import part_keys
from gym_recording.record import frames
from gym_recording.record.frames import StreamedFrames

__all__ = [
    "Field",
    "FrameLeaf",
    "FrameStore",
    "ListLeaf",
    "OpenSpan",
    "Rewards",
    "RowLeaf",
    "check_seed",
    "frame_store",
    "now",
    "refusal",
    "reward_value",
    "rgb_frame",
    "start_keys",
]

logger = logging.getLogger(__name__)

#: Rows up to this many bytes go to a :class:`RowLeaf` (which the C step appends to: the
#: 2,784 bytes of a Humanoid observation among them); larger ones to a :class:`FrameLeaf`.
SMALL_ROW_BYTES = 4096
_FIRST_ROWS = 32
_INT64 = np.dtype(np.int64)
_FLOAT64 = np.dtype(np.float64)
_BOOL = np.dtype(np.bool_)
_PACK = {"int64": struct.Struct("<q").pack, "float64": struct.Struct("<d").pack}

Put = Callable[[Any], bool]
#: Told what a stored per-step value takes of its batch, in bytes (see ``Values.count``).
Count = Callable[[int], None]


def _packer(dtype: np.dtype[Any]) -> Callable[[Any], bytes]:
    """The bytes of a Python scalar as one value of ``dtype``."""
    return lambda x: bytes(dtype.type(x).tobytes())


class RowLeaf:
    """Values of one dtype and shape: their bytes appended to one ``bytearray``, row by row.

    Args:
        dtype: The values' dtype (little-endian, a blob dtype).
        shape: The shape of one value (``()`` for scalars).
        python: The Python type whose values it takes too (``int`` for an int64 leaf made
            from a Python int, ``float``, ``bool``), or ``None``.
    """

    def __init__(self, dtype: np.dtype[Any], shape: tuple[int, ...], python: type | None) -> None:
        self.dtype, self.shape, self.python = dtype, shape, python
        self.row = dtype.itemsize * math.prod(shape)
        #: The rows. Never replaced (the C step recorder appends to it too).
        self.buf = bytearray()
        ext = self.buf.extend
        ndarray, generic = np.ndarray, np.generic
        kind = dtype.kind
        # A Python scalar fits a scalar leaf of its kind (a bool a bool leaf, an int in range
        # an integer leaf, a float a float64 leaf), whatever made the leaf.
        pack: Callable[[Any], bytes] = _PACK.get(dtype.name) or _packer(dtype)
        lo, hi = (int(np.iinfo(dtype).min), int(np.iinfo(dtype).max)) if kind in "iu" else (0, 0)

        def put(v: Any) -> bool:
            t = type(v)
            if t is ndarray:
                if v.shape != shape or not (v.dtype is dtype or v.dtype == dtype):
                    return False
                try:
                    ext(v)
                except (TypeError, BufferError, ValueError):  # not C-contiguous
                    ext(v.tobytes())
                return True
            if shape:
                return False
            if isinstance(v, generic):
                if v.dtype != dtype:
                    return False
                ext(v.tobytes())
            elif t is bool:
                if kind != "b":
                    return False
                ext(b"\x01" if v else b"\x00")
            elif t is int:
                if kind not in "iu" or not lo <= v <= hi:
                    return False
                ext(pack(v))
            elif t is float:
                if dtype != _FLOAT64:
                    return False
                ext(pack(v))
            else:
                return False
            return True

        self.put: Put = put

    def put_rows(self, rows: np.ndarray, starts: list[int] | None = None) -> bool:
        """Store the rows of ``rows`` (its first axis is the step) as :attr:`put` would.

        ``False`` (storing nothing) unless they are of the leaf's dtype and shape. (``starts``,
        where parts begin, matters to a StreamedFrames only.)
        """
        if rows.dtype != self.dtype or rows.shape[1:] != self.shape:
            return False
        self.buf.extend(np.ascontiguousarray(rows))
        return True

    def take(self, start: int, stop: int) -> np.ndarray:
        """Steps ``start:stop`` (a value that stays valid after :meth:`release`)."""
        # A copy (one memcpy); the view it is copied from goes at once, so that the bytearray
        # is not left exported and stays growable.
        rows = np.frombuffer(self.buf, np.uint8, (stop - start) * self.row, start * self.row)
        return rows.copy().view(self.dtype).reshape(stop - start, *self.shape)

    def get(self, i: int) -> Any:
        """A copy of step ``i``'s value."""
        row = self.buf[i * self.row : (i + 1) * self.row]
        value = np.frombuffer(row, dtype=self.dtype).reshape(self.shape).copy()
        return value if self.shape else (value[()].item() if self.python else value[()])

    def release(self, keep_from: int) -> None:
        """Drop the steps before ``keep_from``."""
        del self.buf[: keep_from * self.row]

    def truncate(self, rows: int) -> None:
        """Drop the steps after the first ``rows``."""
        del self.buf[rows * self.row :]

    def row_bytes(self) -> int:
        """About how many bytes one step takes."""
        return self.row


class FrameLeaf:
    """Large fixed-shape arrays (images): rows of one preallocated array, grown by doubling.

    When a batch is written its buffer is handed to the write (:meth:`release`), and the
    buffer of the batch before takes its place: the write reads the one while the env steps
    on into the other. The recording releases only once the write before is done, so that
    buffer is free again; reusing it spares the stepping thread faulting in (and the kernel
    zeroing) a new buffer's pages, every batch.
    """

    def __init__(self, dtype: np.dtype[Any], shape: tuple[int, ...]) -> None:
        self.dtype, self.shape = dtype, shape
        self.buf: np.ndarray = np.empty((_FIRST_ROWS, *shape), dtype=dtype)
        self._spare: np.ndarray | None = None  # the buffer of the batch being written
        self.n = 0

        def put(v: Any) -> bool:
            if type(v) is np.ndarray and v.shape == shape and v.dtype == dtype:
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

    def put_rows(self, rows: np.ndarray, starts: list[int] | None = None) -> bool:
        """Store the rows of ``rows`` as :attr:`put` would one by one (see RowLeaf)."""
        if rows.dtype != self.dtype or rows.shape[1:] != self.shape:
            return False
        n, k = self.n, len(rows)
        while n + k > len(self.buf):
            self._grow()
        self.buf[n : n + k] = rows
        self.n = n + k
        return True

    def _grow(self, rows: int = 0) -> None:
        new = np.empty((max(rows, 2 * len(self.buf)), *self.shape), dtype=self.dtype)
        new[: self.n] = self.buf[: self.n]
        self.buf = new

    def reserve(self, rows: int) -> None:
        """Make room for ``rows`` rows at once (a batch's, once its size is known)."""
        if rows > len(self.buf):
            self._grow(rows)

    def take(self, start: int, stop: int) -> np.ndarray:
        """Steps ``start:stop`` (a value that stays valid after :meth:`release`)."""
        return self.buf[start:stop]

    def get(self, i: int) -> Any:
        """A copy of step ``i``'s value."""
        return self.buf[i].copy()

    def release(self, keep_from: int) -> None:
        """Forget rows before ``keep_from``; the buffer goes to the write taking them.

        The write of the buffer released before must be done: it is the next one filled.
        """
        k = self.n - keep_from
        new = self._spare
        if new is None or new.shape != self.buf.shape:
            new = np.empty_like(self.buf)
        if k > 0:
            new[:k] = self.buf[keep_from : self.n]
        self.buf, self._spare, self.n = new, self.buf, k

    def truncate(self, rows: int) -> None:
        """Drop the steps after the first ``rows``."""
        self.n = min(self.n, rows)

    def begin_part(self, at: int) -> None:
        """Nothing to do: the spans' rows say where a part of the frames begins."""

    def claim(self) -> None:
        """Nothing to do: :attr:`put` makes its room without waiting."""

    def settle(self, keep: bool) -> None:
        """Nothing to do: :attr:`put` copies the row."""

    def close(self) -> None:
        """Free the buffers (the recording takes no more steps; writes hold what they take)."""
        self.buf, self._spare, self.n = np.empty((1, *self.shape), self.dtype), None, 0

    def row_bytes(self) -> int:
        """About how many bytes one step takes."""
        return self.dtype.itemsize * math.prod(self.shape)


#: Where a recording keeps rows of more than 4 KiB (see :func:`frame_store`).
FrameStore = FrameLeaf | StreamedFrames


def frame_store(
    dtype: np.dtype[Any], shape: tuple[int, ...], compressor: Compressor | None
) -> FrameStore:
    """Where a recording keeps rows of ``dtype`` and ``shape`` of more than 4 KiB until written.

    A compressed recording streams them (empty rows excepted: zstd counts a part's bytes).
    """
    if compressor is not None and frames.STREAM and dtype.itemsize * math.prod(shape):
        return StreamedFrames(dtype, shape, compressor)
    return FrameLeaf(dtype, shape)


def rgb_frame(frame: Any, shape: tuple[int, ...] | None, rendering: bool | None) -> np.ndarray:
    """``frame`` as a rendered frame to store: a plain ``uint8[H, W, 3]`` array.

    Args:
        frame: What ``env.render()`` returned (``None``: no frame).
        shape: The shape the episode's frames have, if it has some.
        rendering: Whether the episode it belongs to records frames; ``None`` for an
            episode's first frame.

    Raises:
        RecordingError: the episode records frames and this is none, or the other way round;
            not an RGB ``uint8[H, W, 3]`` array, or not of ``shape``.
    """
    if frame is None and rendering:
        msg = (
            "this episode records rendered frames (its reset had one), but the step has "
            "none: pass render_frame to every add_step of the episode"
        )
        raise RecordingError(msg)
    if rendering is False:
        msg = (
            "a rendered frame in an episode whose reset had none: pass render_frame to "
            "add_reset too, so that every observation has its frame"
        )
        raise RecordingError(msg)
    problem = (
        frame_problem(frame.dtype, frame.shape)
        if isinstance(frame, np.ndarray)
        else f"expected RGB frames, uint8[H, W, 3], got {type(frame).__name__}"
    )
    if problem is not None:
        msg = (
            f"cannot record the rendered frame: {problem} (what render() returns for an env "
            'made with render_mode="rgb_array")'
        )
        raise RecordingError(msg)
    frame = np.asarray(frame)  # (a subclass: its data, as a plain array)
    if shape is not None and frame.shape != shape:
        msg = (
            f"expected a rendered frame of the episode's size {list(shape)}, got "
            f"{list(frame.shape)}; an episode's frames are one array"
        )
        raise RecordingError(msg)
    return frame


class ListLeaf:
    """Anything else (text, variable shapes, objects): a snapshot per step.

    ``depth`` is how deeply a step's value nests in the batch's JSON (the reader's count,
    FORMAT.md §9): one for a field's own values, one more for each Dict or Tuple around it.
    ``count(cost)`` is told what each value takes of its batch (see ``Values.count``).
    """

    def __init__(
        self, values: list[Any] | None = None, depth: int = 1, count: Count | None = None
    ) -> None:
        self.values: list[Any] = values if values is not None else []
        #: What each value counted takes of its batch (``count``'s), from the first counted.
        self.costs: list[int] = []
        app, costs = self.values.append, self.costs.append

        def put(v: Any) -> bool:
            kept = snapshot(v, depth)
            cost = value_cost(kept)
            if cost > MAX_VALUE_COST:
                msg = (
                    f"it would take about {cost >> 20} MiB of its batch once read, more than "
                    f"the {MAX_VALUE_COST >> 20} MiB readers accept (FORMAT.md §9)"
                )
                raise ValueError(msg)
            app(kept)
            if count is not None:  # (what it takes of its batch: per-step values vary)
                costs(cost)
                count(cost)
            return True

        self.put: Put = put

    def take(self, start: int, stop: int) -> list[Any]:
        """Steps ``start:stop`` (a value that stays valid after :meth:`release`)."""
        return self.values[start:stop]

    def get(self, i: int) -> Any:
        """A copy of step ``i``'s value."""
        return self.values[i]

    def release(self, keep_from: int) -> None:
        """Drop the steps before ``keep_from``."""
        uncounted = len(self.values) - len(self.costs)  # (values it was made with)
        del self.values[:keep_from]
        del self.costs[: max(0, keep_from - uncounted)]

    def truncate(self, rows: int) -> None:
        """Drop the steps after the first ``rows``."""
        uncounted = len(self.values) - len(self.costs)
        del self.values[rows:]
        del self.costs[max(0, rows - uncounted) :]

    def row_bytes(self) -> int:
        """About how many bytes one step takes."""
        return 64


class _Branch:
    """A Dict or Tuple value: one child per key or position, stored in step."""

    children: list[Any]

    def release(self, keep_from: int) -> None:
        """Drop the steps before ``keep_from``."""
        for c in self.children:
            c.release(keep_from)

    def truncate(self, rows: int) -> None:
        """Drop the steps after the first ``rows``."""
        for c in self.children:
            c.truncate(rows)

    def row_bytes(self) -> int:
        """About how many bytes one step takes."""
        return sum(c.row_bytes() for c in self.children)


class _DictNode(_Branch):
    def __init__(self, keys: tuple[str, ...], children: list[Any]) -> None:
        self.keys, self.children = keys, children
        pairs = list(zip(keys, [c.put for c in children], strict=True))
        n, key_set = len(keys), frozenset(keys)

        def put(v: Any) -> bool:
            # (the keys, first: v[k] of a key v lacks may answer for it, as a defaultdict's
            # does. In any order: a vector env's final observations may come in another.)
            if not isinstance(v, Mapping) or len(v) != n or v.keys() != key_set:
                return False
            return all(p(v[k]) for k, p in pairs)

        self.put: Put = put

    def take(self, start: int, stop: int) -> dict[str, Any]:
        """Steps ``start:stop`` (a value that stays valid after :meth:`release`)."""
        return {k: c.take(start, stop) for k, c in zip(self.keys, self.children, strict=True)}

    def get(self, i: int) -> Any:
        """A copy of step ``i``'s value."""
        return {k: c.get(i) for k, c in zip(self.keys, self.children, strict=True)}


class _TupleNode(_Branch):
    def __init__(self, children: list[Any]) -> None:
        self.children = children
        puts = [c.put for c in children]
        n = len(children)

        def put(v: Any) -> bool:
            if type(v) is not tuple or len(v) != n:
                return False
            return all(p(x) for x, p in zip(v, puts, strict=True))

        self.put: Put = put

    def take(self, start: int, stop: int) -> tuple[Any, ...]:
        """Steps ``start:stop`` (a value that stays valid after :meth:`release`)."""
        return tuple(c.take(start, stop) for c in self.children)

    def get(self, i: int) -> Any:
        """A copy of step ``i``'s value."""
        return tuple(c.get(i) for c in self.children)


Node = RowLeaf | FrameLeaf | StreamedFrames | ListLeaf | _DictNode | _TupleNode


def _leaf_for(dtype: np.dtype[Any], shape: tuple[int, ...], python: type | None) -> Node:
    if 0 < dtype.itemsize * math.prod(shape) <= SMALL_ROW_BYTES:
        return RowLeaf(dtype, shape, python)
    return FrameLeaf(dtype, shape)  # large rows, or empty ones


def infer(v: Any, depth: int = 0, count: Count | None = None) -> Node:
    """How to store values shaped like ``v`` (``count``: see :class:`ListLeaf`)."""
    if depth > 32:
        return ListLeaf(depth=depth + 1, count=count)
    t = type(v)
    if t is np.ndarray:
        # (stacked, an array of MAX_NDIM dimensions would have one too many: one per step)
        if blob_dtype(v.dtype) is None or v.dtype.byteorder == ">" or v.ndim >= MAX_NDIM:
            return ListLeaf(depth=depth + 1, count=count)
        return _leaf_for(v.dtype, v.shape, None)
    if isinstance(v, np.generic):
        if blob_dtype(v.dtype) is None or v.dtype.byteorder == ">":
            return ListLeaf(depth=depth + 1, count=count)
        return RowLeaf(v.dtype, (), None)
    if t is bool:
        return RowLeaf(_BOOL, (), bool)
    if t is int:
        return RowLeaf(_INT64, (), int) if fits_int64(v) else ListLeaf(depth=depth + 1, count=count)
    if t is float:
        return RowLeaf(_FLOAT64, (), float)
    if t is tuple and v:
        return _TupleNode([infer(x, depth + 1, count) for x in v])
    if isinstance(v, Mapping) and v and all(type(k) is str for k in v) and is_text("".join(v)):
        return _DictNode(tuple(v), [infer(x, depth + 1, count) for x in v.values()])
    return ListLeaf(depth=depth + 1, count=count)  # (which refuses a key JSON cannot hold)


class Field:
    """The observations (or the actions) of the buffered steps.

    ``put(value)`` stores one step and returns whether the value fitted the layout; on
    ``False`` the caller calls :meth:`fallback` with the number of rows stored before.

    With a ``compressor``, a field whose values are arrays of more than 4 KiB (images)
    compresses them as they come (:func:`frame_store`); the recording then says where each
    episode's part begins (:meth:`begin_part`).
    """

    def __init__(
        self,
        what: str,
        space: Any = None,
        compressor: Compressor | None = None,
        count: Count | None = None,
    ):
        self.what = what
        self._count = count
        self.root: Node | None = None
        self.put: Put = self._first_put
        # What a batch gets while no value has come: no steps of the space's values.
        self._empty = _no_steps(space)
        self._compressor = compressor

    def _first_put(self, v: Any) -> bool:
        root = infer(v, 0, self._count)
        if type(root) is FrameLeaf and self._compressor is not None:
            root = frame_store(root.dtype, root.shape, self._compressor)
        self.root = root
        self.put = root.put
        return self.put(v)

    def begin_part(self, at: int) -> None:
        """Say that an episode's part begins at row ``at`` (see StreamedFrames)."""
        if isinstance(self.root, StreamedFrames):
            self.root.begin_part(at)

    def settle(self, keep: bool) -> None:
        """The call that put a value returns (see StreamedFrames.settle)."""
        if isinstance(self.root, StreamedFrames):
            self.root.settle(keep)

    def put_rows(self, rows: np.ndarray, starts: list[int] | None = None) -> bool:
        """Store ``len(rows)`` steps at once, as :attr:`put` would store them one by one.

        ``rows`` is an array whose first axis is the step; ``starts`` are the rows where
        an episode's part begins (after the first row), as :meth:`begin_part` would say.

        Returns ``False``, storing nothing, where the layout takes rows one by one only (a
        Dict, Tuple or per-step field) or they do not fit it: then :attr:`put` each.
        """
        if not len(rows):
            return True
        if self.root is None:
            if not isinstance(infer(rows[0]), (RowLeaf, FrameLeaf)):
                return False
            self._first_put(rows[0])
            rows = rows[1:]
            starts = [r - 1 for r in starts or () if r]
        put_rows = getattr(self.root, "put_rows", None)
        return bool(put_rows(rows, starts)) if put_rows is not None else False

    def fallback(self, v: Any, rows: int) -> None:
        """``v`` did not fit: keep the first ``rows`` values, store per-step values from now on.

        If ``v`` cannot be stored as a per-step value either, it raises, and the layout is
        left as it was.
        """
        root = self.root
        values = [root.get(i) for i in range(rows)] if root is not None else []
        leaf = ListLeaf(values, count=self._count)
        leaf.put(v)  # (first: a value refused here changes nothing)
        self.close()
        logger.warning(
            "%s: a %s does not match the layout of the earlier values; storing them as "
            "per-step JSON values from now on, which is slower",
            self.what,
            type(v).__name__,
        )
        self.root, self.put = leaf, leaf.put

    def carried(self, start: int = 0) -> int:
        """What the per-step values buffered from row ``start`` take of a batch (``Values``)."""
        total, nodes = 0, [self.root]
        while nodes:
            node = nodes.pop()
            if isinstance(node, ListLeaf):  # (its first values may be uncounted: see release)
                total += sum(node.costs[max(0, start - len(node.values) + len(node.costs)) :])
            elif isinstance(node, _Branch):
                nodes.extend(node.children)
        return total

    def take(self, start: int, stop: int) -> Any:
        """The stored steps ``start .. stop-1`` as a field (``format.fields``' tree form).

        What it returns stays valid after :meth:`release`.
        """
        if self.root is None:
            return self._empty
        return self.root.take(start, stop)

    def get(self, i: int) -> Any:
        """A copy of step ``i``'s value."""
        return self.root.get(i) if self.root is not None else None

    def release(self, keep_from: int) -> None:
        """Drop the steps before ``keep_from`` (after they were handed to a write)."""
        if self.root is not None:
            self.root.release(keep_from)

    def truncate(self, rows: int) -> None:
        """Forget the steps after the first ``rows`` (a step refused while being stored)."""
        if self.root is not None:
            self.root.truncate(rows)

    def row_bytes(self) -> int:
        """About how many bytes one step takes."""
        return self.root.row_bytes() if self.root is not None else 0

    def close(self) -> None:
        """Free the values (the recording takes no more), and what compresses them, if any."""
        if isinstance(self.root, (StreamedFrames, FrameLeaf)):
            self.root.close()
        self.root, self.put = None, self._first_put


def _no_steps(space: Any) -> Any:
    """No steps of ``space``'s values, as :meth:`Field.take` gives steps.

    A Box's, say, are ``[0, *shape]`` of its dtype; those of a space of no fixed layout (or of
    no space) ``float64[0]``.
    """
    sub = getattr(space, "spaces", None)
    if isinstance(sub, Mapping) and sub:
        fields = {k: _no_steps(s) for k, s in sub.items()}
        if all(f is not _NONE for f in fields.values()):
            return fields
    elif isinstance(sub, tuple) and sub:
        parts = tuple(_no_steps(s) for s in sub)
        if all(p is not _NONE for p in parts):
            return parts
    else:
        shape, dtype = getattr(space, "shape", None), getattr(space, "dtype", None)
        try:
            dtype = np.dtype(dtype) if dtype is not None else None
        except TypeError:
            dtype = None
        if isinstance(shape, tuple) and dtype is not None and blob_dtype(dtype) is not None:
            return np.zeros((0, *shape), dtype)
    return _NONE


#: No steps of an unknown layout.
_NONE = np.zeros((0,), np.float64)


@dataclass(slots=True)
class OpenSpan(Span):
    """A buffered episode object while it is recorded.

    While the episode is open the stops are unset; ``flagged_at`` is the step count when a
    step last set ``terminated`` or ``truncated``.
    """

    flagged_at: int = -1

    def last_keys(self, steps: int, ended_at: float) -> dict[str, Any]:
        """The keys of the episode (or its last part) ending at ``steps`` buffered steps."""
        keys = dict(self.keys)
        if self.flagged_at != steps:  # its last step set no flag: cut by a reset or a close
            keys.pop("terminated", None)
            keys.pop("truncated", None)
        keys["ended_at"] = ended_at
        if self.part:  # options, and keys such as the seed, are the first part's
            keys = part_keys(keys, first=False, last=True)
        return keys

    def part_so_far(self, obs_stop: int, act_stop: int, frame_stop: int) -> Span:
        """The episode's rows so far (up to the stops), as a part that it continues from."""
        first = self.part == 0
        return dataclasses.replace(
            self,
            obs_stop=obs_stop,
            act_stop=act_stop,
            keys=part_keys(self.keys, first=first, last=False),
            options=self.options if first else None,
            infos=list(self.infos) if self.infos is not None else None,
            continues=True,
            frame_stop=frame_stop,
        )


def now() -> float:
    """The wall-clock time in unix seconds, to the microsecond (an episode's start or end)."""
    return time.time_ns() // 1000 / 1e6


def start_keys(started_at: float, seed: int | None = None) -> dict[str, Any]:
    """The keys an episode gets as it starts (FORMAT.md §4), for every way one is started.

    Its end adds ``ended_at``, and the flags of its last step (:meth:`OpenSpan.last_keys`).
    """
    keys: dict[str, Any] = {"started_at": started_at}
    if seed is not None:
        keys["seed"] = int(seed)
    return keys


def seconds(t: Any, what: str) -> float:
    """``t``, unix seconds (an episode's start or end), as a float; refused unless finite.

    Raises:
        TypeError: ``t`` is not a number. ValueError: it is not finite.
    """
    try:  # (numbers as float() takes them: Fraction, Decimal, a 0-d array; not text)
        value = float(t) if not isinstance(t, (str, bytes, bool)) else None
    except (TypeError, ValueError):
        value = None
    except OverflowError:  # (an int past float64)
        value = math.inf
    if value is None:
        raise TypeError(f"expected {what} to be unix seconds or None, got {type(t).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"expected {what} to be a finite number of unix seconds, got {t}")
    return value


def check_seed(seed: Any) -> None:
    """Refuse a seed that is neither an int nor a numpy integer, or an int JSON cannot hold.

    Raises:
        TypeError: ``seed`` is not an integer.
        RecordingError: an int that no reader could read back exactly (see ``check_int``).
    """
    if type(seed) is not int and not isinstance(seed, np.integer):
        msg = f"expected seed to be an int or None, got {type(seed).__name__}"
        raise TypeError(msg)
    if type(seed) is int:
        try:
            check_int(seed)
        except ValueError as exc:
            raise RecordingError(f"cannot record the seed: {exc}") from None


def refusal(what: str, exc: Exception) -> RecordingError:
    """The error refusing ``what`` (``"the observation"``, ...), whose storing raised ``exc``.

    A ``RecordingError`` is returned as it is. A ``ValueError`` says why the value cannot be
    stored; anything else was raised by the value itself while it was copied (a ``Mapping``
    whose items fail, say), and is named.
    """
    if isinstance(exc, RecordingError):
        return exc
    why = str(exc) if isinstance(exc, ValueError) else f"copying it raised {exc!r}"
    return RecordingError(f"cannot record {what}: {why}")


def reward_value(reward: Any) -> float:
    """A step's reward as the float64 that is stored.

    A reward is a real number: a Python ``int``, ``float`` or ``bool`` (stored as 1.0 or
    0.0), a numpy integer, float or bool scalar, or a 0-d array of one.

    Raises:
        RecordingError: anything else: ``None``, a string (``"1.5"`` is not converted), a
            complex number, an int past float64's range, or an array with one or more
            dimensions (a vector reward).
    """
    if type(reward) is float:
        return reward
    if isinstance(reward, (int, float, np.integer, np.floating, np.bool_)):
        try:
            return float(reward)
        except OverflowError:  # (an int past float64's range)
            bits = int(reward).bit_length()
            msg = (
                "expected the reward to be a real number within float64's range, got an "
                f"int of {bits} bits"
            )
            raise RecordingError(msg) from None
    if isinstance(reward, np.ndarray) and reward.ndim == 0 and reward.dtype.kind in "biuf":
        return float(reward)
    shape = f" of shape {reward.shape}" if isinstance(reward, np.ndarray) else ""
    msg = (
        f"expected the reward to be a real number (int, float or a numpy scalar), got "
        f"{type(reward).__name__}{shape} {str(reward)[:40]}; gym-recording stores one float "
        "per step (record a vector reward in the info, with record_infos=True)"
    )
    raise RecordingError(msg)


class Rewards:
    """One float64 per buffered step, in a ``bytearray`` (the C step recorder appends to it)."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def __len__(self) -> int:
        return len(self.buf) >> 3

    def take(self, stop: int) -> np.ndarray:
        """The first ``stop`` rewards, as float64 (a copy)."""
        return np.frombuffer(self.buf, np.float64, stop).copy()  # (the view goes at once)

    def release(self, keep_from: int) -> None:
        """Drop the rewards before ``keep_from``."""
        del self.buf[: keep_from * 8]
