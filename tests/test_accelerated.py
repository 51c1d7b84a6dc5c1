"""The accelerated paths against the plain ones, over the whole corpus: the same bytes written,
the same episodes read, the same files refused.

gym-recording has two accelerated pieces (see ``gym_recording/_accel.py``), each a drop-in for
one Python function: the C step recorder (the wrapper's hot path) and the C column views (the
reader's batch decoding). Each test here runs a corpus through both and compares: the
round-trip envs of every space type (files written, episodes read), the traces of the original
writer, and every hostile recording of ``tests/hostile``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
from compat_expect import COMPAT_DIR, compat_cases

import gym_recording
from gym_recording import TraceFormatError
from gym_recording._accel import speedups
from gym_recording.format.arrays import BatchBlob
from gym_recording.record import steps, writer
from gym_recording.wrappers import TraceRecordingVectorWrapper, TraceRecordingWrapper
from tests.conftest import ACTION_SPACES, OBSERVATION_SPACES, SpaceEnv, record

pytestmark = pytest.mark.skipif(
    speedups is None, reason="gym_recording._speedups is not built (no C compiler at install?)"
)

HOSTILE = Path(__file__).resolve().parent / "hostile"
HOSTILE_CASES = sorted(
    p.name for p in HOSTILE.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))
)


def plain(monkeypatch: pytest.MonkeyPatch) -> None:
    """Switch both accelerated pieces off: every step and every batch takes the Python code."""
    monkeypatch.setattr(steps, "speedups", None)
    monkeypatch.setattr(BatchBlob, "_views_c", None)


def both(monkeypatch: pytest.MonkeyPatch, run: Callable[[], Any]) -> tuple[Any, Any]:
    """``run()`` with the accelerated pieces, then with the plain code."""
    accelerated = run()
    with monkeypatch.context() as m:
        plain(m)
        assert steps.speedups is None and BatchBlob._views_c is None
        return accelerated, run()


def digest(value: Any) -> Any:
    """Everything a decoded value holds, dtypes and bytes included, as comparable data."""
    if isinstance(value, np.ndarray):
        data = value.tobytes() if value.dtype != object else repr(value.tolist()).encode()
        return (
            "array",
            value.dtype.str,
            value.shape,
            hashlib.sha256(data).hexdigest(),
            value.flags.writeable,
        )
    if isinstance(value, dict):
        return ("dict", [(k, digest(v)) for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [digest(v) for v in value])
    return (type(value).__name__, repr(value))


def read(directory: Path) -> Any:
    """Every episode of a recording as digests, or the error that refused it."""
    try:
        with gym_recording.load(directory) as rec:
            return [
                [
                    digest(getattr(ep, k))
                    for k in ("observations", "actions", "rewards", "infos", "options")
                ]
                + [ep.terminated, ep.truncated, ep.seed, ep.index]
                for ep in rec
            ]
    except TraceFormatError as exc:
        return f"refused: {exc}"


def blobs(directory: Path) -> list[bytes]:
    """The bytes of a recording's blobs, in batch order (they hold no names or times)."""
    return [p.read_bytes() for p in sorted(directory.glob("*.bin"))]


@pytest.mark.parametrize("obs_name", sorted(OBSERVATION_SPACES))
def test_both_paths_write_the_same_bytes(obs_name, tmp_path, monkeypatch):
    """Each space type, with each kind of action: the same blobs and episodes both ways."""
    for act_name in sorted(ACTION_SPACES):

        def run(act_name: str = act_name) -> Any:
            out = tmp_path / f"{act_name}-{'plain' if steps.speedups is None else 'c'}"
            env = SpaceEnv(
                OBSERVATION_SPACES[obs_name],
                ACTION_SPACES[act_name],
                max_len=9,
                rich_infos=act_name == "box_f32",
            )
            # (infos with the actions C stores, and with one it does not)
            infos = act_name in ("discrete", "box_f32", "text")
            record(env, out, 4, seed=11, batch_bytes=900, record_infos=infos)
            return blobs(out), read(out)

        accelerated, plain_ = both(monkeypatch, run)
        assert accelerated[0] == plain_[0], f"{obs_name} x {act_name}: blobs differ"
        assert accelerated[1] == plain_[1], f"{obs_name} x {act_name}: episodes differ"


