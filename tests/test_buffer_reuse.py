"""The frame leaf's buffers: handed to a write at each release, and taken back once the write
says it is done (never before)."""

from __future__ import annotations

import numpy as np

from gym_recording.record.buffer import FrameLeaf


def _frame(i: int) -> np.ndarray:
    return np.full((8, 16, 3), i % 251, np.uint8)


def _fill(leaf: FrameLeaf, start: int, n: int) -> None:
    for i in range(start, start + n):
        assert leaf.put(_frame(i))


def test_a_buffer_is_reused_once_its_write_is_done() -> None:
    """After ``written()``, the next release takes the buffer back: no fresh one to fault in."""
    leaf = FrameLeaf(np.dtype(np.uint8), (8, 16, 3))
    first = leaf.buf
    _fill(leaf, 0, 10)
    taken = leaf.take(0, 10)  # what a write of the batch holds
    leaf.release(10)
    assert leaf.buf is not first
    _fill(leaf, 10, 10)
    leaf.written()  # the first batch's write is done
    del taken
    leaf.take(0, 10)
    leaf.release(10)
    assert leaf.buf is first  # taken back
    _fill(leaf, 20, 3)
    assert [int(leaf.get(i)[0, 0, 0]) for i in range(3)] == [20, 21, 22]


def test_a_buffer_a_write_still_holds_is_not_reused() -> None:
    """Without ``written()``, a release never hands out the buffer the write is reading."""
    leaf = FrameLeaf(np.dtype(np.uint8), (8, 16, 3))
    first = leaf.buf
    _fill(leaf, 0, 10)
    in_flight = memoryview(leaf.take(0, 10))  # a write still reading the first batch
    leaf.release(10)
    _fill(leaf, 10, 10)
    leaf.take(0, 10)
    leaf.release(8)  # two rows kept (an open episode's) go to the front of the next buffer
    assert leaf.buf is not first
    _fill(leaf, 20, 30)  # more rows than the first buffer ever held
    assert bytes(in_flight) == b"".join(_frame(i).tobytes() for i in range(10))
    assert [int(leaf.get(i)[0, 0, 0]) for i in range(4)] == [18, 19, 20, 21]
