"""Recorded infos with numeric keys (FORMAT.md §4, ``info_columns``) come back exactly.

An env's step infos of stable keys are stored as arrays, one per key; whatever does not fit a
column (strings, keys that come and go, mixed types) stays as before. Read back, every info
equals what the env returned, to the type and the dtype, across batches, parts and
compression; the bytes on disk are those of the arrays, not of JSON per value.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest

import gym_recording
from gym_recording import TraceRecording
from gym_recording.tools.verify import verify
from gym_recording.wrappers import TraceRecordingWrapper
from tests.conftest import StepCounter


def _info(t: int) -> dict[str, Any]:
    return {
        "x": np.float64(t / 7),
        "ctrl": np.float32(-t),
        "f": t / 3,
        "n": t,
        "flag": t % 3 == 0,
        "vec": np.arange(3, dtype=np.int16) + t,
        "text": f"step {t}",
        "nan": float("nan") if t % 2 else float("inf"),
    }


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(a, float):
        return (np.isnan(a) and np.isnan(b)) or a == b
    if isinstance(a, np.generic):
        return a.dtype == b.dtype and a.tobytes() == b.tobytes()
    return bool(a == b)


def _assert_infos(d: Path, want: list[list[Any]]) -> None:
    """The recording in ``d`` verifies, and its episodes' infos are ``want``, exactly."""
    assert verify(d).ok
    with gym_recording.load(d) as r:
        assert len(r) == len(want)
        for ep, infos in zip(r, want, strict=True):
            assert len(ep.infos) == len(infos)
            for j, (got, w) in enumerate(zip(ep.infos, infos, strict=True)):
                assert _same(got, w), (ep.index, j, got, w)


def _batches(d: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_bytes()) for p in sorted(d.glob("openaigym.trace.*.ep*.json"))]


def _record(d: Path, step_infos: list[Any], steps: int, **kwargs: Any) -> list[list[Any]]:
    """Record an episode for each of ``step_infos`` (``t -> info``): its infos, as given."""
    infos = []
    with TraceRecording(d, record_infos=True, **kwargs) as rec:
        for e, info_of in enumerate(step_infos):
            rec.add_reset(np.zeros(2, np.float32), info={"reset": e})
            infos.append([{"reset": e}])
            for t in range(steps):
                info = info_of(t)
                rec.add_step(t % 2, np.full(2, t, np.float32), 1.0, info=info)
                infos[-1].append(info)
            rec.end_episode()
    return infos


@pytest.mark.parametrize("compression", [None, "zstd"])
@pytest.mark.parametrize("batch_bytes", [5_000_000, 60_000])
def test_numeric_info_keys_become_columns_and_come_back(tmp_path, compression, batch_bytes):
    """Every kind of column, next to keys kept as JSON; parts of split episodes too."""
    infos = _record(tmp_path, [_info] * 3, 40, compression=compression, batch_bytes=batch_bytes)
    objects = [o for b in _batches(tmp_path) for o in b["episodes"]]
    columns = [o["info_columns"] for o in objects if "info_columns" in o]
    assert columns, "no info columns written"
    if batch_bytes < 100_000:  # (episodes split in parts, each with its own columns)
        assert any(o.get("part") for o in objects)
    assert set(columns[0]["columns"]) == {"x", "ctrl", "f", "n", "flag", "vec", "nan"}
    assert all(set(i) == {"text"} for o in objects for i in o["infos"][1:])
    _assert_infos(tmp_path, infos)
    with gym_recording.load(tmp_path) as r:
        assert all(ep.infos[5]["vec"].flags.writeable is False for ep in r)


