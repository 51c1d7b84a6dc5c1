"""Bad input is refused at the call that brings it, and nothing good is lost (issue 18).

Whatever the writer accepts, the reader reads: each refusal is a ``RecordingError`` at
``step``/``add_step``/``reset``/``add_reset``, the episode in progress is cut at its last
stored step, and the recording goes on. Run on the C step path and on the Python one.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

import gym_recording
from gym_recording import RecordingError, TraceRecording, TraceRecordingWrapper
from gym_recording.record import steps
from gym_recording.tools.verify import verify


@pytest.fixture(autouse=True, params=["c", "python"])
def step_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "python":
        monkeypatch.setattr(steps, "speedups", None)
    elif steps.speedups is None:
        pytest.skip("gym_recording._speedups is not built")
    return str(request.param)


class RewardEnv(gymnasium.Env[Any, Any]):
    """Steps return the rewards (and infos) it is given, in turn."""

    observation_space = spaces.Box(-1e9, 1e9, (2,), np.float64)
    action_space = spaces.Discrete(2)

    def __init__(self, rewards: list[Any], infos: list[Any] | None = None) -> None:
        self.rewards = list(rewards)
        self.infos = infos
        self.t = 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        return np.array([self.t, -1.0]), {}

    def step(self, action: Any) -> Any:
        reward = self.rewards[self.t % len(self.rewards)]
        info = self.infos[min(self.t, len(self.infos) - 1)] if self.infos else {}
        self.t += 1
        return np.array([self.t, 0.0]), reward, False, False, info


def _play(env: Any, episodes: int, steps_: int) -> list[str]:
    """Reset and step; return the errors met (the recording goes on after each)."""
    errors = []
    for _ in range(episodes):
        env.reset()
        for _ in range(steps_):
            try:
                env.step(0)
            except RecordingError as exc:
                errors.append(str(exc))
    return errors


def _check_readable(directory: Path) -> list[Any]:
    report = verify(directory)
    assert report.ok, report.lines()
    return list(gym_recording.load(directory))


@pytest.mark.parametrize(
    "bad",
    [np.array([1.0, 101.0]), np.array([0.5]), None, "1.5", 1 + 2j, np.array(["x"]), 10**400],
    ids=["vector", "one-element-array", "None", "string", "complex", "str-array", "huge-int"],
)
def test_a_reward_that_is_not_a_real_number_is_refused(tmp_path: Path, bad: Any) -> None:
    rewards = [0.0, 1.0, 2.0, bad] + [3.0] * 4
    env = TraceRecordingWrapper(RewardEnv(rewards), tmp_path)
    errors = _play(env, 2, 4)
    env.close()
    assert len(errors) == 1 and "expected the reward to be a real number" in errors[0]
    eps = _check_readable(tmp_path)
    # The episode is cut before the bad step; the next episode is whole and aligned.
    assert [ep.rewards.tolist() for ep in eps] == [[0.0, 1.0, 2.0], [3.0] * 4]
    assert eps[0].observations[:, 0].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_bools_ints_and_numpy_scalars_are_rewards(tmp_path: Path) -> None:
    """The decision, as documented in ``reward_value``: real numbers of any numeric type."""
    rewards = [True, 3, np.float32(0.5), np.int8(-2), np.array(1.5), False]
    env = TraceRecordingWrapper(RewardEnv(rewards), tmp_path)
    assert _play(env, 1, 6) == []
    env.close()
    (ep,) = _check_readable(tmp_path)
    assert ep.rewards.dtype == np.float64
    assert ep.rewards.tolist() == [1.0, 3.0, 0.5, -2.0, 1.5, 0.0]


def _recursive() -> Any:
    a: list[Any] = []
    a.append(a)
    return a


def _deep(n: int) -> Any:
    v: Any = 0
    for _ in range(n):
        v = [v]
    return v


def _object_arrays(n: int, ndim: int) -> Any:
    """``n`` object arrays of ``ndim`` dimensions, each the one element of the next."""
    v: Any = 0
    for _ in range(n):
        a = np.empty((1,) * ndim, dtype=object)
        a.reshape(-1)[0] = v
        v = a
    return v


@pytest.mark.parametrize(
    ("info", "says"),
    [
        ({"a": np.zeros(2, dtype="i4,f8")}, "no exact stored form"),
        ({"a": np.zeros(2, dtype="V8")}, "no exact stored form"),
        ({"a": np.array(["2024-01-01"], dtype="datetime64[D]")}, "no exact stored form"),
        ({"a": np.zeros(2, dtype=np.longdouble)}, "no exact stored form"),
        ({"a": np.longdouble(0.1)}, "no exact stored form"),
        ({"a": np.clongdouble(0.1)}, "no exact stored form"),
        ({"a": _deep(150)}, "nests deeper"),
        ({"a": _recursive()}, "nests deeper"),
        ({"a": _object_arrays(33, 31)}, "nests deeper"),  # (a list a dimension: 1,056 deep)
        ({"a": "\ud800"}, "lone surrogate"),
        ({"a": np.array(["x"] * 1000, dtype="<U1000")}, "object array"),
        ({"a": 10**5000}, "4300 characters"),
        ({"a": [1, {"b": -(10**5000)}]}, "4300 characters"),
        ({"a": -(10**4300 - 1)}, "4300 characters"),  # (4,300 digits and a sign)
        ({"a": np.ma.masked_array([1.0, 2.0], mask=[False, True])}, "masked array"),
    ],
    ids=[
        "structured",
        "void",
        "datetime",
        "longdouble",
        "longdouble-scalar",
        "clongdouble-scalar",
        "deep",
        "recursive",
        "object-arrays",
        "surrogate",
        "wide",
        "huge-int",
        "nested-huge-int",
        "negative-int-of-4300-digits",
        "masked",
    ],
)
def test_an_info_the_reader_would_refuse_is_refused_at_the_step(
    tmp_path: Path, info: Any, says: str
) -> None:
    if sys.platform != "linux" and np.dtype(np.longdouble) == np.dtype(np.float64):
        pytest.skip("longdouble is float64 here")
    infos = [{"a": 1.0}, {"a": 2.0}, info, {"a": 4.0}]  # (then {"a": 4.0} at every step)
    env = TraceRecordingWrapper(RewardEnv([1.0], infos), tmp_path, record_infos=True)
    errors = _play(env, 2, 4)
    env.close()
    assert len(errors) == 1 and says in errors[0] and "info" in errors[0]
    eps = _check_readable(tmp_path)
    assert [ep.length for ep in eps] == [2, 4]
    assert [i["a"] for i in eps[0].infos[1:]] == [1.0, 2.0]
    assert eps[0].infos[0] == {}  # (the reset info)


def test_an_int_past_what_json_readers_convert_is_refused_among_int_infos(
    tmp_path: Path,
) -> None:
    """Step infos of ints (kept as rows of values, as an Atari env's lives and frame
    numbers): one of more than 4,300 characters (digits and sign), which JSON readers do not
    convert, is refused at its step, and so is one as the reset options or seed; ints of
    4,300 digits are kept. (A negative one of 4,300 digits was kept and its batch lost.)"""
    big = 10**4300 - 1
    infos = [{"lives": 3, "frame": 1}, {"lives": 3, "frame": big}, {"lives": 2, "frame": 10**4300}]
    env = TraceRecordingWrapper(RewardEnv([1.0], infos), tmp_path, record_infos=True)
    errors = _play(env, 2, 3)
    with pytest.raises(RecordingError, match="4300 characters"):
        env.reset(options={"level": -(10**4300 - 1)})  # (4,300 digits and a sign)
    with pytest.raises(RecordingError, match="4300 characters"):
        env.recording.add_reset(np.zeros(2), seed=10**4300)
    env.close()
    assert len(errors) == 2 and all("4300 characters" in e for e in errors)
    eps = _check_readable(tmp_path)
    assert [ep.length for ep in eps] == [2, 0]
    assert eps[0].infos[1:] == infos[:2]


def test_an_info_of_non_finite_floats_is_counted_as_readers_count_it(tmp_path: Path) -> None:
    """A NaN is stored as a JSON object, which a reader counts at several times a number:
    2.8 million of them, counted as numbers, made a batch every reader refused."""
    with TraceRecording(tmp_path, record_infos=True) as rec:
        rec.add_reset(np.zeros(2))
        rec.add_step(0, np.ones(2), 1.0, info={"gap": 1.0}, terminated=True)
        rec.add_reset(np.zeros(2))
        with pytest.raises(RecordingError, match="MiB readers accept"):
            rec.add_step(0, np.ones(2), 1.0, info={"gaps": [float("nan")] * 2_800_000})
    eps = _check_readable(tmp_path)
    assert [ep.length for ep in eps] == [1, 0]


def test_a_memoryview_is_copied_at_the_call(tmp_path: Path) -> None:
    """An env that hands out a view of a buffer it then reuses: each step keeps its bytes."""
    buf = bytearray(b"0000")
    with TraceRecording(tmp_path, record_infos=True) as rec:
        rec.add_reset(b"0000", info={"m": memoryview(buf)})
        for t in range(1, 4):
            buf[:] = str(t).encode() * 4
            rec.add_step(0, memoryview(buf), 1.0, info={"m": memoryview(buf)})
    buf += b"more"  # (no view of it is kept: it may resize)
    (ep,) = _check_readable(tmp_path)
    want = [b"0000", b"1111", b"2222", b"3333"]
    assert list(ep.observations) == want and [i["m"] for i in ep.infos] == want


def test_an_object_array_of_the_same_strings_is_kept(tmp_path: Path) -> None:
    """What the refusal of a wide str array suggests works, and reads back exactly."""
    wide = np.array(["x"] * 1000, dtype="<U1000")
    with TraceRecording(tmp_path, record_infos=True) as rec:
        rec.add_reset(np.zeros(2))
        rec.add_step(0, np.ones(2), 1.0, info={"a": wide.astype(object)})
    (ep,) = _check_readable(tmp_path)
    got = ep.infos[1]["a"]
    assert got.dtype == object and got.tolist() == ["x"] * 1000


def test_a_huge_info_is_refused_and_the_batch_stays_readable(tmp_path: Path) -> None:
    big = "x" * (130 << 20)  # ~260 MiB once read back: over what readers accept
    with TraceRecording(tmp_path, record_infos=True) as rec:
        rec.add_reset(np.zeros(2))
        rec.add_step(0, np.ones(2), 1.0, info={"ok": 1}, terminated=True)
        rec.add_reset(np.zeros(2))
        with pytest.raises(RecordingError, match="MiB readers accept"):
            rec.add_step(0, np.ones(2), 1.0, info={"big": big})
        rec.add_reset(np.zeros(2))
        rec.add_step(1, np.ones(2), 2.0, info={"ok": 2})
    del big
    eps = _check_readable(tmp_path)
    assert [ep.length for ep in eps] == [1, 0, 1]


def test_infos_fill_batches_by_their_size(tmp_path: Path) -> None:
    """Infos count towards a batch: large ones make more, smaller batches, never one batch
    too large for readers."""
    batch_bytes = 200_000
    text = "y" * 10_000
    with TraceRecording(tmp_path, record_infos=True, batch_bytes=batch_bytes) as rec:
        rec.add_reset(np.zeros(2))
        for t in range(300):
            rec.add_step(0, np.ones(2), 1.0, info={"t": t, "text": text})
    sizes = [p.stat().st_size for p in tmp_path.glob("*.ep*.json")]
    assert len(sizes) >= 5
    assert max(sizes) < 4 * batch_bytes
    (ep,) = _check_readable(tmp_path)  # one episode, joined from its parts
    assert [i["t"] for i in ep.infos[1:]] == list(range(300))


def test_a_value_that_fits_nothing_in_an_observation_is_refused(tmp_path: Path) -> None:
    big = "z" * (130 << 20)
    with TraceRecording(tmp_path) as rec:
        rec.add_reset("a")
        rec.add_step(0, "b", 1.0)
        with pytest.raises(RecordingError, match="cannot record the observation"):
            rec.add_step(0, big, 1.0)
        with pytest.raises(RecordingError, match="masked array"):  # (its mask would be lost)
            rec.add_reset(np.ma.masked_array([1.0], mask=[True]))
        rec.add_reset("c")  # (the refused step cut its episode)
        rec.add_step(0, "d", 1.0)
    del big
    eps = _check_readable(tmp_path)
    assert [ep.observations for ep in eps] == [["a", "b"], ["c", "d"]]


def test_a_refused_value_that_does_not_fit_the_layout_leaves_the_layout_as_it_was(
    tmp_path: Path,
) -> None:
    """A float128 observation fits neither the float32 rows nor a per-step value: refused,
    and the next episodes' steps, through the wrapper's step recorder, are kept as before."""

    class Once(gymnasium.Env[Any, Any]):
        observation_space = spaces.Box(-1, 1, (3,), np.float32)
        action_space = spaces.Discrete(2)

        def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
            self.t = 0
            return np.zeros(3, np.float32), {}

        def step(self, action: Any) -> Any:
            self.t += 1
            bad = self.t == 2 and not hasattr(self, "refused")
            if bad:
                self.refused = True
            obs = np.zeros(3, np.longdouble) if bad else np.full(3, self.t, np.float32)
            return obs, 1.0, self.t == 5, False, {}

    if np.dtype(np.longdouble).itemsize <= 8:
        pytest.skip("long double is float64 here")
    env = TraceRecordingWrapper(Once(), tmp_path)
    errors = []
    for _ in range(3):
        env.reset()
        terminated = False
        while not terminated:
            try:
                terminated = env.step(0)[2]
            except RecordingError as exc:
                errors.append(str(exc))
    env.close()
    assert len(errors) == 1 and "float128" in errors[0]
    eps = _check_readable(tmp_path)
    assert [ep.length for ep in eps] == [1, 5, 5]
    for ep in eps[1:]:
        assert ep.observations.dtype == np.float32
        assert ep.observations.tolist() == [[t] * 3 for t in range(6)]


def test_arrays_of_as_many_dimensions_as_readers_accept_round_trip(tmp_path: Path) -> None:
    """FORMAT.md §9 allows an array 32 dimensions; a field's steps or an info column add one.

    Observations, actions and step infos of 32 dimensions are kept as one array a step,
    and read back exactly (stacked, 33); 33 dimensions are refused at the call. A space of
    33 dimensions is written as Unknown, which readers read as no space.
    """
    ones = (1,) * 32
    big = (1,) * 33

    class Env(gymnasium.Env[Any, Any]):
        observation_space = spaces.Box(-1, 1, big, np.float32)  # (declared, not returned)
        action_space = spaces.Box(-1, 1, ones, np.float32)

        def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
            return np.full(ones, 0.5, np.float32), {"r": np.zeros(ones)}

        def step(self, action: Any) -> Any:
            return np.full(ones, 1.5, np.float32), 1.0, False, False, {"a": np.ones(ones)}

    env = TraceRecordingWrapper(Env(), tmp_path, record_infos=True)
    env.reset()
    for _ in range(3):
        env.step(np.full(ones, 0.25, np.float32))
    with pytest.raises(RecordingError, match="33 dimensions has more than the 32"):
        env.recording.add_step(np.zeros(big, np.float32), np.zeros(ones, np.float32), 1.0)
    env.reset()
    with pytest.raises(RecordingError, match="33 dimensions"):
        env.recording.add_step(np.zeros(ones), np.zeros(ones), 1.0, info={"a": np.zeros(big)})
    env.close()
    first, second = _check_readable(tmp_path)
    assert first.length == 3 and second.length == 0
    obs, act = first.observations, first.actions
    assert obs.dtype == np.float32 and obs.shape == (4, *ones)
    assert obs.reshape(-1).tolist() == [0.5, 1.5, 1.5, 1.5]
    assert act.dtype == np.float32 and act.shape == (3, *ones)
    assert [i["a"].shape for i in first.infos[1:]] == [ones] * 3
    assert first.infos[0]["r"].shape == ones
    with gym_recording.load(tmp_path) as rec:
        assert rec.observation_space is None and rec.action_space == Env.action_space


class _FlagEnv(RewardEnv):
    """Its third step's ``terminated`` is an array of two flags (as a vector env's)."""

    def step(self, action: Any) -> Any:
        obs, reward, _, truncated, info = super().step(action)
        return (
            obs,
            reward,
            np.array([self.t == 3, False]) if self.t == 3 else False,
            truncated,
            info,
        )


def test_flags_of_no_truth_value_are_refused_before_the_step_is_kept(tmp_path: Path) -> None:
    env = TraceRecordingWrapper(_FlagEnv([1.0]), tmp_path)
    errors = _play(env, 1, 5)
    env.close()
    assert len(errors) == 1 and "terminated and truncated" in errors[0]
    (ep,) = _check_readable(tmp_path)
    assert (ep.length, ep.terminated) == (2, False)


class _Failing(Mapping[str, Any]):
    """A mapping whose items raise when read: the env's own value fails while copied."""

    def __iter__(self) -> Any:
        return iter(["a"])

    def __len__(self) -> int:
        return 1

    def __getitem__(self, key: str) -> Any:
        raise KeyError(key)


