"""The per-step hot path: the wrapper's ``step``, through the recording's step recorder.

Every test runs twice: with the C step recorder (and the C column views), and with the plain
Python code. Both must record what the plain methods promise: the same episodes for the same
steps, across layout changes, fallbacks, episodes the trigger skips, failed resets and close.
``tests/test_accelerated.py`` compares the two paths' files over the whole corpus.
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

import gym_recording
from gym_recording import TraceRecording
from gym_recording._accel import speedups
from gym_recording.format.arrays import BatchBlob
from gym_recording.record import steps
from gym_recording.wrappers import TraceRecordingWrapper
from tests.conftest import (
    ACTION_SPACES,
    OBSERVATION_SPACES,
    SpaceEnv,
    Trace,
    assert_episode_exact,
    run_episodes,
)


def plain_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """Switch both accelerated pieces off: every step and every batch takes the Python code."""
    monkeypatch.setattr(steps, "speedups", None)
    monkeypatch.setattr(BatchBlob, "_views_c", None)


@pytest.fixture(autouse=True, params=["c", "python"])
def hot_path(request, monkeypatch):
    """Run each test with the accelerated pieces, then with the plain Python ones."""
    if request.param == "c":
        if speedups is None:
            pytest.skip("gym_recording._speedups is not built (no C compiler at install?)")
    else:
        plain_paths(monkeypatch)
    return request.param


def _recorder(env: TraceRecordingWrapper[Any, Any]) -> Any:
    """The step recorder of the wrapper's step (there is one per wrapper)."""
    (recorder,) = env.recording._recorders
    return recorder


def test_the_recorder_in_use_is_the_one_chosen(hot_path, tmp_path):
    with TraceRecordingWrapper(gymnasium.make("CartPole-v1"), tmp_path) as env:
        env.reset(seed=0)
        env.step(0)
        kind = type(_recorder(env)).__name__
        assert kind == ("StepRecorder" if hot_path == "c" else "PlainStepRecorder")
        if hot_path == "c":
            assert _recorder(env).fast == 1  # Box obs, Discrete action: stored in C


def _load_all(directory: Any) -> list[Any]:
    with gym_recording.load(directory) as rec:
        return list(rec)


@pytest.mark.parametrize("obs_name", sorted(OBSERVATION_SPACES))
@pytest.mark.parametrize("act_name", ["discrete", "box_f32", "dict", "text"])
def test_wrapper_step_and_add_step_record_the_same(obs_name, act_name, tmp_path):
    """The wrapper's step and explicit add_step calls give equal episodes."""
    obs_space, act_space = OBSERVATION_SPACES[obs_name], ACTION_SPACES[act_name]
    with TraceRecordingWrapper(SpaceEnv(obs_space, act_space), tmp_path / "fused") as env:
        traces = run_episodes(env, 3, seed=5)
    with TraceRecording(tmp_path / "manual") as rec:
        for t in traces:
            rec.add_reset(t.observations[0], seed=t.seed)
            for i, a in enumerate(t.actions):
                last = i == len(t.actions) - 1
                rec.add_step(
                    a,
                    t.observations[i + 1],
                    t.rewards[i],
                    t.terminated and last,
                    t.truncated and last,
                )
    fused, manual = _load_all(tmp_path / "fused"), _load_all(tmp_path / "manual")
    assert len(fused) == len(manual) == len(traces)
    for ep_f, ep_m, t in zip(fused, manual, traces, strict=True):
        assert_episode_exact(ep_f, t)
        assert_episode_exact(ep_m, t)


class _CountingEnv(gymnasium.Env[Any, Any]):
    """Episodes of ``length`` steps; subclasses say what ``_obs`` and ``_reward`` are at step t."""

    length = 6

    def __init__(self) -> None:
        self.t = 0

    def _obs(self) -> Any:
        raise NotImplementedError

    def _reward(self) -> Any:
        return float(self.t)

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any) -> Any:
        self.t += 1
        done = self.t >= self.length
        return self._obs(), self._reward(), np.bool_(done), False, {}