def test_infos_that_do_not_fit_columns_stay_as_they_were(tmp_path):
    """Keys that come and go, types that change, non-str keys: stored value by value."""
    want: list[Any] = [None]
    with TraceRecording(tmp_path, record_infos=True) as rec:
        rec.add_reset(0, info=None)
        for t in range(6):
            info: Any = {"a": t} if t % 2 else {"a": float(t), "b": 1}
            if t == 5:
                info = {1: "int key"}
            rec.add_step(0, t, 0.0, info=info)
            want.append(info)
        rec.end_episode()
    assert not any("info_columns" in o for b in _batches(tmp_path) for o in b["episodes"])
    with gym_recording.load(tmp_path) as r:
        got = r[0].infos
    assert got[0] is None
    assert all(_same(g, w) for g, w in zip(got[1:], want[1:], strict=True))


@pytest.mark.parametrize("env_id", ["HalfCheetah-v5", "Humanoid-v5"])
def test_mujoco_infos_take_the_bytes_of_their_arrays(tmp_path, env_id):
    """MuJoCo infos (Humanoid's hold arrays): on disk within 1.2x of the run without infos
    plus the infos' raw bytes (issue 19's measure), and equal to what the env returned."""
    pytest.importorskip("mujoco")
    sizes = {}
    kept: list[dict[str, Any]] = []
    for name, record_infos in (("plain", False), ("infos", True)):
        env = gymnasium.make(env_id, max_episode_steps=300)
        with TraceRecordingWrapper(env, tmp_path / name, record_infos=record_infos) as w:
            w.reset(seed=1)
            for _ in range(600):
                *_, te, tr, info = w.step(np.full(w.action_space.shape, 0.1, np.float32))
                if record_infos:
                    kept.append(
                        {k: np.copy(v) if type(v) is np.ndarray else v for k, v in info.items()}
                    )
                if te or tr:
                    w.reset()
        sizes[name] = sum(p.stat().st_size for p in (tmp_path / name).iterdir())
    raw = sum(np.asarray(v).nbytes for info in kept for v in info.values())
    assert sizes["infos"] <= 1.2 * (sizes["plain"] + raw), (sizes, raw)
    with gym_recording.load(tmp_path / "infos") as r:
        got = [i for ep in r for i in ep.infos[1:]]
    assert len(got) == len(kept) and all(_same(g, w) for g, w in zip(got, kept, strict=True))
    objects = [o for b in _batches(tmp_path / "infos") for o in b["episodes"]]
    stepped = [o for o in objects if len(o["infos"]) > 2]  # (the last: a reset only)
    assert stepped and all(set(o["info_columns"]["columns"]) == set(kept[0]) for o in stepped)


def _row(t: int) -> dict[str, Any]:
    return {"x": np.float64(t / 7), "ctrl": np.float32(-t), "n": t, "ok": t % 2 == 0}


@pytest.mark.parametrize("batch_bytes", [5_000_000, 3_000])
def test_infos_kept_as_rows_until_one_differs_come_back_exactly(tmp_path, batch_bytes):
    """A recording keeps flat numeric infos as rows of values, not a dict per step, until one
    step's info differs (other keys, a value that is no scalar, none at all); each episode
    reads back equal, to the type, whatever it switched to, in one batch or in parts."""
    changes: dict[str, Any] = {
        "keys change": lambda t: {**_row(t), "extra": 1} if t >= 12 else _row(t),
        "an array": lambda t: {**_row(t), "x": np.arange(2.0)} if t == 7 else _row(t),
        "types mix": lambda t: {**_row(t), "x": t / 7} if t % 5 == 0 else _row(t),
        "an int past int64": lambda t: {**_row(t), "n": 2**70} if t == 3 else _row(t),
        "no info": lambda t: None if t == 20 else _row(t),
        "empty": lambda t: {},
        "steady": _row,
    }
    want = _record(tmp_path, list(changes.values()), 30, batch_bytes=batch_bytes)
    objects = [o for b in _batches(tmp_path) for o in b["episodes"]]
    if batch_bytes < 100_000:
        assert any(o.get("part") for o in objects)
    assert any("info_columns" in o for o in objects)
    assert verify(tmp_path).ok
    with gym_recording.load(tmp_path) as r:
        assert len(r) == len(changes)
        for name, ep, w in zip(changes, r, want, strict=True):
            assert len(ep.infos) == len(w), name
            for j, (got, exp) in enumerate(zip(ep.infos, w, strict=True)):
                assert _same(got, exp), (name, j, got, exp)


