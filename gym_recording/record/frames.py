"""Large rows of a compressed recording, compressed as they are recorded.

A raw recording keeps a batch's frames (observations of more than 4 KiB, and rendered frames)
in a :class:`~gym_recording.record.buffer.FrameLeaf` until the batch is written. A compressed
one streams them instead (:class:`StreamedFrames`): each row goes into the zstd frame of its
episode's part (FORMAT.md §6.2: one frame per array), which a worker thread of zstd's own
(C, without the GIL) compresses while the env steps. The stepping thread copies a row into
zstd's input buffers, which are small and stay in its core's cache, not into a batch-sized
buffer; a writer holds no batch of raw frames.

The recording tells the stream where its parts begin (:meth:`StreamedFrames.begin_part`)
and where batches end (:meth:`StreamedFrames.release`); the spans of a batch index its
rows as they index a :class:`FrameLeaf`'s, and :meth:`StreamedFrames.take` turns those
indexes into :class:`~gym_recording.format.arrays.Precompressed` arrays.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gym_recording._errors import RecordingError
from gym_recording.format.arrays import Precompressed, PrecompressedRows, blob_dtype
from gym_recording.format.codec import CodecError, Compressor, decompress
from gym_recording.record.lifetime import uninterrupted

__all__ = ["STREAM", "StreamedFrames"]

#: Whether a compressed recording streams its frames (``benchmarks/bench.py`` measures it
#: off too: a :class:`FrameLeaf`, compressed with the rest of the batch).
STREAM = True
#: zstd's worker threads for one stream.
_THREADS = 1


class _Part:
    """The zstd frame of one part's rows, once finished."""

    def __init__(self, dtype: str) -> None:
        self.dtype = dtype
        self.rows = 0  # (the rows compressed into it, counted by zstd once it is finished)
        self.frame: bytes | None = None
        self.error: Exception | None = None

    def result(self, rows: int) -> bytes:
        if self.error is not None:
            msg = f"compressing the recorded frames failed: {self.error!r}"
            raise RecordingError(msg) from self.error
        if self.frame is None or self.rows != rows:  # pragma: no cover - the books say otherwise
            msg = f"expected a finished part of {rows} frames, the stream holds {self.rows}"
            raise RecordingError(msg)
        return self.frame


class _Taken(PrecompressedRows):
    """A batch's rows: ``taken[start:stop]`` is the part of rows ``start:stop``."""

    def __init__(self, parts: dict[int, _Part], offset: int, shape: tuple[int, ...]) -> None:
        self._parts, self._offset, self._shape = parts, offset, shape

    def __getitem__(self, rows: slice) -> Precompressed:
        part = self._parts[self._offset + rows.start]
        n = rows.stop - rows.start
        return Precompressed((n, *self._shape), part.dtype, lambda: part.result(n))