@pytest.mark.parametrize("where", ["observation", "action", "info", "options"])
def test_a_value_that_fails_while_copied_is_refused_and_its_step_is_not_kept(
    tmp_path: Path, where: str
) -> None:
    """Not only the values the format cannot hold: a value whose own code raises while it
    is copied is refused too, the step it came with is not kept half-stored, and the
    episode is cut at its last stored step."""
    with TraceRecording(tmp_path, record_infos=True) as rec:
        rec.add_reset({"a": np.zeros(2)})
        for t in (1, 2):
            rec.add_step(t, {"a": np.full(2, float(t))}, float(t), info={"t": t})
        bad = _Failing()
        with pytest.raises(RecordingError, match=r"copying it raised KeyError\('a'\)"):
            if where == "options":
                rec.add_reset({"a": np.zeros(2)}, options=bad)
            else:
                rec.add_step(
                    bad if where == "action" else 3,
                    bad if where == "observation" else {"a": np.full(2, 3.0)},
                    3.0,
                    info=bad if where == "info" else {"t": 3},
                )
        rec.add_reset({"a": np.zeros(2)})
        rec.add_step(4, {"a": np.full(2, 4.0)}, 4.0, info={"t": 4})
    eps = _check_readable(tmp_path)
    assert [np.asarray(ep.actions).tolist() for ep in eps] == [[1, 2], [4]]
    # (the refused observation sent the field per step: a dict of arrays, or a list of dicts)
    firsts = [
        o["a"][:, 0].tolist() if isinstance(o, dict) else [float(x["a"][0]) for x in o]
        for o in (ep.observations for ep in eps)
    ]
    assert firsts == [[0.0, 1.0, 2.0], [0.0, 4.0]]
    assert [ep.rewards.tolist() for ep in eps] == [[1.0, 2.0], [4.0]]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_cannot_record_into_its_parents_writer(tmp_path: Path) -> None:
    """The child's steps are refused (they would mix with the parent's under one writer id);
    the parent's episodes are intact."""
    rec = TraceRecording(tmp_path)
    rec.add_reset(np.zeros(2))
    rec.add_step(0, np.ones(2), 1.0)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(r)
        code = b"x"
        try:
            rec.add_step(7, np.ones(2), 7.0)
        except RecordingError as exc:
            code = b"r" if "fork" in str(exc) else b"m"
        os.write(w, code)
        os._exit(0)
    os.close(w)
    got = os.read(r, 1)
    os.close(r)
    os.waitpid(pid, 0)
    assert got == b"r"
    rec.add_step(3, np.ones(2), 3.0)
    rec.close()
    (ep,) = _check_readable(tmp_path)
    assert ep.actions.tolist() == [0, 3] and ep.rewards.tolist() == [1.0, 3.0]


