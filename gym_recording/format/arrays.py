"""Arrays in blobs (FORMAT.md §6.1): laid out by the writer, checked and viewed by the reader.

:class:`BlobLayout` places a batch's arrays in its blob at 8-byte-aligned offsets without
copying them (the blob is written from the pieces). :class:`BatchBlob` is the reader's side:
the one blob a batch may reference, opened when first needed, every reference checked
against it before a byte is read (its name, its size against its shape, its bytes within the
blob, no byte shared with another array of the batch), then handed out as a read-only view.
"""

from __future__ import annotations

import bisect
import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np
from msgspec import UNSET

from gym_recording._accel import speedups
from gym_recording._errors import ReadError, TraceFormatError
from gym_recording.format.codec import CodecError, Compressor, decompress
from gym_recording.format.limits import INTP_MAX
from gym_recording.format.wire import DTYPES, ArrayRef

__all__ = [
    "DTYPE",
    "BatchBlob",
    "BlobLayout",
    "Precompressed",
    "PrecompressedRows",
    "blob_dtype",
    "brief",
]

#: The little-endian dtype of each allowed dtype name.
DTYPE: dict[str, np.dtype[Any]] = {n: np.dtype(n).newbyteorder("<") for n in DTYPES}
_PAD = b"\x00" * 8
_EMPTY = np.empty(0, np.uint8)
#: Each allowed dtype, in either byte order, by its name (dtypes compare and hash by value:
#: a structured dtype is none of these). A lookup here costs less than ``dtype.name``.
_BLOB_NAMES: dict[np.dtype[Any], str] = {
    **{dt: n for n, dt in DTYPE.items()},
    **{dt.newbyteorder(">"): n for n, dt in DTYPE.items()},
}


_codec, _rawsize = operator.attrgetter("codec"), operator.attrgetter("rawsize")


def _all_plain(refs: list[ArrayRef]) -> bool:
    """Whether no reference of ``refs`` is compressed (§6.2: names a codec or a raw size).

    Counted in C, for a batch's column of references at once.
    """
    n = len(refs)
    return list(map(_codec, refs)).count(UNSET) == n and list(map(_rawsize, refs)).count(UNSET) == n


def blob_dtype(dtype: np.dtype[Any]) -> str | None:
    """The §6.1 name under which arrays of ``dtype`` are stored in a blob, or ``None``.

    Big-endian arrays of an allowed dtype are stored little-endian (a converted copy).
    """
    return _BLOB_NAMES.get(dtype)


def _blob_name(arr: np.ndarray) -> str:
    name = blob_dtype(arr.dtype)
    if name is None:
        raise TypeError(f"arrays of dtype {arr.dtype} have no blob form")
    return name


def brief(x: Any) -> str:
    """An untrusted value described for a message: short, never deep, never a huge number."""
    if x is None or isinstance(x, (bool, float)):
        return repr(x)
    if isinstance(x, int):
        return repr(x) if -(10**30) < x < 10**30 else f"an integer of {x.bit_length()} bits"
    if isinstance(x, str):
        return repr(x[:60]) + ("..." if len(x) > 60 else "")
    if isinstance(x, list):
        if len(x) <= 8 and not any(isinstance(i, (list, dict)) for i in x):
            return "[" + ", ".join(brief(i) for i in x) + "]"
        return f"a list of {len(x)} items"
    if isinstance(x, dict):
        return f"an object of {len(x)} keys"
    return type(x).__name__


class Precompressed:
    """An array already compressed (one zstd frame of its bytes, §6.2), to lay out as it is.

    Args:
        shape: The array's shape.
        dtype: Its blob dtype (a :data:`DTYPES` name).
        frame: Returns the frame once it is made (it may wait for it), declaring
            ``prod(shape) * itemsize`` bytes.
    """

    def __init__(self, shape: tuple[int, ...], dtype: str, frame: Callable[[], bytes]) -> None:
        self.shape, self.dtype, self.frame = shape, dtype, frame
        self.nbytes = DTYPE[dtype].itemsize * math.prod(shape)


class PrecompressedRows:
    """A field's rows compressed part by part as they were recorded (a field leaf's column).

    ``rows[start:stop]`` is the :class:`Precompressed` part of rows ``start:stop``, where a
    part begins at ``start``.
    """

    def __getitem__(self, rows: slice) -> Precompressed:
        raise NotImplementedError


