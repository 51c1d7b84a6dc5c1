"""The batch encoder's fast path writes the same documents as its general path."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gym_recording import _format


def _record(**kw):
    base = dict(
        observations=np.arange(12, dtype=np.float32).reshape(3, 4),
        actions=np.array([1, 0], dtype=np.int64),
        rewards=np.array([0.5, -1.25]),
        terminated=True,
        truncated=False,
        seed=7,
        started_at=1700000000.123456,
        ended_at=1700000001.5,
    )
    base.update(kw)
    return _format.EpisodeRecord(**base)


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"seed": None, "started_at": None, "ended_at": None},
        {"part": 2, "continues": True, "terminated": False},
        {"actions": np.zeros((2, 3), dtype=np.float16), "truncated": True},
        {"observations": np.zeros((3, 2, 2, 3), dtype=np.uint8)},
        {"rewards": np.array([1, 2], dtype=np.int64)},
        {
            "observations": np.zeros((1, 4), np.float32),
            "actions": np.zeros((0,), np.int64),
            "rewards": np.zeros((0,)),
        },
    ],
)
def test_fast_path_equals_general_path(kw):
    """Episode JSON and blob bytes from the fast path equal the dict-and-json.dumps path."""
    eps = [_record(**kw), _record(**kw)]
    fast_json, fast_chunks, fast_size = _format.encode_batch(eps, "x.bin")
    blob = _format.BlobBuilder("x.bin")
    general = {"episodes": [_format._episode_obj(ep, blob) for ep in eps]}
    assert json.loads(fast_json) == json.loads(_format.dumps(general))
    assert fast_size == blob.size
    assert b"".join(bytes(c) for c in fast_chunks) == b"".join(bytes(c) for c in blob.chunks)


def test_general_path_is_used_for_options_infos_and_structures():
    """Options, infos and dict fields take the general path and still encode exactly."""
    ep = _record(
        options={"difficulty": 3, "nan": float("nan")},
        infos=[{"a": np.int32(1)}, {}, {"b": (1, 2)}],
        observations=_format.FieldDict(
            {"pos": np.zeros((3, 2), np.float32), "id": np.arange(3, dtype=np.int64)}
        ),
    )
    data, _, _ = _format.encode_batch([ep], "y.bin")
    obj = json.loads(data)["episodes"][0]
    assert obj["options"]["nan"] == {"__type": "float", "value": "nan"}
    assert obj["observations"]["__type"] == "dict"
    assert len(obj["infos"]) == 3