@pytest.mark.parametrize(
    "head",
    [{"metadata": {"note": "caf\udce9"}}, {"env_id": "Caf\udce9-v0"}, {"metadata": {"\udce9": 1}}],
)
def test_a_head_holding_a_lone_surrogate_is_refused_before_anything_is_made(
    tmp_path: Path, head: dict[str, Any]
) -> None:
    """FORMAT.md §2: no writer writes a lone surrogate; refused at the constructor (before,
    every batch's manifest failed to encode, and the episodes were dropped)."""
    with pytest.raises(RecordingError, match="lone surrogate"):
        TraceRecording(tmp_path / "rec", **head)
    assert not (tmp_path / "rec").exists()
    with pytest.raises(TypeError, match="expected metadata to be a dict"):
        TraceRecording(tmp_path / "rec", metadata=[1])  # type: ignore[arg-type]
    assert not (tmp_path / "rec").exists()


def _deep(depth: int, leaf: Any) -> Any:
    for _ in range(depth):
        leaf = [leaf]
    return leaf


@pytest.mark.parametrize(
    "bad",
    [
        {"ok\udc80": np.zeros(2)},  # (a Dict key JSON cannot hold, in the first observation)
        _deep(101, 1),  # (the reader counts the field's own level: 102)
        {"a": _deep(100, 1)},  # (one more for the Dict around it)
        _deep(100, float("nan")),  # (NaN is stored as a JSON object: one level more)
        {"a": _deep(98, np.complex128(1 + 2j))},  # (a numpy scalar holding a complex: two)
    ],
    ids=["surrogate-key", "list-101", "dict-list-100", "list-100-nan", "dict-list-98-complex"],
)
def test_an_observation_the_reader_would_refuse_is_refused_at_the_call(
    tmp_path: Path, bad: Any
) -> None:
    """What no reader could read back is refused by the reset that brings it (the writer
    accepted these, then could not write, or wrote a batch the reader refused whole); the
    episodes before it are kept. The same values nested one level less are recorded."""
    with TraceRecording(tmp_path / "t", batch_bytes=1) as rec:
        rec.add_reset(np.zeros(2), seed=0)
        rec.add_step(0, np.ones(2), 1.0, terminated=True)
    with TraceRecording(tmp_path / "t") as rec:
        with pytest.raises(RecordingError, match="reset observation"):
            rec.add_reset(bad, seed=1)
        rec.add_reset(_deep(100, 1) if isinstance(bad, list) else {"a": _deep(99, 1)}, seed=2)
        rec.add_step(0, _deep(100, 2) if isinstance(bad, list) else {"a": _deep(99, 2)}, 1.0)
    with gym_recording.load(tmp_path / "t") as r:
        assert [(ep.seed, ep.length) for ep in r] == [(0, 1), (2, 1)]