class _ShiftingEnv(_CountingEnv):
    """float32[3] observations, except float64 at the steps listed in ``odd_steps``."""

    def __init__(self, odd_steps: set[int]) -> None:
        super().__init__()
        self.observation_space = spaces.Box(-1.0, 1.0, (3,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.odd_steps = odd_steps
        self._buf = np.zeros(3, np.float32)  # reused, as many envs do

    def _obs(self) -> np.ndarray:
        self._buf[:] = self.t
        if self.t in self.odd_steps:
            return self._buf.astype(np.float64)
        return self._buf


@pytest.mark.parametrize("held_after", [0, 1, 2])
def test_step_held_across_a_fallback_keeps_recording_exactly(held_after, tmp_path):
    """``step = env.step`` held from before the first step, or after it: stays correct."""
    env = TraceRecordingWrapper(_ShiftingEnv(odd_steps={3}), tmp_path)
    obs, _ = env.reset(seed=1)
    kept = [copy.deepcopy(obs)]
    step = env.step  # at 0: the action layout is still unknown
    for t in range(6):
        if t == held_after:
            step = env.step
        obs, *_ = step(1)
        kept.append(copy.deepcopy(obs))
    env.close()
    (ep,) = _load_all(tmp_path)
    # A float64 observation among float32 ones: the field falls back to per-step values.
    assert isinstance(ep.observations, list)
    assert len(ep.observations) == 7
    for got, want in zip(ep.observations, kept, strict=True):
        assert got.dtype == want.dtype
        assert got.tobytes() == want.tobytes()
    assert ep.actions.tolist() == [1] * 6
    assert ep.terminated


@pytest.mark.parametrize("held_after", [0, 1, 3])
def test_add_step_held_across_a_fallback_loses_nothing(held_after, tmp_path):
    """A caller holding ``rec.add_step`` across a layout fallback: every step is kept."""
    rec = TraceRecording(tmp_path)
    rec.add_reset(np.zeros(2, np.float32))
    values = []
    add = rec.add_step
    for t in range(8):
        if t == held_after:
            add = rec.add_step  # held from here on, the layout known (or not) by then
        obs = np.full(2, t, np.float64 if t == 4 else np.float32)
        values.append(obs)
        add(t % 2, obs, 0.5)
    rec.close()
    (ep,) = _load_all(tmp_path)
    assert len(ep.observations) == 9
    for got, want in zip(ep.observations[1:], values, strict=True):
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    assert ep.actions.tolist() == [t % 2 for t in range(8)]


def test_step_held_across_skipped_episodes_and_close(tmp_path):
    """A held ``env.step`` records only the episodes the trigger chose, and nothing after close."""
    env = TraceRecordingWrapper(
        gymnasium.make("CartPole-v1"), tmp_path, episode_trigger=lambda i: i % 2 == 0
    )
    env.reset(seed=0)
    step = env.step
    lengths = []
    for e in range(4):
        if e:
            env.reset(seed=e)
        n = 0
        for _ in range(5):
            step(e % 2)
            n += 1
        lengths.append(n)
    env.close()
    eps = _load_all(tmp_path)
    assert [ep.length for ep in eps] == [5, 5]
    assert [ep.seed for ep in eps] == [0, 2]
    assert [ep.actions.tolist() for ep in eps] == [[0] * 5, [0] * 5]


def test_step_of_a_closed_recording_is_refused(tmp_path):
    """Recording closed under the wrapper: the wrapper's step says so, as add_step does."""
    env = TraceRecordingWrapper(gymnasium.make("CartPole-v1"), tmp_path)
    env.reset(seed=0)
    env.step(0)
    env.recording.close()
    # The wrapper still thinks it records: the step reaches the recording, which refuses it.
    with pytest.raises(gym_recording.RecordingClosedError):
        env.step(0)
    env.close()


def test_wrapper_step_copies_reused_buffers(tmp_path):
    """An env that mutates one buffer in place: each step's values are kept, not the last."""
    env = TraceRecordingWrapper(_ShiftingEnv(odd_steps=set()), tmp_path)
    run: list[Trace] = run_episodes(env, 2, seed=0)
    env.close()
    for ep, t in zip(_load_all(tmp_path), run, strict=True):
        assert_episode_exact(ep, t)
        assert ep.observations[:, 0].tolist() == list(range(7))


def test_box_and_discrete_batches_are_written_as_three_columns(tmp_path):
    """CartPole's batch blob holds all actions, then all observations, then all rewards."""
    import json

    with TraceRecordingWrapper(gymnasium.make("CartPole-v1"), tmp_path) as env:
        traces = run_episodes(env, 3, seed=0)
    (batch,) = tmp_path.glob("*.ep*.json")
    eps = json.loads(batch.read_text())["episodes"]
    n_act = [t.length for t in traces]
    total = sum(n_act)
    assert [e["actions"]["npyoff"] for e in eps] == [8 * sum(n_act[:i]) for i in range(3)]
    obs_base = 8 * total
    assert eps[0]["observations"]["npyoff"] == obs_base
    assert eps[0]["rewards"]["npyoff"] == obs_base + 16 * (total + 3)
    for ep, t in zip(_load_all(tmp_path), traces, strict=True):
        assert_episode_exact(ep, t)


class _OddValuesEnv(_CountingEnv):
    """float32[2, 3] observations, sometimes strided, big-endian or Fortran-ordered."""

    length = 7

    def __init__(self) -> None:
        super().__init__()
        self.observation_space = spaces.Box(-9.0, 9.0, (2, 3), np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float64)

    def _obs(self) -> Any:
        base = np.arange(6, dtype=np.float32).reshape(2, 3) + self.t
        kind = self.t % 5
        if kind == 1:  # a strided view of the right dtype and shape
            return np.repeat(base, 2, axis=1)[:, ::2]
        if kind == 2:
            return base.astype(">f4")  # equal values, other byte order: another dtype
        if kind == 3:
            return base.T.copy().T  # Fortran order
        return base

    def _reward(self) -> Any:
        return np.float32(self.t / 4)  # a numpy reward


def test_odd_observations_and_numpy_rewards_round_trip(tmp_path):
    env = TraceRecordingWrapper(_OddValuesEnv(), tmp_path)
    traces = run_episodes(env, 2, seed=3)
    env.close()
    eps = _load_all(tmp_path)
    assert [e.length for e in eps] == [7, 7]
    for ep, t in zip(eps, traces, strict=True):
        # The big-endian observation sends the field to per-step values: each keeps its dtype.
        assert len(ep.observations) == 8
        for got, want in zip(ep.observations, t.observations, strict=True):
            want = np.ascontiguousarray(want, dtype=want.dtype.newbyteorder("<"))  # FORMAT §6.1
            assert got.dtype == want.dtype and got.shape == want.shape
            assert got.tobytes() == want.tobytes()
        assert ep.actions.dtype == np.float64 and ep.actions.shape == (7, 2)
        assert ep.rewards.tolist() == [float(np.float32(i / 4)) for i in range(1, 8)]
        assert ep.terminated and not ep.truncated


def test_strided_observations_in_a_box_layout(tmp_path):
    """Views that are not C-contiguous keep the Box layout (one array) and exact values."""

    class StridedEnv(_OddValuesEnv):
        def _obs(self) -> Any:
            base = np.arange(6, dtype=np.float32).reshape(2, 3) + self.t
            return np.repeat(base, 2, axis=1)[:, ::2] if self.t % 2 else base

    env = TraceRecordingWrapper(StridedEnv(), tmp_path)
    traces = run_episodes(env, 1, seed=0)
    env.close()
    (ep,) = _load_all(tmp_path)
    assert_episode_exact(ep, traces[0])


def test_keyword_action_and_exceptions_pass_through(tmp_path):
    class Boom(Exception):
        pass

    class RaisingEnv(_OddValuesEnv):
        def step(self, action: Any) -> Any:
            if self.t == 2:
                raise Boom("env failed")
            return super().step(action)

    env = TraceRecordingWrapper(RaisingEnv(), tmp_path)
    env.reset(seed=0)
    env.step(action=np.zeros(2))
    env.step(np.ones(2))
    with pytest.raises(Boom):
        env.step(np.ones(2))
    env.close()
    (ep,) = _load_all(tmp_path)
    assert ep.length == 2
    assert ep.actions.tolist() == [[0.0, 0.0], [1.0, 1.0]]


class _Infos(gymnasium.Wrapper[Any, Any, Any, Any]):
    """CartPole whose step infos hold the step's index and ``pad`` (a string), and, from the
    step ``bad`` on, a value no reader could read back (a datetime64 array)."""

    def __init__(self, bad: int = -1, pad: str = "") -> None:
        super().__init__(gymnasium.make("CartPole-v1"))
        self.bad, self.pad, self.t = bad, pad, 0

    def reset(self, **kwargs: Any) -> Any:
        self.t = 0
        return super().reset(**kwargs)

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, _ = super().step(action)
        self.t += 1
        info: dict[str, Any] = {"t": self.t, "x": float(obs[0]), "pad": self.pad}
        if self.t == self.bad:
            info["when"] = np.array(["2020-01-01"], dtype="datetime64[D]")
        return obs, reward, terminated, truncated, info


def test_record_infos_keeps_infos_with_either_step(hot_path, tmp_path):
    env = TraceRecordingWrapper(_Infos(), tmp_path, record_infos=True)
    _, first = env.reset(seed=0)
    infos = [first] + [env.step(1)[4] for _ in range(3)]
    if hot_path == "c":
        assert _recorder(env).fast == 1  # the C recorder stores the steps, and keeps their infos
    env.close()
    (ep,) = _load_all(tmp_path)
    assert ep.infos == infos


class _Numbers(gymnasium.Wrapper[Any, Any, Any, Any]):
    """CartPole whose step infos are numbers, as a MuJoCo env's are."""

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, _ = super().step(action)
        return obs, reward, terminated, truncated, {"x": obs[0], "v": float(obs[1]), "ok": True}


@pytest.fixture
def keep_info_calls(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The infos the recording's Python code keeps (the C step keeps the others itself).

    What makes infos cheap is not visible through the public API, hence the count of calls
    to the recording's private ``_keep_info``.
    """
    calls: list[Any] = []
    keep = TraceRecording._keep_info

    def counted(self: TraceRecording, info: Any) -> None:
        calls.append(info)
        keep(self, info)

    monkeypatch.setattr(TraceRecording, "_keep_info", counted)
    return calls


def test_numeric_infos_go_to_their_rows_in_the_c_step(hot_path, tmp_path, keep_info_calls):
    """The C step appends numeric infos to their episode's rows itself: the Python code takes
    only the first (which starts the rows)."""
    calls = keep_info_calls
    env = TraceRecordingWrapper(
        _Numbers(gymnasium.make("CartPole-v1")), tmp_path, record_infos=True
    )
    _, first = env.reset(seed=0)
    infos = [first] + [env.step(t % 2)[4] for t in range(8)]
    env.close()
    assert len(calls) == (1 if hot_path == "c" else 8)
    (ep,) = _load_all(tmp_path)
    assert len(ep.infos) == 9
    for got, want in zip(ep.infos, infos, strict=True):
        assert list(got) == list(want)
        assert all(type(got[k]) is type(want[k]) and got[k] == want[k] for k in want)


def test_empty_infos_go_to_their_rows_in_the_c_step(hot_path, tmp_path, keep_info_calls):
    """A classic-control env's ``{}`` step infos are rows of no keys, which the C step keeps
    itself; RecordEpisodeStatistics' last one (``{"episode": ...}``) takes the Python code.
    Every info reads back equal, the last step's ``episode`` included."""
    calls = keep_info_calls
    env = gymnasium.wrappers.RecordEpisodeStatistics(gymnasium.make("CartPole-v1"))
    env = TraceRecordingWrapper(env, tmp_path, record_infos=True)
    infos = [env.reset(seed=0)[1]]
    done = False
    while not done:
        *_, terminated, truncated, info = env.step(0)
        infos.append(info)
        done = terminated or truncated
    env.close()
    assert infos[1] == {} and "episode" in infos[-1] and len(infos) > 5
    assert len(calls) == (2 if hot_path == "c" else len(infos) - 1)
    (ep,) = _load_all(tmp_path)
    assert ep.infos == infos and list(ep.infos[-1]) == ["episode"]


def test_an_info_refused_cuts_the_episode_before_its_step(hot_path, tmp_path):
    """Either path refuses the step whose info cannot be stored, and keeps the steps before."""
    env = TraceRecordingWrapper(_Infos(bad=4), tmp_path, record_infos=True)
    _, first = env.reset(seed=0)
    infos = [first] + [env.step(1)[4] for _ in range(3)]
    with pytest.raises(gym_recording.RecordingError, match=r"the step's info.*datetime64"):
        env.step(1)
    env.step(0)  # (not recorded: the episode was cut)
    _, again = env.reset(seed=1)
    infos2 = [again, env.step(0)[4]]
    env.close()
    cut, second = _load_all(tmp_path)
    assert cut.length == 3 and cut.actions.tolist() == [1, 1, 1]
    assert cut.observations.shape == (4, 4) and cut.infos == infos
    assert second.infos == infos2 and second.seed == 1


def test_infos_over_the_value_budget_write_batches_mid_episode(hot_path, tmp_path):
    """Infos take more of a batch than its budget: either path writes the batch at the next
    step, and the episode reads back whole, in parts."""
    env = TraceRecordingWrapper(
        _Infos(pad="x" * 20_000), tmp_path, record_infos=True, batch_bytes=100_000
    )
    _, first = env.reset(seed=0)
    infos = [first] + [env.step(t % 2)[4] for t in range(20)]
    assert env.recording.batch_count > 3  # (written mid-episode)
    env.close()
    (ep,) = _load_all(tmp_path)
    assert ep.length == 20 and ep.infos == infos


class _NumericInfos(gymnasium.Wrapper[Any, Any, Any, Any]):
    """CartPole whose step infos are a MuJoCo env's: numpy scalars under the same keys."""

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, _ = super().step(action)
        x = np.float64(obs[0])
        info = {"x_position": x, "x_velocity": x * 2, "reward_run": x * 3, "cost": np.float32(1)}
        return obs, reward, terminated, truncated, info


def test_numeric_infos_count_against_the_batch_as_info_columns(hot_path, tmp_path):
    """Step infos of numbers count what they take as info columns (FORMAT.md §4), not as
    JSON: 100 steps of four numpy scalars (about 5 KB a step as JSON, 32 B as columns) fit
    one batch of 100 KB, and read back equal, to the dtype."""
    env = TraceRecordingWrapper(
        _NumericInfos(gymnasium.make("CartPole-v1", max_episode_steps=100)),
        tmp_path,
        record_infos=True,
        batch_bytes=100_000,
    )
    env.reset(seed=0)
    infos = []
    for t in range(100):
        _, _, terminated, truncated, info = env.step(0 if t % 3 else 1)
        infos.append(info)
        if terminated or truncated:
            env.reset()  # (CartPole fell: another episode of the same batch)
    assert env.recording.batch_count == 0  # (all still buffered: one batch)
    env.close()
    got = [info for ep in _load_all(tmp_path) for info in ep.infos[1:]]
    assert got == infos
    assert [type(v) for i in got for v in i.values()] == [
        type(v) for i in infos for v in i.values()
    ]


def test_infos_are_bounded_as_json_whatever_they_take_as_columns():
    """What readers accept bounds a batch's infos as JSON (FORMAT.md §9), even where the
    batch's own size, counting them as info columns, would take more: a recording's
    counter, reached here directly (256 MiB of infos is too much for a test)."""
    from gym_recording.format.batch import Span
    from gym_recording.format.limits import MAX_VALUE_COST
    from gym_recording.record.infos import Values

    values = Values(batch_bytes=MAX_VALUE_COST)
    span = Span(0, 0, 0, 0, {}, None, [{}])
    info = {f"key_{i}": np.float64(i) for i in range(1000)}  # (about 1.1 MB as JSON)
    steps = 0
    while not values.full:
        values.keep_step_info(span, info)
        steps += 1
    assert 200 < steps < 300  # (as columns, 64 KB a step: 4,000 steps)
    assert span.info_rows is not None and len(span.info_rows) == steps
    values.clear()
    assert not values.full


def test_wrapper_is_freed_after_close(tmp_path):
    """The step recorder references the wrapper and the recording: a cycle the GC collects."""
    import gc
    import weakref

    env = TraceRecordingWrapper(gymnasium.make("CartPole-v1"), tmp_path)
    env.reset(seed=0)
    env.step(0)
    env.close()
    ref = weakref.ref(env)
    del env
    gc.collect()
    assert ref() is None


class _FailingReset(gymnasium.Wrapper[Any, Any, Any, Any]):
    """An env whose reset raises while ``fail`` is set."""

    fail = False

    def reset(self, **kwargs: Any) -> Any:
        if self.fail:
            raise ValueError("reset failed")
        return super().reset(**kwargs)


def test_a_step_after_a_failed_reset_is_not_recorded(hot_path, tmp_path):
    """The env's reset raises: with no episode open the wrapper's step records nothing, and
    the next reset records as before."""
    inner = _FailingReset(gymnasium.make("CartPole-v1"))
    env = TraceRecordingWrapper(inner, tmp_path)
    env.reset(seed=0)
    env.step(0)
    env.step(1)
    inner.fail = True
    with pytest.raises(ValueError, match="reset failed"):
        env.reset()
    if hot_path == "c":
        assert _recorder(env).room == -1  # the C recorder sees no open episode
    buffered = env.recording.steps
    env.step(0)  # not recorded: nothing is buffered
    assert env.recording.steps == buffered
    inner.fail = False
    env.reset(seed=1)
    env.step(1)
    if hot_path == "c":
        assert _recorder(env).fast == 1  # still in C's layout: the C recorder took the steps
    env.close()
    episodes = _load_all(tmp_path)
    assert [(ep.length, ep.seed) for ep in episodes] == [(2, 0), (1, 1)]
    assert episodes[0].actions.tolist() == [0, 1] and episodes[1].actions.tolist() == [1]
    assert episodes[0].observations.shape == (3, 4) and episodes[1].observations.shape == (2, 4)
    first_obs, _ = gymnasium.make("CartPole-v1").reset(seed=1)
    np.testing.assert_array_equal(episodes[1].observations[0], first_obs)


def test_batches_with_infos_of_no_keys_aim_at_batch_bytes_as_without(hot_path, tmp_path):
    """CartPole's step infos are {}: as info columns they take a few bytes a step, so batches
    with them hold about as many steps as without (they held a ninth as many, counting each
    {} as the 512 bytes of a dict a reader rebuilds)."""
    steps: dict[bool, list[int]] = {}
    for infos in (False, True):
        d = tmp_path / str(infos)
        env = TraceRecordingWrapper(
            gymnasium.make("CartPole-v1"), d, record_infos=infos, batch_bytes=50_000
        )
        env.reset(seed=0)
        for t in range(6_000):
            _, _, terminated, truncated, _ = env.step(t % 2)
            if terminated or truncated:
                env.reset()
        env.close()
        with gym_recording.load(d) as rec:
            steps[infos] = [b.steps for b in rec.writers[0].batches]
    assert len(steps[True]) <= 1.3 * len(steps[False]), steps