class BlobLayout:
    """Lays a batch's arrays out in its blob, each at an 8-byte-aligned offset, without copies.

    Args:
        name: The blob's file name, written into every reference.

    Example:
        >>> layout = BlobLayout("b.bin")
        >>> layout.add(np.arange(3, dtype=np.int8)).npyoff, layout.add(np.ones(2)).npyoff
        (0, 8)
        >>> layout.size, len(layout.chunks)
        (24, 3)
    """

    def __init__(self, name: str) -> None:
        self.name = name
        #: The blob's bytes, in pieces (views of the arrays, and padding).
        self.chunks: list[Any] = []
        #: The blob's length so far.
        self.size = 0
        # Each reference handed out, in order (for compress): its raw bytes are the blob's at
        # its offset; a Precompressed array's comes with it, as (reference, array).
        self._refs: list[Any] = []
        self._starts: list[int] = []  # each chunk's offset in the blob
        self._sources: list[tuple[ArrayRef, Any]] | None = None  # (see compress)
        #: The raw bytes of the arrays to lay out :class:`Precompressed` (not in :attr:`size`).
        self.precompressed = 0

    def _append(self, arr: np.ndarray) -> int:
        pad = -self.size % 8
        if pad:
            self._starts.append(self.size)
            self.chunks.append(_PAD[:pad])
            self.size += pad
        offset = self.size
        if arr.nbytes:
            self._starts.append(offset)
            self.chunks.append(arr.reshape(-1).view(np.uint8).data)
            self.size += arr.nbytes
        return offset

    def add(self, arr: np.ndarray | Precompressed) -> ArrayRef:
        """Append ``arr`` (of a :func:`blob_dtype`) and return its reference.

        A :class:`Precompressed` array is laid out by :meth:`compress`, which a layout that
        holds one needs.
        """
        if isinstance(arr, Precompressed):
            ref = ArrayRef(list(arr.shape), arr.dtype, self.name, 0, 0)  # (set by compress)
            self._refs.append((ref, arr))
            self.precompressed += arr.nbytes
            return ref
        name = _blob_name(arr)
        arr = np.asarray(arr, dtype=DTYPE[name], order="C")  # (0-d stays 0-d)
        offset = self._append(arr)
        ref = ArrayRef(list(arr.shape), name, self.name, offset, arr.nbytes)
        self._refs.append(ref)
        return ref

    def rows(self, column: np.ndarray) -> Callable[[int, int], ArrayRef]:
        """References to row ranges of ``column`` (an array whose first axis is the step).

        When a row takes a multiple of 8 bytes the column is laid out once, whole, and each
        range's reference points into it (the blob is then the batch's columns one after the
        other); otherwise each range is laid out when asked for.

        Returns:
            ``ref(start, stop)``: the reference of rows ``start:stop``.
        """
        name = _blob_name(column)
        column = np.ascontiguousarray(column, dtype=DTYPE[name])
        tail = list(column.shape[1:])
        row = column.dtype.itemsize * math.prod(tail)
        if row % 8 or not row:
            return lambda start, stop: self.add(column[start:stop])
        base = self._append(column)
        fn = self.name

        refs = self._refs.append

        def ref(start: int, stop: int) -> ArrayRef:
            n = stop - start
            r = ArrayRef([n, *tail], name, fn, base + start * row, n * row)
            refs(r)
            return r

        return ref

    def pieces(self) -> tuple[list[Any], int]:
        """The blob's bytes, in pieces, and its size; a blob of no array is 8 zero bytes.

        (The original reader maps each blob, which an empty file fails: a batch of only
        zero-step episodes of per-step values has no array bytes.)
        """
        if not self.size:
            self._starts.append(0)
            self.chunks.append(_PAD[:8])
            self.size = 8
        return self.chunks, self.size

    def compress(self, compressor: Compressor) -> None:
        """Lay the blob out again with each array compressed (FORMAT.md §6.2).

        Every reference handed out is updated in place: its frame's offset and size, its
        codec and raw size. An array that would not shrink (by more than the ~32 bytes its
        reference gains) is kept raw, and so is one of 64 bytes or fewer; a
        :class:`Precompressed` one is laid out as it is. Run it before the references are
        encoded (on a writer thread: the compressor releases the GIL).
        """
        if self._sources is None:  # (each array's bytes as first laid out; kept for a retry)
            self._sources = [r if type(r) is tuple else (r, self._bytes_of(r)) for r in self._refs]
        self.chunks, self._starts, self.size, self.precompressed = [], [], 0, 0
        for ref, raw in self._sources:
            if isinstance(raw, Precompressed):
                frame = raw.frame()
            else:
                frame = compressor.compress(raw) if raw.nbytes > 64 else b""
                if not frame or len(frame) + 32 >= raw.nbytes:  # (its two keys take ~32 bytes)
                    ref.codec, ref.rawsize, ref.size = UNSET, UNSET, raw.nbytes
                    ref.npyoff = self._append(raw)
                    continue
            ref.codec, ref.rawsize, ref.size = compressor.codec, raw.nbytes, len(frame)
            ref.npyoff = self._append(np.frombuffer(frame, np.uint8))

    def _bytes_of(self, ref: ArrayRef) -> np.ndarray:
        """The bytes ``ref`` stands for, in the blob as laid out (before :meth:`compress`)."""
        if not ref.size:
            return _EMPTY
        k = bisect.bisect_right(self._starts, ref.npyoff) - 1  # (the chunk it is in)
        at = ref.npyoff - self._starts[k]
        return np.frombuffer(self.chunks[k], np.uint8)[at : at + ref.size]