class NumericInfoEnv(gymnasium.Env[np.ndarray, int]):
    """Step infos of numbers, as a MuJoCo env's, whose keys or types change in some episodes.

    Episode ``e`` (of ``length`` steps): ``e % 4 == 1`` adds a key at its last step (as
    RecordEpisodeStatistics does); ``e % 4 == 2`` holds Python ints, one past 64 bits (whose
    digits the Python code checks); ``e % 4 == 3`` turns a value's type at step 7;
    ``e % 5 == 4`` has ``{}`` infos but for a key at its last step; ``e % 3 == 0`` holds an
    array the env reuses, whose shape changes at step 30.
    """

    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self, length: int) -> None:
        self.length, self.e, self.t = length, -1, 0
        self.ten = np.zeros(2, np.float32)

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        self.e, self.t = self.e + 1, 0
        return np.zeros(3, np.float32), {"start": self.e}

    def step(self, action: int) -> Any:
        self.t += 1
        t, e, done = self.t, self.e, self.t >= self.length
        info: dict[str, Any] = {"x": np.float64(t / 7), "v": t / 3, "ok": t % 2 == 0}
        info["c"] = np.float32(-t) if e % 4 != 3 or t < 7 else -t / 1
        if e % 4 == 2:
            info["n"] = t * 1000 if t != 9 else 2**70  # (past 64 bits: Python checks it)
        if e % 4 == 1 and done:
            info["episode"] = {"r": float(t), "l": t}
        if e % 3 == 0:  # (an array the env reuses, as Humanoid's tendon_length, its shape
            self.ten[:] = t  # changing at step 30)
            info["ten"] = self.ten if t < 30 else self.ten[:1]
        if e % 5 == 4:  # (a classic-control env's {} infos, then one with a key)
            info = {"end": t} if done else {}
        return np.full(3, t / 100, np.float32), 1.0, done, False, info


@pytest.mark.parametrize("batch_bytes", [900, 20_000, 5_000_000])
def test_both_paths_keep_info_rows_alike(batch_bytes, tmp_path, monkeypatch):
    """Numeric step infos, which the C step appends as rows: the same batches, bytes and infos.

    Small batches fill with rows in the middle of an episode (split in parts), and rows the C
    step appended turn into dicts when a key or a type changes.
    """

    def run() -> Any:
        out = tmp_path / ("plain" if steps.speedups is None else "c")
        record(NumericInfoEnv(length=45), out, 8, batch_bytes=batch_bytes, record_infos=True)
        # (the batch JSON but for names and times, which differ run to run)
        varying = rb'("(npyfile|started_at|ended_at)": ?)[^,}]*'
        batches = [
            json.loads(re.sub(varying, rb"\g<1>0", p.read_bytes()))
            for p in sorted(out.glob("*.ep*.json"))
        ]
        return blobs(out), batches, read(out)

    accelerated, plain_ = both(monkeypatch, run)
    columns = [o for b in plain_[1] for o in b["episodes"] if "info_columns" in o]
    assert columns, "no info columns written"
    assert accelerated == plain_


class _VecInfoEnv(NumericInfoEnv):
    """Numeric step infos a vector env can batch; every fifth step adds a key."""

    def step(self, action: int) -> Any:
        self.t += 1
        info: dict[str, Any] = {"x": self.t / 7, "n": self.t * (self.e + 1), "ok": action == 1}
        if self.t % 5 == 0 or self.t >= self.length:
            info["note"] = np.float32(self.t)
        return np.full(3, self.t / 100, np.float32), 1.0, self.t >= self.length, False, info


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_both_paths_record_vector_infos_alike(mode, tmp_path, monkeypatch):
    """A vector env's infos, which take each sub-env's step recorder (some steps add a key,
    as RecordEpisodeStatistics's last one does): the same batches, bytes and infos both ways."""

    def run() -> Any:
        out = tmp_path / f"{mode}-{'plain' if steps.speedups is None else 'c'}"
        envs = gymnasium.vector.SyncVectorEnv(
            [lambda i=i: _VecInfoEnv(13 + i) for i in range(3)],
            autoreset_mode=gymnasium.vector.AutoresetMode(mode),
        )
        with TraceRecordingVectorWrapper(envs, out, record_infos=True, batch_bytes=3_000) as w:
            w.reset(seed=5)
            for t in range(120):
                w.step(np.array([t % 2, 1, 0]))
        varying = rb'("(npyfile|started_at|ended_at)": ?)[^,}]*'  # (names, times)
        manifests = [json.loads(p.read_bytes()) for p in out.glob("*.manifest.json")]
        manifests.sort(key=lambda m: m["metadata"]["vector_env"]["index"])
        batches = [
            json.loads(re.sub(varying, rb"\g<1>0", (out / b["fn"]).read_bytes()))
            for m in manifests
            for b in m["batches"]
        ]
        bins = [(out / b["bin"]).read_bytes() for m in manifests for b in m["batches"]]
        return batches, bins, read(out)

    accelerated, plain_ = both(monkeypatch, run)
    assert any("info_columns" in o for b in plain_[0] for o in b["episodes"])
    assert accelerated == plain_


