"""The frame leaf's buffers: each handed to the write of its batch at a release, and never
written to again (the write reads it while the env steps on).

(A private module: the buffer's hand-over is not visible through the public API, and a write
that read a buffer written to again would record the wrong frames only under a race.)"""

from __future__ import annotations

import numpy as np

from gym_recording.record.buffer import FrameLeaf


def _frame(i: int) -> np.ndarray:
    return np.full((8, 16, 3), i % 251, np.uint8)


def _fill(leaf: FrameLeaf, start: int, n: int) -> None:
    for i in range(start, start + n):
        assert leaf.put(_frame(i))


def _frames(start: int, stop: int) -> bytes:
    return b"".join(_frame(i).tobytes() for i in range(start, stop))


def test_the_buffer_of_the_write_in_flight_is_never_written_again() -> None:
    """The rows a release hands out stay as they were while the next batch fills."""
    leaf = FrameLeaf(np.dtype(np.uint8), (8, 16, 3))
    first = leaf.buf
    _fill(leaf, 0, 10)
    in_flight = memoryview(leaf.take(0, 10))  # a write still reading the first batch
    leaf.release(10)
    assert leaf.buf is not first
    _fill(leaf, 10, 30)  # more rows than the first buffer ever held
    assert bytes(in_flight) == _frames(0, 10)
    assert [int(leaf.get(i)[0, 0, 0]) for i in range(3)] == [10, 11, 12]


def test_a_release_refills_the_buffer_released_before_not_the_one_in_flight() -> None:
    """The buffer of the batch before (its write done) is reused; the one in flight is not."""
    leaf = FrameLeaf(np.dtype(np.uint8), (8, 16, 3))
    _fill(leaf, 0, 10)
    first = leaf.buf
    leaf.release(10)  # the first batch's write is in flight
    _fill(leaf, 10, 10)
    second = leaf.buf
    in_flight = memoryview(leaf.take(0, 10))
    leaf.release(10)  # the recording waited for the first write: its buffer comes back
    assert leaf.buf is first
    _fill(leaf, 20, 10)
    assert bytes(in_flight) == _frames(10, 20)
    assert leaf.buf is not second
