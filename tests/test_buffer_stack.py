"""Rewards and Discrete actions, lists of Python numbers, stacked in C as NumPy stacks them.

``_buffer.stack_numbers`` (``_speedups.pack_list``) takes only lists it can stack to exactly
NumPy's values (exact floats as float64, exact ints within int64) and declines every other
one, which NumPy then stacks; the recording's files are the same either way.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import gym_recording
from gym_recording import _buffer
from gym_recording.recording import TraceRecording
from tests.conftest import requires_c

pytestmark = requires_c

TAKEN: list[tuple[str, list[Any]]] = [
    ("d", [1.0, -0.0, 0.5, math.inf, -math.inf, 1e308, 5e-324, 2.0**-1074]),
    ("d", []),
    ("q", [0, 1, -1, 2**63 - 1, -(2**63), 7]),
    ("q", []),
]
DECLINED: list[tuple[str, list[Any]]] = [
    ("d", [1.0, 2]),  # an int among floats: NumPy converts it, C leaves it to NumPy
    ("d", [1.0, np.float64(2.5)]),  # a float subclass
    ("d", [1.0, True]),
    ("d", [1.0, None]),
    ("q", [1, True]),  # a bool is not an int here
    ("q", [1, 2**63]),  # beyond int64
    ("q", [1, -(2**63) - 1]),
    ("q", [1, 2.0]),
    ("q", [1, np.int64(3)]),
]


@pytest.mark.parametrize(("kind", "values"), TAKEN)
def test_stacks_exactly_as_numpy(kind: str, values: list[Any]) -> None:
    dtype = np.int64 if kind == "q" else np.float64
    for stop in range(len(values) + 1):
        got = _buffer.stack_numbers(values, stop, kind)
        want = np.asarray(values[:stop], dtype=dtype).reshape(-1)
        assert got is not None and got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()  # to the bit (-0.0, subnormals, infinities)
        assert got.flags.writeable and got.flags.c_contiguous


def test_nan_payloads_are_kept() -> None:
    nan = np.frombuffer(np.uint64(0x7FF8_0000_0000_0ABC).tobytes(), np.float64)[0].item()
    got = _buffer.stack_numbers([nan], 1, "d")
    assert got is not None and got.view(np.uint64)[0] == 0x7FF8_0000_0000_0ABC


@pytest.mark.parametrize(("kind", "values"), DECLINED)
def test_declines_what_numpy_must_judge(kind: str, values: list[Any]) -> None:
    assert _buffer.stack_numbers(values, len(values), kind) is None
    assert _buffer.stack_numbers(values, 1, kind) is not None  # the prefix is plain


def test_bad_arguments_raise() -> None:
    pack = _buffer._speedups.pack_list  # type: ignore[union-attr]
    with pytest.raises(IndexError):
        pack([1.0], 2, "d")
    with pytest.raises(IndexError):
        pack([1.0], -1, "d")
    with pytest.raises(ValueError):
        pack([1.0], 1, "f")
    with pytest.raises(TypeError):
        pack((1.0,), 1, "d")


@pytest.mark.parametrize("c", [True, False], ids=["c", "numpy"])
def test_recorded_rewards_and_actions_are_the_same_either_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, c: bool
) -> None:
    """Mixed rewards (ints, numpy floats, floats) and Discrete actions read back exactly."""
    if not c:
        monkeypatch.setattr(_buffer, "_speedups", None)
    rewards = [1.0, 2, np.float32(0.1), -0.0, 1e300, True, np.float64(3.5)]
    rec = TraceRecording(tmp_path, batch_bytes=10_000)
    for e in range(5):
        rec.add_reset(np.zeros(2, np.float32))
        for t, r in enumerate(rewards if e == 2 else [float(x) for x in rewards]):
            rec.add_step(t % 3, np.full(2, t, np.float32), r)
    rec.close()
    with gym_recording.load(tmp_path) as r:
        for e, ep in enumerate(r):
            want = np.asarray(rewards, np.float64)
            assert ep.rewards.dtype == np.float64 and ep.rewards.tobytes() == want.tobytes(), e
            assert ep.actions.dtype == np.int64
            assert ep.actions.tolist() == [t % 3 for t in range(len(rewards))]