class _Handle:
    """An object whose repr fails once its resource is gone (and that refuses copying)."""

    closed = False

    def __repr__(self) -> str:
        if _Handle.closed:
            raise RuntimeError("handle is closed")
        return "Handle()"

    def __deepcopy__(self, memo: Any) -> _Handle:
        return self


def test_a_value_whose_repr_fails_by_its_write_is_recorded_as_that(tmp_path: Path) -> None:
    """An object with no JSON form is stored as its ``repr()``, taken at write time: one that
    raises then is stored as what went wrong, and its episode (and the batch) are written."""
    rec = TraceRecording(tmp_path / "t")
    rec.add_reset(_Handle())
    rec.add_step(0, _Handle(), 1.0, terminated=True)
    _Handle.closed = True
    try:
        rec.close()
    finally:
        _Handle.closed = False
    with gym_recording.load(tmp_path / "t") as r:
        (ep,) = r
        assert (
            ep.observations
            == ["<_Handle object; repr() raised RuntimeError('handle is closed')>"] * 2
        )


class _Label(str):
    """A str whose own ``__str__`` fails (a lazily translated text, say)."""

    def __str__(self) -> str:
        raise RuntimeError("no translation loaded")


def test_a_str_subclass_is_recorded_as_its_text(tmp_path: Path) -> None:
    """Its text is stored, not what its ``__str__`` makes (which raised as the batch was
    written, and kept the batch from being written)."""
    with TraceRecording(tmp_path / "t", record_infos=True) as rec:
        rec.add_reset(_Label("start"), options={"label": _Label("o")}, info={"l": _Label("i")})
        rec.add_step(0, _Label("next"), 1.0, terminated=True)
    with gym_recording.load(tmp_path / "t") as r:
        (ep,) = r
        assert ep.observations == ["start", "next"] and ep.options == {"label": "o"}
        assert ep.infos[0] == {"l": "i"} and type(ep.observations[0]) is str