class StreamedFrames:
    """Rows of one large shape compressed as they come, one zstd frame per part.

    Args:
        dtype: The rows' dtype.
        shape: One row's shape (``H, W, 3`` for a rendered frame).
        compressor: The recording's compressor.

    It takes the calls a :class:`~gym_recording.record.buffer.FrameLeaf` takes, and
    :meth:`begin_part`, :meth:`settle` and :meth:`close`. The last row put is held back,
    not compressed, until the call that put it is done with it (:meth:`settle`): so that a
    step refused after its observation was stored is taken back (:meth:`truncate`). Until
    then it is the caller's array itself, which the env may write again once the call
    returns; :meth:`settle` then compresses it from there, or, where a part may begin with
    it (an episode cut in two, whose parts both hold the row), copies it to hold it back
    until the next row comes.
    """

    def __init__(self, dtype: np.dtype[Any], shape: tuple[int, ...], compressor: Compressor):
        self.dtype, self.shape = dtype, shape
        self._blob_dtype = blob_dtype(dtype) or "uint8"
        self.n = 0  # rows since the last release (the spans' indexes)
        self._offset = 0  # rows before the last release
        self._parts: dict[int, _Part] = {}  # by the absolute index of their first row
        self._stream = compressor.stream(threads=_THREADS)
        self._part: _Part | None = None  # the part rows go into
        self._start = -1  # its first row's absolute index
        self._held = np.empty(shape, dtype)  # the last row put, copied (see settle)
        self._ref: np.ndarray | None = None  # or the caller's array, until settle
        self._holding = False  # whether the last row put is not compressed yet
        # Parts' rows read back (see get), by start: with how many rows the part had then.
        self._back: dict[int, tuple[int, np.ndarray]] = {}
        self._begin(0)

        def put(v: Any) -> bool:
            if type(v) is np.ndarray and v.shape == shape and v.dtype == dtype:
                if self._holding:
                    self.claim()
                self._ref, self._holding, self.n = v, True, self.n + 1
                return True
            return False

        self.put = put

    def _add(self, data: Any, at: int) -> None:
        """Compress rows of ``data``, the first being row ``at``, into the current part."""
        part = self._part or self._begin(at)  # (none after a release of every row)
        if part.error is None:
            try:
                self._stream.add(data)
            except Exception as exc:  # (zstd's, or memory: raised by the write that needs it)
                part.error = exc

    def _rows(self, part: _Part) -> int:
        """The rows compressed into ``part`` (zstd's count, for the part being compressed)."""
        return self._stream.rawsize // self.row_bytes() if part is self._part else part.rows

    def claim(self) -> None:
        """Compress the row held back, before the next step's values are stored.

        Where the stepping thread may wait (zstd's input buffers full), an interrupt lands
        here: the row then stays held back (copied, if it was the caller's array), to be
        compressed by the next claim. No step is kept without its row.
        """
        if not self._holding:
            return
        before = self._stream.rawsize if self._part is not None else 0
        try:
            self._add(self._row(), self.n - 1)
            self._holding, self._ref = False, None
        except BaseException:  # (zstd took the row whole, or none of it: its count says)
            if self._part is not None and self._stream.rawsize > before:
                self._holding, self._ref = False, None
            else:
                self.settle(True)
            raise

    def _row(self) -> Any:
        """The bytes of the row held back (the caller's array's, or the copy's)."""
        v = self._ref
        return self._held.data if v is None else np.ascontiguousarray(v).data

    def settle(self, keep: bool) -> None:
        """The call that put the last row returns: take the row from the caller's array now.

        It is compressed from there (:meth:`claim`), or, with ``keep`` (a part may begin with
        the row before the next is put: :meth:`begin_part` ``n - 1``), copied and held
        back. Where ``keep`` was false and a part begins with the row all the same, the row
        is read back from its part (slower, the same bytes).
        """
        if self._ref is None:
            return
        if keep:
            self._held[...] = self._ref
            self._ref = None
        else:
            self.claim()

    def put_rows(self, rows: np.ndarray, starts: list[int] | None = None) -> bool:
        """Store the rows of ``rows`` as :attr:`put` would one by one (see RowLeaf).

        ``starts`` are the rows (of ``rows``) where a part begins, as :meth:`begin_part`
        would say before each of them is put.
        """
        if rows.dtype != self.dtype or rows.shape[1:] != self.shape:
            return False
        cuts = [0, *(starts or ()), len(rows)]
        for i in range(len(cuts) - 1):
            if i:
                self.begin_part(self.n)
            seg = rows[cuts[i] : cuts[i + 1]]
            if not len(seg):
                continue
            self.claim()
            if len(seg) > 1:
                self._add(np.ascontiguousarray(seg[:-1]).data, self.n)
            self._held[...] = seg[-1]
            self._holding = True
            self.n += len(seg)
        return True

    def _begin(self, at: int) -> _Part:
        """Start the part whose first row is row ``at``."""
        self._stream.start()
        self._part = part = _Part(self._blob_dtype)
        self._start = self._offset + at
        self._parts[self._start] = part
        return part

    def _finish(self) -> None:
        """Finish the current part's zstd frame (waiting for zstd's worker)."""
        part = self._part
        if part is None:
            return
        rows, self._part = self._rows(part), None
        if part.error is None:
            try:
                part.rows = rows
                part.frame = self._stream.finish()
            except Exception as exc:
                part.error = exc

    def begin_part(self, at: int) -> None:
        """Say that a part of the rows begins at row ``at``.

        That is the next row put (``n``: a reset's), or the last one (``n - 1``: an
        episode cut into parts), which the part before ends with too.
        """
        if self._part is not None and self._start == self._offset + at:
            return  # (begun there already: nothing is in it but that row)
        with uninterrupted():  # (a Ctrl-C in zstd's wait would leave the part unfinished)
            if at < self.n and self._holding:  # the part before ends with it too
                self._add(self._row(), at)
            elif at < self.n:  # (compressed already, see settle: read back into the new part)
                self._held[...] = self.get(at)
                self._holding = True
            else:
                self.claim()
            self._finish()
            self._begin(at)

    def take(self, start: int, stop: int) -> _Taken:
        """The rows ``start:stop``, to slice into the batch's parts (``start``: 0)."""
        return _Taken(self._parts, self._offset, self.shape)

    def release(self, keep_from: int) -> None:
        """The batch is handed to the write: forget rows before ``keep_from``.

        Rows from ``keep_from`` on are the open episode's part, which goes on; if there
        are none, the last part is finished for the write.
        """
        if keep_from >= self.n:
            self.claim()
            self._finish()
        self._back.clear()
        self._offset += keep_from
        self.n -= keep_from
        self._parts = {k: p for k, p in self._parts.items() if k >= self._offset}

    def truncate(self, rows: int) -> None:
        """Drop the steps after the first ``rows`` (the last one put, the one held back).

        Raises:
            RecordingError: more than that (rows compressed already).
        """
        if rows >= self.n:
            return
        if rows == self.n - 1 and self._holding:
            self._holding, self._ref = False, None
            self.n = rows
            return
        msg = f"cannot take back {self.n - rows} rows: all but the last are compressed already"
        raise RecordingError(msg)

    def get(self, i: int) -> Any:
        """A copy of row ``i`` (read back from the parts: slow, for a field's fallback).

        Raises:
            RecordingError: the row cannot be read back (its compression failed).
        """
        if i == self.n - 1 and self._holding:
            return np.array(self._held if self._ref is None else self._ref)
        for start, part in sorted(self._parts.items(), reverse=True):
            at = start - self._offset
            if at > i:
                continue
            rows_then, rows = self._back.get(start, (-1, None))
            if rows is None or rows_then != self._rows(part):
                try:
                    if part.error is not None:
                        raise CodecError(repr(part.error))
                    if part is self._part:
                        data = np.frombuffer(self._stream.read_back(), np.uint8)
                    else:
                        data = decompress(part.frame, part.rows * self.row_bytes(), "zstd")
                except CodecError as exc:
                    msg = f"cannot read back row {i} of the recorded frames: {exc}"
                    raise RecordingError(msg) from None
                rows = data.view(self.dtype).reshape(-1, *self.shape)
                self._back[start] = (self._rows(part), rows)
            return rows[i - at].copy()
        msg = f"row {i} of the recorded frames is in no part"  # pragma: no cover
        raise RecordingError(msg)

    def row_bytes(self) -> int:
        """About how many bytes one step takes."""
        return self.dtype.itemsize * math.prod(self.shape)

    def reserve(self, rows: int) -> None:
        """Nothing to do: zstd's buffers have their room (a :class:`FrameLeaf` makes it here)."""

    def close(self) -> None:
        """Free zstd's context and worker; the part being compressed, if any, is dropped."""
        self._part = None
        self._holding, self._ref = False, None
        self._stream.close()
