"""Rendered frames of a compressed recording, compressed on a thread as they are recorded.

A raw recording keeps its frames in a :class:`~gym_recording.record.buffer.FrameLeaf` (a
batch's frames in one array) until the batch is written. A compressed one needs no such
array: each frame is copied into a small ring of slots (about 8 MiB), and a thread
compresses it from there into the zstd frame of its episode's part (FORMAT.md §6.2: one
frame per array), while the next is rendered. A writer then holds a ring, not two batches
of frames (80 MiB each).

The recording tells the stream where its parts begin (:meth:`StreamedFrames.begin_part`)
and where batches end (:meth:`StreamedFrames.release`); the spans of a batch index its
frames as they index a :class:`FrameLeaf`'s, and :meth:`StreamedFrames.take` turns those
indexes into :class:`~gym_recording.format.arrays.Precompressed` arrays.
"""

from __future__ import annotations

import math
import queue
import threading
from typing import Any

import numpy as np

from gym_recording._errors import RecordingError
from gym_recording.format.arrays import Precompressed, blob_dtype
from gym_recording.format.codec import Compressor, FrameStream
from gym_recording.record.buffer import FrameLeaf

__all__ = ["RING_BYTES", "STREAM", "StreamedFrames", "frame_store"]

#: About how many bytes the ring of frames waiting to be compressed holds (3 to 16 frames).
RING_BYTES = 8 * 1024 * 1024
#: Whether a compressed recording streams its frames (``benchmarks/bench.py`` measures it
#: off too: a :class:`FrameLeaf`, compressed with the rest of the batch).
STREAM = True


def frame_store(
    dtype: np.dtype[Any], shape: tuple[int, ...], compressor: Compressor | None
) -> FrameLeaf | StreamedFrames:
    """Where a recording keeps its rendered frames of ``dtype`` and ``shape`` until written."""
    if compressor is not None and STREAM:
        return StreamedFrames(dtype, shape, compressor)
    return FrameLeaf(dtype, shape)


class _Part:
    """The zstd frame of one part's rendered frames, once the thread has made it."""

    def __init__(self, dtype: str) -> None:
        self.dtype = dtype
        self.rows = 0  # (the thread's count of the frames it compressed)
        self.done = threading.Event()
        self.frame = b""
        self.error: BaseException | None = None

    def result(self, rows: int) -> bytes:
        self.done.wait()
        if self.error is not None:
            msg = f"compressing the rendered frames failed: {self.error!r}"
            raise RecordingError(msg) from self.error
        if self.rows != rows:  # pragma: no cover - the recording's books say otherwise
            msg = f"expected {rows} rendered frames in the part, the stream holds {self.rows}"
            raise RecordingError(msg)
        return self.frame


class _Taken:
    """A batch's frames: ``taken[start:stop]`` is the part of rows ``start:stop``."""

    def __init__(self, parts: dict[int, _Part], offset: int, shape: tuple[int, ...]) -> None:
        self._parts, self._offset, self._shape = parts, offset, shape

    def __getitem__(self, rows: slice) -> Precompressed:
        part = self._parts[self._offset + rows.start]
        n = rows.stop - rows.start
        return Precompressed((n, *self._shape), part.dtype, lambda: part.result(n))