class BatchBlob:
    """The blob of one batch as the reader sees it: references checked, then viewed.

    A batch may reference one blob only, its own (FORMAT.md §9), so that a blob's bytes
    belong to one batch. Within it no two non-empty arrays may share a byte: a file then
    never stands for more memory than it holds, however its arrays are stacked or joined.

    Args:
        name: The only blob name the batch's references may give.
        load: Returns the blob's bytes (read-only); called once, when first needed.
        path: The batch JSON's path, for messages.
        budget: Bytes that arrays built from the batch's JSON may take together.
    """

    def __init__(
        self, name: str, load: Callable[[str], memoryview], path: str, budget: int
    ) -> None:
        self.name = name
        self.path = path
        self._load = load
        self._bytes: memoryview | None = None
        # The byte ranges (start, stop) of the non-empty arrays (one per array, or per
        # column), and the bytes of those read one by one (not by the C views), together.
        self._spans: list[tuple[int, int]] = []
        self._claimed = 0
        self._budget = budget
        #: Array references checked so far, and how many of them were compressed.
        self.arrays = self.compressed = 0
        #: The codecs of those compressed (``{"zstd"}``, or empty).
        self.codecs: set[str] = set()

    def fail(self, where: str, problem: str) -> TraceFormatError:
        """An error naming the batch file, the place in it and the problem."""
        return TraceFormatError(f"{where}: {problem}", self.path)

    def charge(self, nbytes: int, where: str) -> None:
        """Account for ``nbytes`` about to be built from JSON; refuse past the batch's budget."""
        self._budget -= nbytes
        if self._budget < 0:
            raise self.fail(
                where,
                "the batch's JSON-encoded arrays would take more memory than its size allows "
                "(FORMAT.md §9)",
            )

    def bytes(self) -> memoryview:
        """The blob's bytes (opened on first use)."""
        if self._bytes is None:
            self._bytes = self._load(self.name)
        return self._bytes

    def array(self, ref: ArrayRef, where: str) -> np.ndarray:
        """The read-only view of ``ref``, checked against the blob first."""
        if ref.npyfile != self.name:
            raise self.fail(
                where,
                f"expected npyfile to be the batch's blob {self.name}, got {brief(ref.npyfile)}",
            )
        dt = DTYPE[ref.dtype]
        nonzero = dt.itemsize * math.prod(d for d in ref.shape if d)
        empty = 0 in ref.shape
        if nonzero > INTP_MAX:
            raise self.fail(where, f"shape {brief(ref.shape)} of {ref.dtype} is over 2**63 bytes")
        nbytes = 0 if empty else nonzero
        plain = _all_plain([ref])
        if not plain and (not ref.codec or ref.rawsize is UNSET):
            raise self.fail(where, "a compressed array needs both 'codec' and 'rawsize'")
        key, declared = ("size", ref.size) if plain else ("rawsize", ref.rawsize)
        if declared != nbytes:
            raise self.fail(
                where,
                f"{key} {declared} does not equal prod(shape {brief(ref.shape)}) * itemsize "
                f"{dt.itemsize} = {nbytes}",
            )
        stored = nbytes if plain else ref.size  # (a compressed array's frame, §6.2)
        blob = self.bytes()
        off = ref.npyoff
        if stored and off % 8:
            raise self.fail(where, f"npyoff {off} of a non-empty array is not a multiple of 8")
        if off + stored > len(blob):
            raise self.fail(
                where,
                f"array bytes {off}..{off + stored} run past the end of {self.name} "
                f"({len(blob)} bytes)",
            )
        self.arrays += 1
        if stored:  # (before its bytes are copied or decompressed)
            self._claim(off, off + stored)
        if not plain:
            self.compressed += 1
            try:
                raw = decompress(blob[off : off + stored], nbytes, ref.codec)  # type: ignore[arg-type]
            except CodecError as exc:
                what = f"{exc} (in {self.name} at {off}); restore the file from a copy"
                raise self.fail(where, what) from None
            except MemoryError:  # (its size is what the reference declares: anything)
                msg = (
                    f"{self.path}: {where}: not enough memory to decompress the {nbytes:,} "
                    f"bytes its reference declares (in {self.name} at {off}); read it where "
                    "more memory is free (a recording from a source you do not trust may "
                    "declare any size: read it under a memory limit, e.g. `ulimit -v`)"
                )
                raise ReadError(msg) from None
            self.codecs.add(ref.codec)  # type: ignore[arg-type]
            return raw.view(dt).reshape(ref.shape)
        if empty:
            try:
                arr = np.empty(ref.shape, dtype=dt)
            except (ValueError, MemoryError):
                raise self.fail(where, f"no array of shape {brief(ref.shape)} can exist") from None
            arr.flags.writeable = False
            return arr
        return np.ndarray(ref.shape, dt, blob, off)

    def arrays_of(
        self, refs: list[ArrayRef], where: Callable[[int], str], *, steps: bool = False
    ) -> list[np.ndarray]:
        """The views of ``refs`` (``where(i)`` names the place of ``refs[i]`` for messages).

        With ``steps``, each is a field's array (§5), whose first axis is the step: a 0-d
        array is refused. Each reference is checked as :meth:`array` checks it.
        """
        c = self._views_c
        if c is not None and refs and _all_plain(refs):
            got = c(refs, self.bytes(), self.name, DTYPE, 1 if steps else 0)
            if got is not None:  # (else a reference breaks a rule: found and named below)
                views, spans = got
                self._spans += spans  # (views copy nothing: checked at the batch's end)
                self.arrays += len(refs)
                return views
        arrays = [self.array(r, where(i)) for i, r in enumerate(refs)]
        if steps:
            for i, a in enumerate(arrays):
                if not a.ndim:
                    raise self.fail(where(i), "expected a field array with a step axis, got 0-d")
        return arrays

    #: The C drop-in for :meth:`array` over a list (see :mod:`gym_recording._accel`): the
    #: same checks and arrays, or ``None`` when a reference breaks a rule; or ``None``.
    _views_c = getattr(speedups, "views", None)

    def _claim(self, start: int, stop: int) -> None:
        """Take bytes ``start:stop`` of the blob for an array about to be copied or decompressed.

        Arrays that do not share bytes take at most the blob's bytes together: past that, two
        share some, and the batch is refused before more is copied (a file whose arrays all
        name the same bytes would stand for many times its size). Else :meth:`check_disjoint`
        looks for two that share bytes at the batch's end.
        """
        self._spans.append((start, stop))
        self._claimed += stop - start
        if self._claimed > len(self.bytes()):  # (two share bytes: which, said as at the end)
            self.check_disjoint()

    def check_disjoint(self) -> None:
        """Refuse the batch if two of its non-empty arrays share a byte of the blob."""
        if len(self._spans) < 2:
            return
        spans = np.array(self._spans, np.int64)
        starts, ends = spans[:, 0], spans[:, 1]
        order = np.argsort(starts, kind="stable")
        starts, ends = starts[order], ends[order]
        clash = np.flatnonzero(starts[1:] < ends[:-1])
        if clash.size:
            at = int(starts[clash[0] + 1])
            msg = f"two arrays share bytes of {self.name} (at offset {at}; FORMAT.md §9)"
            raise TraceFormatError(msg, self.path)