def test_a_refused_info_after_rows_keeps_the_rows_before(tmp_path):
    """An info no reader could read back, after infos kept as rows: the episode ends at the
    step before, with every info before it."""
    want: list[Any] = [None]
    with TraceRecording(tmp_path, record_infos=True) as rec:
        rec.add_reset(0)
        for t in range(5):
            rec.add_step(0, t, 0.0, info=_row(t))
            want.append(_row(t))
        with pytest.raises(gym_recording.RecordingError, match="datetime64"):
            rec.add_step(0, 5, 0.0, info={**_row(5), "x": np.datetime64("2020-01-01")})
        assert not rec.in_episode
    with gym_recording.load(tmp_path) as r:
        (ep,) = r
        assert ep.length == 5
        assert all(_same(g, w) for g, w in zip(ep.infos, want, strict=True))


def test_rows_that_stay_json_count_as_json_against_the_batch(tmp_path):
    """An episode's numeric infos whose last step changes a value's type are kept as dicts
    from that step on: then they count as JSON against ``batch_bytes`` (~1.2 MB an episode
    here), so a 1 MB batch holds one such episode, not five."""
    with TraceRecording(tmp_path, record_infos=True, batch_bytes=1_000_000) as rec:
        for _ in range(6):
            rec.add_reset(np.zeros(2, np.float32), info={})
            for t in range(250):
                info: dict[str, Any] = {k: np.float64(t) for k in ("x", "v", "r", "c")}
                if t == 249:
                    info["x"] = float(t)
                rec.add_step(0, np.ones(2, np.float32), 1.0, info=info)
            rec.end_episode()
    assert [len(b["episodes"]) for b in _batches(tmp_path)] == [1] * 6


class _Stats(StepCounter):
    """Numeric step infos; every tenth step, from the third, adds a key."""

    def step(self, action: int) -> Any:
        self.t += 1
        info: dict[str, Any] = {"x": np.float64(self.t), "n": self.t, "ok": True}
        if self.t % 10 == 3:
            info["note"] = f"step {self.t}"
        return np.full(2, self.t, np.float32), 1.0, self.t >= 30, False, info


@pytest.mark.parametrize("batch_bytes", [5_000_000, 3_000])
def test_a_step_info_with_more_keys_keeps_the_columns(tmp_path, batch_bytes):
    """RecordEpisodeStatistics adds ``"episode"`` to an episode's last step info: the keys
    every step info starts with stay columns, and that step's own keys go to its ``infos``
    entry (FORMAT.md §4, version 2.3); every info reads back equal, keys in their order."""
    env = gymnasium.wrappers.RecordEpisodeStatistics(_Stats())
    want: list[list[Any]] = []
    with TraceRecordingWrapper(env, tmp_path, record_infos=True, batch_bytes=batch_bytes) as w:
        for _ in range(4):
            want.append([w.reset(seed=0)[1]])
            done = False
            while not done:
                *_, te, tr, info = w.step(0)
                want[-1].append(info)
                done = te or tr
    assert "episode" in want[0][-1] and list(want[0][-1])[-1] == "episode"
    objects = [o for b in _batches(tmp_path) for o in b["episodes"]]
    if batch_bytes < 100_000:
        assert any(o.get("part") for o in objects)
    wide = [o for o in objects if o["rewards"]["shape"][0] > 1]  # (one step: no columns)
    assert all(o["info_columns"]["order"] == ["x", "n", "ok"] for o in wide)
    for o in objects:
        if not o.get("continues"):  # (an episode's last step info: "episode" after the rest)
            assert set(o["infos"][-1]) == {"episode"} | (
                {"x", "n", "ok"} - set(o.get("info_columns", {}).get("columns", ()))
            )
    _assert_infos(tmp_path, want)