class StreamedFrames:
    """Rendered frames compressed on a thread as they come, one zstd frame per part.

    Args:
        dtype: The frames' dtype (``uint8``).
        shape: One frame's shape (``H, W, 3``).
        compressor: The recording's compressor.

    It takes the calls a :class:`~gym_recording.record.buffer.FrameLeaf` takes, and
    :meth:`begin_part` and :meth:`close`. A frame is handed to the thread when it is put;
    the stepping thread waits only when the thread is a whole ring of frames behind.
    """

    def __init__(self, dtype: np.dtype[Any], shape: tuple[int, ...], compressor: Compressor):
        self.dtype, self.shape = dtype, shape
        self._blob_dtype = blob_dtype(dtype) or "uint8"
        self.n = 0  # frames since the last release (the spans' indexes)
        self._offset = 0  # frames before the last release
        self._parts: dict[int, _Part] = {}  # by the absolute index of their first frame
        nbytes = dtype.itemsize * math.prod(shape)
        slots = max(3, min(16, RING_BYTES // max(nbytes, 1)))
        self._ring = np.empty((slots, *shape), dtype)
        # (last in, first out: the slot the thread has just read is the next one filled, warm
        # in a cache the two cores share, where they share one)
        self._free: queue.LifoQueue[int] = queue.LifoQueue()
        for i in range(slots):
            self._free.put(i)
        self._todo: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=self._run, args=(compressor,), name="gym-recording-frames", daemon=True
        )
        self._thread.start()
        self._claimed = -1  # a free slot taken for the next frame (see claim)
        ring, todo = self._ring, self._todo

        def put(v: Any) -> bool:
            if type(v) is np.ndarray and v.shape == shape and v.dtype == dtype:
                self.claim()  # (the recording claimed it already: see claim)
                slot = self._claimed
                ring[slot] = v  # (interrupted here, the slot stays claimed for the next)
                self._claimed = -1
                todo.put(slot)
                self.n += 1
                return True
            return False

        self.put = put

    def claim(self) -> None:
        """Wait for a free slot for the next frame, before the step it belongs to is stored.

        The wait (the thread a ring of frames behind) is where an interrupt lands: there it
        leaves the step unrecorded, not recorded without its frame.
        """
        if self._claimed < 0:
            self._claimed = self._free.get()

    def begin_part(self, at: int) -> None:
        """Say that a part of the frames begins at row ``at``.

        That is the next frame put (``n``: a reset's), or the last one (``n - 1``: an
        episode cut into parts), which the part before ends with too.
        """
        part = _Part(self._blob_dtype)
        self._parts[self._offset + at] = part
        self._todo.put((part, at < self.n))

    def take(self, start: int, stop: int) -> _Taken:
        """The frames of rows ``start:stop``, to slice into the batch's parts (``start``: 0)."""
        return _Taken(self._parts, self._offset, self.shape)

    def release(self, keep_from: int) -> None:
        """The batch is handed to the write: forget rows before ``keep_from``.

        Rows from ``keep_from`` on are the open episode's part, which goes on.
        """
        if keep_from >= self.n:
            self._todo.put(None)  # (the last part is done)
        self._offset += keep_from
        self.n -= keep_from
        self._parts = {k: p for k, p in self._parts.items() if k >= self._offset}

    def row_bytes(self) -> int:
        """About how many bytes one step takes."""
        return self.dtype.itemsize * math.prod(self.shape)

    def reserve(self, rows: int) -> None:
        """Nothing to do: the ring has its room (a :class:`FrameLeaf` makes it here)."""

    def close(self) -> None:
        """Stop the thread once it has compressed every frame put."""
        self._todo.put(())
        self._thread.join()

    def _run(self, compressor: Compressor) -> None:
        ring, free, todo = self._ring, self._free, self._todo
        zstd = compressor.stream()
        stream: FrameStream | None = None
        part: _Part | None = None
        failure: BaseException | None = None  # (the part's: handed to the write that needs it)
        held = -1  # the slot of the last frame compressed: the next part may begin with it
        while True:
            cmd = todo.get()
            if type(cmd) is int:  # a frame
                if stream is not None:
                    try:
                        stream.add(ring[cmd].data)
                        part.rows += 1  # type: ignore[union-attr]
                    except BaseException as exc:
                        failure, stream = exc, None
                if held >= 0:
                    free.put(held)
                held = cmd
                continue
            if part is not None:  # a part begins, or the last one is done: finish the last
                if failure is None and stream is not None:
                    try:
                        part.frame = stream.finish()
                    except BaseException as exc:
                        failure = exc
                part.error = failure
                part.done.set()
                part = stream = None
            if cmd == ():
                return
            if cmd is None:
                continue
            part, again = cmd
            failure = None
            try:
                zstd.start()
                stream = zstd
                if again and held >= 0:  # (the part before ends with that frame too)
                    stream.add(ring[held].data)
                    part.rows += 1
            except BaseException as exc:
                failure, stream = exc, None