def test_a_batch_that_fails_to_encode_is_kept_and_written_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Encoding a batch may fail for want of memory: it raises a WriteError, no manifest on
    disk lists the batch meanwhile (the episodes written before stay readable), and it is
    written once encoding works again. (Patches the writer module: no public way makes an
    encoding fail on demand.)"""
    from gym_recording.record import writer

    real, failing = writer.finish_batch, [False]

    def flaky(*args: Any, **kwargs: Any) -> Any:
        if failing[0]:
            raise MemoryError("simulated")
        return real(*args, **kwargs)

    monkeypatch.setattr(writer, "finish_batch", flaky)
    rec = TraceRecording(tmp_path / "t", batch_bytes=1)  # (a batch an episode)

    def episode(e: int) -> None:
        rec.add_reset(np.full(2, e, np.float32), seed=e)
        rec.add_step(0, np.full(2, e, np.float32), 1.0, terminated=True)
        rec.end_episode()

    episode(0)
    failing[0] = True
    errors = []
    for e in range(1, 4):
        try:
            episode(e)
        except gym_recording.WriteError as exc:
            errors.append(exc)
    assert errors and "could not encode or compress the batch" in str(errors[0])
    with gym_recording.load(tmp_path / "t") as r:
        assert [ep.seed for ep in r] == [0]
    failing[0] = False
    rec.close()
    with gym_recording.load(tmp_path / "t") as r:
        assert [ep.seed for ep in r] == [0, 1, 2, 3]
    assert verify(tmp_path / "t").ok


_OUT_OF_MEMORY = """
import os, resource, sys
import gymnasium, numpy as np
from gymnasium import spaces
import gym_recording
from gym_recording import RecordingError, TraceRecordingWrapper
from gym_recording.record import steps
if sys.argv[2] == "python":
    steps.speedups = None