def test_dict_infos_keep_the_keys_they_all_start_with_as_columns(tmp_path):
    """Step infos kept as dicts (a value changed type) still store, as columns, the keys
    they all start with; the rest, their own keys included, reads back in its order."""
    want: list[Any] = [None]
    with TraceRecording(tmp_path, record_infos=True) as rec:
        rec.add_reset(0)
        for t in range(8):
            info: dict[str, Any] = {"a": t, "b": float(t) if t != 4 else np.float32(t)}
            if t % 3 == 0:
                info["extra"] = [t, "x"]
            if t == 6:
                del info["b"]
            rec.add_step(0, t, 0.0, info=info)
            want.append(info)
        rec.end_episode()
    (obj,) = [o for b in _batches(tmp_path) for o in b["episodes"]]
    assert obj["info_columns"]["order"] == ["a"] and set(obj["info_columns"]["columns"]) == {"a"}
    with gym_recording.load(tmp_path) as r:
        got = r[0].infos
    assert all(_same(g, w) for g, w in zip(got, want, strict=True))


class _Tendons(_Stats):
    """Humanoid-like step infos: numbers and two arrays the env writes in place each step."""

    def __init__(self) -> None:
        self.length = np.zeros(2, np.float64)
        self.velocity = np.zeros((2, 3), np.float32)

    def step(self, action: int) -> Any:
        self.t += 1
        self.length[:] = self.t
        self.velocity[...] = -self.t
        info = {"x": np.float64(self.t), "tendon_length": self.length, "v": self.velocity}
        return np.full(2, self.t, np.float32), 1.0, self.t >= 25, False, info


@pytest.mark.parametrize("batch_bytes", [5_000_000, 4_000])
def test_info_arrays_the_env_reuses_are_kept_as_they_were(tmp_path, batch_bytes):
    """Arrays in step infos that the env overwrites at the next step read back as they were
    at each step, as columns of kind ``array``."""
    want: list[list[Any]] = []
    with TraceRecordingWrapper(
        _Tendons(), tmp_path, record_infos=True, batch_bytes=batch_bytes
    ) as w:
        for _ in range(3):
            want.append([w.reset()[1]])
            done = False
            while not done:
                *_, te, tr, info = w.step(0)
                want[-1].append({k: getattr(v, "copy", lambda v=v: v)() for k, v in info.items()})
                done = te or tr
    objects = [o for b in _batches(tmp_path) for o in b["episodes"] if len(o["infos"]) > 2]
    assert all(o["info_columns"]["columns"]["v"]["kind"] == "array" for o in objects)
    with gym_recording.load(tmp_path) as r:
        for ep, w_ in zip(r, want, strict=True):
            assert all(_same(g, e) for g, e in zip(ep.infos, w_, strict=True))


def test_zero_d_arrays_in_infos_and_options_keep_their_shape(tmp_path):
    """A 0-d array (``np.array(1.5)``) in an info or the reset options reads back 0-d, of its
    dtype, in JSON values and in info columns alike (it used to come back of shape ``[1]``)."""
    want: list[Any] = [{"z": np.array(True)}]
    with TraceRecording(tmp_path, record_infos=True) as rec:
        rec.add_reset(0, info=want[0], options={"o": np.array(3, np.int8)})
        for t in range(4):
            info = {"z": np.array(t / 2), "w": np.array([t, t], np.int16)}
            rec.add_step(0, t, 0.0, info=info)
            want.append(info)
        rec.end_episode()
    with gym_recording.load(tmp_path) as r:
        (ep,) = r
        assert _same(ep.options, {"o": np.array(3, np.int8)})
        assert all(_same(g, w) for g, w in zip(ep.infos, want, strict=True))