@pytest.mark.parametrize("case", compat_cases())
def test_both_paths_read_the_original_traces_alike(case, monkeypatch):
    """The original writer's traces read to the same episodes both ways."""
    accelerated, plain_ = both(monkeypatch, lambda: read(COMPAT_DIR / case))
    assert not isinstance(accelerated, str), accelerated
    assert accelerated == plain_


@pytest.mark.parametrize("case", HOSTILE_CASES)
def test_both_paths_refuse_hostile_recordings_alike(case, monkeypatch):
    """Every hostile recording is refused both ways, with the same message."""
    accelerated, plain_ = both(monkeypatch, lambda: read(HOSTILE / case))
    assert isinstance(accelerated, str) and accelerated.startswith("refused"), case
    assert accelerated == plain_


class _Wide(gymnasium.Env[np.ndarray, int]):
    """2 KB observations, so that an episode of 150 steps is split by its steps into parts,
    and numeric infos, which the C step appends to rows."""

    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (500,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        self.t = 0
        return np.zeros(500, np.float32), {}

    def step(self, action: int) -> Any:
        self.t += 1
        return np.full(500, self.t, np.float32), 1.0, self.t >= 150, False, {"t": self.t}


def test_a_batch_interrupted_as_it_is_handed_over_keeps_the_infos_in_step(tmp_path, monkeypatch):
    """Ctrl-C as a split episode's first part is handed to the writer (the moment is reached
    by patching the private ``BatchWriter.submit``): the rows went with that part, and the
    C step appends none to them after it (found in review: the part's batch then had the
    next part's infos, and the recording could not be read). The interrupted step ends the
    episode at its last recorded step, with no step missing before it."""
    submit, fired = writer.BatchWriter.submit, []

    def interrupted(self: Any, *args: Any, **kwargs: Any) -> None:
        submit(self, *args, **kwargs)
        if not fired:
            fired.append(True)
            raise KeyboardInterrupt

    monkeypatch.setattr(writer.BatchWriter, "submit", interrupted)
    env = TraceRecordingWrapper(_Wide(), tmp_path, batch_bytes=100_000, record_infos=True)
    env.reset(seed=0)
    lost = []
    for _ in range(150):
        try:
            env.step(0)
        except KeyboardInterrupt:  # (the loop goes on; the episode is no longer recorded)
            lost.append(env.unwrapped.t)
    env.close()
    assert fired and len(lost) == 1
    with gym_recording.load(tmp_path) as rec:
        (ep,) = rec
        assert lost[0] - 1 <= ep.length <= lost[0]
        steps = list(range(1, ep.length + 1))
        assert [info.get("t") for info in ep.infos] == [None, *steps]
        assert ep.observations[1:, 0].tolist() == steps


@pytest.mark.parametrize("record_infos", [False, True])
def test_a_close_inside_a_step_s_python_code_refuses_the_step_on_both_paths(
    record_infos, tmp_path, monkeypatch
):
    """A signal's handler may close the recording while the step runs Python code: for the C
    recorder, inside ``on_flags`` (called from C before it copies the step). It copied the
    step into the buffers close() had let go of: a crash. Both paths now refuse the step
    (the recording is closed) and keep the episode's steps before it."""

    def run(closing_call: int) -> tuple[list[str], Any]:
        calls: list[int] = []

        class Flag:  # (a flag whose truth the step asks for: Python code, as a handler's)
            def __bool__(self) -> bool:
                calls.append(1)
                if len(calls) == closing_call:
                    env.close()
                return True

        class Env(gymnasium.Env[Any, Any]):
            observation_space = gymnasium.spaces.Box(-1, 1, (4,), np.float32)
            action_space = gymnasium.spaces.Discrete(2)
            t = 0

            def reset(self, *, seed: Any = None, options: Any = None) -> Any:
                return np.zeros(4, np.float32), {"a": 1.0}

            def step(self, action: Any) -> Any:
                self.t += 1
                obs = np.full(4, self.t, np.float32)
                return obs, 1.0, Flag() if self.t == 3 else False, False, {"a": 1.0}

        d = tmp_path / f"rec{closing_call}-{steps.speedups is not None}"
        env = TraceRecordingWrapper(Env(), d, record_infos=record_infos)
        env.reset(seed=1)
        said = []
        for _ in range(4):
            try:
                env.step(1)
                said.append("ok")
            except gym_recording.RecordingClosedError:
                said.append("closed")
        return said, read(d)

    # (the C path asks the flag's truth twice: itself, then on_flags; the plain path once)
    accelerated = run(closing_call=2)
    with monkeypatch.context() as m:
        plain(m)
        assert run(closing_call=1) == accelerated
    said, episodes = accelerated
    assert said == ["ok", "ok", "closed", "closed"]
    ((*_, terminated, truncated, seed, index),) = episodes
    assert (terminated, truncated, seed, index) == (False, False, 1, 0)