class Env(gymnasium.Env):  # (a step allocates nothing but its tuple: memory runs out in
    observation_space = spaces.Box(0, 255, (4096,), np.uint8)  # the recorder's buffer)
    action_space = spaces.Discrete(10)
    obs = np.zeros(4096, np.uint8)
    result = (obs, 1.0, False, False, {})

    def reset(self, *, seed=None, options=None):
        return self.obs, {}

    def step(self, action):
        return self.result

env = TraceRecordingWrapper(Env(), sys.argv[1], batch_bytes=256 << 20)
env.reset(seed=1)
for _ in range(2048):  # (8 MiB of observations: the buffer's next growth takes 1 MiB more)
    env.step(3)
soft, hard = resource.getrlimit(resource.RLIMIT_AS)
used = int(open("/proc/self/statm").read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
resource.setrlimit(resource.RLIMIT_AS, (used + (512 << 10), hard))
try:
    for _ in range(4096):
        env.step(5)
    print("stored")
except RecordingError as exc:
    print("refused:", exc)
finally:
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
env.reset(seed=2)
env.step(7)
env.close()
"""


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS and /proc are Linux's")
def test_a_step_out_of_memory_is_taken_back_whole(tmp_path: Path, step_path: str) -> None:
    """Memory runs out as a step's observation is stored, after its action: the step is
    refused (a RecordingError, as any value that cannot be stored), taken back whole, and
    the next episode's action is its own. (The C step raised MemoryError and kept the
    action: every later step of the batch was recorded with the action before it.)"""
    import subprocess

    got = subprocess.run(
        [sys.executable, "-c", _OUT_OF_MEMORY, str(tmp_path / "t"), step_path],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert got.returncode == 0, got.stderr[-2000:]
    assert "refused: cannot record the" in got.stdout and "MemoryError" in got.stdout
    with gym_recording.load(tmp_path / "t") as r:
        assert [ep.seed for ep in r] == [1, 2]
        first, second = r[0].actions.tolist(), r[1].actions.tolist()
        assert first[:2048] == [3] * 2048 and set(first[2048:]) <= {5}
        assert second == [7]
    assert verify(tmp_path / "t").ok


@pytest.mark.parametrize("value", [-(10**4300 - 1), 10**4300], ids=["negative", "4301-digits"])
def test_metadata_with_an_int_no_reader_converts_is_refused_when_given(
    tmp_path: Path, value: int
) -> None:
    """An int of 4,300 digits and a sign (msgspec's limit counts the sign), or of 4,301
    digits, in the metadata is refused at the constructor, in the library's words (the first
    was written, and its manifest refused: every episode of the writer lost)."""
    with pytest.raises(RecordingError, match=r"expected metadata to be plain JSON.*4300") as e:
        TraceRecording(tmp_path, metadata={"offset": value})
    assert "set_int_max_str_digits" not in str(e.value)  # (Python's advice would not help)


@pytest.mark.parametrize("fps", [2_000_000, 10**400, float("nan"), 0])
def test_a_frame_rate_out_of_the_format_is_refused_with_its_range(
    tmp_path: Path, fps: float
) -> None:
    """FORMAT.md §3 bounds ``render_fps`` to (0, 1e6]; the message gives that range (it said
    "positive" of 2,000,000, and an int past a float's range raised ``OverflowError``). An
    env declaring such a rate records without one."""
    with pytest.raises(ValueError, match=r"expected render_fps to be a number in \(0, 1e6\]"):
        TraceRecording(tmp_path, render_fps=fps)
    env = RewardEnv([1.0])
    env.metadata = {"render_fps": fps}
    with TraceRecordingWrapper(env, tmp_path / "env") as wrapped:
        wrapped.reset(seed=0)
    with gym_recording.load(tmp_path / "env") as rec:
        assert rec.writers[0].render_fps is None
