"""``TraceRecordingWrapper``: the API it passes through, what it records, its lifetime."""

from __future__ import annotations

import datetime
import inspect
import itertools
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import warnings
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
from conftest import (
    ACTION_SPACES,
    OBSERVATION_SPACES,
    LegacyEnv,
    SpaceEnv,
    Trace,
    assert_episode_exact,
    assert_value_exact,
    manifest_of,
    run_episodes,
)

import gym_recording
from gym_recording import RecordingClosedError, TraceRecording
from gym_recording.wrappers import TraceRecordingVectorWrapper, TraceRecordingWrapper

TESTS_DIR = Path(__file__).resolve().parent


class SpyEnv(SpaceEnv):
    """A SpaceEnv that remembers what it returned last and counts close() calls."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.last: Any = None
        self.close_calls = 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        self.last = super().reset(seed=seed, options=options)
        return self.last

    def step(self, action: Any) -> Any:
        self.last = super().step(action)
        return self.last

    def close(self) -> None:
        self.close_calls += 1


# --------------------------------------------------------------------------------------------
# The API seen by the caller
# --------------------------------------------------------------------------------------------


def test_gymnasium_env_api_passes_through_unchanged(trace_dir):
    """A gymnasium env: reset/step results are the env's own objects; the wrapper is a Wrapper."""
    inner = SpyEnv(OBSERVATION_SPACES["dict_nested"], ACTION_SPACES["box_f32"])
    env = TraceRecordingWrapper(inner, trace_dir)
    assert isinstance(env, gymnasium.Wrapper)
    assert env.unwrapped is inner
    assert env.observation_space is inner.observation_space
    assert env.action_space is inner.action_space
    out = env.reset(seed=1)
    assert type(out) is tuple and len(out) == 2
    assert all(a is b for a, b in zip(out, inner.last, strict=True))
    for _ in range(3):
        out = env.step(env.action_space.sample())
        assert type(out) is tuple and len(out) == 5
        assert all(a is b for a, b in zip(out, inner.last, strict=True))
    env.close()


def test_gymnasium_make_env_records_spec(trace_dir):
    """A gymnasium.make env: its id and spec are stored in the manifest; .spec passes through."""
    inner = gymnasium.make("CartPole-v1")
    with TraceRecordingWrapper(inner, trace_dir) as env:
        assert env.spec is not None and env.spec.id == "CartPole-v1"
        run_episodes(env, 1, seed=0)
    manifest = manifest_of(trace_dir)
    assert manifest["env_id"] == "CartPole-v1"
    assert manifest["env_spec"]["id"] == "CartPole-v1"
    assert manifest["env_spec"]["max_episode_steps"] == 500


def test_the_wrapped_envs_spec_is_json_with_a_path_and_numpy_integers(tmp_path):
    """gymnasium's env.spec.to_json() holds the wrapper's arguments: a Path directory and
    NumPy integers are stored as a str and ints (it raised "not JSON serializable")."""
    import numpy as np

    kwargs = {"batch_bytes": np.int64(5000), "compression": "zstd", "compression_level": np.int8(4)}
    with TraceRecordingWrapper(gymnasium.make("CartPole-v1"), tmp_path / "rec", **kwargs) as env:
        (mine,) = json.loads(env.spec.to_json())["additional_wrappers"][-1:]
    assert mine["kwargs"]["directory"] == str(tmp_path / "rec")
    assert (mine["kwargs"]["batch_bytes"], mine["kwargs"]["compression_level"]) == (5000, 4)


def test_arguments_gymnasium_cannot_copy_are_refused_before_a_recording_is_made(tmp_path):
    """gymnasium's RecordConstructorArgs deep-copies the arguments: an episode_trigger that
    holds a lock fails there, and no directory (nor, at exit, a manifest) is left."""
    import functools
    import threading

    trigger = functools.partial(lambda lock, i: True, threading.Lock())
    with pytest.raises(TypeError, match="pickle"):
        TraceRecordingWrapper(
            gymnasium.make("CartPole-v1"), tmp_path / "rec", episode_trigger=trigger
        )
    assert not (tmp_path / "rec").exists()


def _play_legacy(env: Any, n_episodes: int) -> list[Trace]:
    """Drive an env with the legacy API (reset -> obs, step -> 4-tuple); keep what it returned."""
    traces = []
    for _ in range(n_episodes):
        obs = env.reset()
        assert isinstance(obs, np.ndarray), "legacy reset() must return the observation alone"
        trace = Trace(observations=[obs.copy()])
        done = False
        while not done:
            action = trace.length % 2
            out = env.step(action)
            assert type(out) is tuple and len(out) == 4, "a 4-tuple env must stay a 4-tuple"
            obs, reward, done, info = out
            trace.actions.append(action)
            trace.observations.append(obs.copy())
            trace.rewards.append(reward)
            trace.truncated = bool(done and info.get("TimeLimit.truncated", False))
            trace.terminated = bool(done) and not trace.truncated
        traces.append(trace)
    return traces


def test_legacy_four_tuple_env(trace_dir):
    """A 4-tuple env stays 4-tuple; done + TimeLimit.truncated are recorded as truncated."""
    inner = LegacyEnv(episode_len=4)
    env = TraceRecordingWrapper(inner, trace_dir)
    assert not isinstance(inner, gymnasium.Env)
    assert env.episode_len == 4  # attributes of a legacy env are forwarded
    traces = _play_legacy(env, 4)
    env.close()
    assert inner.closed
    assert [(t.terminated, t.truncated) for t in traces] == [(True, False), (False, True)] * 2
    with gym_recording.load(trace_dir) as rec:
        assert len(rec) == 4
        for ep, trace in zip(rec, traces, strict=True):
            assert_episode_exact(ep, trace)
        assert rec.observation_space == inner.observation_space


class _Glitchy(gymnasium.Env[np.ndarray, int]):
    """Observations count the steps; step 3 returns ``bad`` of its result (an env's bug)."""

    observation_space = gymnasium.spaces.Box(-1e9, 1e9, (1,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self, bad: Any) -> None:
        self.bad, self.t = bad, 0

    def reset(self, *, seed: Any = None, options: Any = None) -> Any:
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action: Any) -> Any:
        self.t += 1
        result = (np.full(1, self.t, np.float32), 1.0, self.t >= 6, False, {})
        return self.bad(result) if self.t == 3 else result


@pytest.mark.parametrize("render", [False, True])
@pytest.mark.parametrize(
    "bad",
    [lambda r: r[:3], lambda r: (*r, 1), lambda r: (*r[:3], []), lambda r: list(r[:2])],
    ids=["3-tuple", "6-tuple", "4-tuple-list-info", "list"],
)
def test_a_step_result_that_cannot_be_recorded_ends_its_episode_before_it(
    tmp_path: Path, bad: Any, render: bool
) -> None:
    """A step result neither Gymnasium's 5-tuple nor Gym's 4-tuple raised a bare ValueError
    and the episode went on without that step (2 then 4 recorded as one transition). Now a
    RecordingError, and the episode ends at the step before; the next reset records again."""
    env: Any = _Glitchy(bad)
    if render:
        env.render_mode, env.metadata = "rgb_array", {"render_fps": 30}
        env.render = lambda: np.zeros((16, 16, 3), np.uint8)
    with TraceRecordingWrapper(env, tmp_path, record_render=render) as w:
        w.reset()
        w.step(0), w.step(0)
        with pytest.raises(gym_recording.RecordingError, match="expected the env's step"):
            w.step(0)
        for _ in range(3):
            w.step(0)  # (not recorded: no episode)
        w.reset()
        w.step(0)
    with gym_recording.load(tmp_path) as rec:
        assert [ep.observations[:, 0].tolist() for ep in rec] == [[0, 1, 2], [0, 1]]


def test_legacy_env_renders_with_its_own_arguments(trace_dir):
    """``render(mode=...)``, the legacy call, reaches the env (Gymnasium's takes none)."""

    class Rendering(LegacyEnv):
        def render(self, mode: str = "human") -> Any:
            return np.full((2, 2, 3), 7, np.uint8) if mode == "rgb_array" else None

    with TraceRecordingWrapper(Rendering(), trace_dir) as env:
        env.reset()
        assert env.render(mode="rgb_array").tolist() == [[[7] * 3] * 2] * 2
        assert env.render("human") is None and env.render() is None


def test_legacy_env_infos(trace_dir):
    """With record_infos, a legacy env's step infos are kept (its reset has none: None)."""
    with TraceRecordingWrapper(LegacyEnv(episode_len=2), trace_dir, record_infos=True) as env:
        _play_legacy(env, 2)
    with gym_recording.load(trace_dir) as rec:
        assert rec[0].infos == [None, {"t": 1}, {"t": 2}]
        assert rec[1].infos == [None, {"t": 1}, {"t": 2, "TimeLimit.truncated": True}]
        assert rec[1].truncated and not rec[1].terminated


def test_legacy_env_reset_returns_observation_alone(trace_dir):
    """The wrapper's reset() on a legacy env returns exactly what the env's reset() returned."""
    inner = LegacyEnv()
    with TraceRecordingWrapper(inner, trace_dir) as env:
        obs = env.reset()
        assert isinstance(obs, np.ndarray) and obs.tolist() == [0.0, 0.0]
        out = env.step(1)
        assert len(out) == 4 and out[3] == {"t": 1}


class LegacyPairObsEnv:
    """A legacy env whose observation is itself a pair ending in a dict: (int, {"a": int})."""

    observation_space = gymnasium.spaces.Tuple(
        (gymnasium.spaces.Discrete(5), gymnasium.spaces.Dict({"a": gymnasium.spaces.Discrete(9)}))
    )
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self) -> None:
        self._t = 0

    def reset(self) -> tuple[int, dict[str, int]]:
        self._t = 0
        return (0, {"a": 0})

    def step(self, action: int) -> tuple[Any, float, bool, dict[str, Any]]:
        self._t += 1
        return (self._t % 5, {"a": self._t + action}), 1.0, self._t >= 3, {}

    def close(self) -> None:
        pass


def test_legacy_env_with_pair_observations(trace_dir):
    """A legacy reset() observation shaped like (x, dict) is recorded whole, not as (obs, info)."""
    with TraceRecordingWrapper(LegacyPairObsEnv(), trace_dir) as env:
        observations = [env.reset()]
        assert observations[0] == (0, {"a": 0})
        done = False
        while not done:
            obs, _, done, _ = env.step(1)
            observations.append(obs)
    with gym_recording.load(trace_dir) as rec:
        ep = rec[0]
    assert type(ep.observations) is tuple
    assert ep.observations[0].tolist() == [o[0] for o in observations]
    assert ep.observations[1]["a"].tolist() == [o[1]["a"] for o in observations]


class LegacyF64PairObsEnv(LegacyPairObsEnv):
    """As above, with float64 arrays in a float32 Box (common in old envs): its space accepts
    neither reading of the reset's result, so ``reset()``'s parameters decide."""

    observation_space = gymnasium.spaces.Tuple(
        (
            gymnasium.spaces.Box(-1, 1, (2,)),
            gymnasium.spaces.Dict({"k": gymnasium.spaces.Discrete(5)}),
        )
    )

    def reset(self) -> tuple[Any, dict[str, int]]:  # type: ignore[override]
        self._t = 0
        return (np.zeros(2), {"k": 0})

    def step(self, action: int) -> tuple[Any, float, bool, dict[str, Any]]:
        self._t += 1
        return (np.full(2, 0.5), {"k": self._t}), 1.0, self._t >= 2, {}


def _gym_wrapped(env: Any) -> Any:
    """``env`` under gym's own ``gym.Wrapper`` (as ``gym.make`` applies it), whose reset
    takes ``**kwargs``."""
    gym = pytest.importorskip("gym")
    return gym.Wrapper(env)


class _NewApi:
    """A user's shim giving an old env gym 0.26's API: ``reset(**kwargs)`` returns the pair
    (not one of gym's wrappers: its env's parameters say nothing of its own)."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.observation_space, self.action_space = env.observation_space, env.action_space

    def reset(self, **kwargs: Any) -> Any:
        return self.env.reset(), {"note": "info"}

    def step(self, action: Any) -> Any:
        obs, reward, done, info = self.env.step(action)
        return obs, reward, done, False, info

    def close(self) -> None:
        pass


class Gym026PairObsEnv(LegacyF64PairObsEnv):
    """gym 0.26's API, whose reset takes ``seed`` (not ``options``) and returns the pair."""

    def reset(self, seed: int | None = None) -> Any:  # type: ignore[override]
        return super().reset(), {"note": "info"}

    def step(self, action: int) -> Any:
        obs, reward, done, info = super().step(action)
        return obs, reward, done, False, info


class Gym025PairObsEnv(LegacyF64PairObsEnv):
    """gym 0.22-0.25's API: the pair only when ``return_info=True`` is asked."""

    def reset(  # type: ignore[override]
        self, *, seed: int | None = None, return_info: bool = False, options: Any = None
    ) -> Any:
        obs = super().reset()
        return (obs, {"note": "info"}) if return_info else obs


@pytest.mark.parametrize(
    ("make", "kwargs"),
    [
        (LegacyF64PairObsEnv, {}),
        (lambda: _gym_wrapped(LegacyF64PairObsEnv()), {}),
        (lambda: _NewApi(LegacyF64PairObsEnv()), {}),
        (Gym026PairObsEnv, {}),
        (Gym025PairObsEnv, {}),
        (Gym025PairObsEnv, {"return_info": True}),
    ],
)
def test_legacy_env_with_pair_observations_its_space_refuses(trace_dir, make, kwargs):
    """A pair observation (float64 arrays in a float32 Box: its space accepts neither
    reading) is told from (obs, info) by reset's parameters: the env's own, under gym's
    wrappers; and a return_info asked for (each was recorded split or joined wrongly)."""
    with TraceRecordingWrapper(make(), trace_dir) as env:
        out = env.reset(**kwargs)
        obs = out[0] if isinstance(out[1], dict) and "note" in out[1] else out
        assert obs[1] == {"k": 0}
        env.step(0)
        env.step(0)
    with gym_recording.load(trace_dir) as rec:
        assert rec[0].observations[1]["k"].tolist() == [0, 1, 2]
        assert rec[0].observations[0].tolist() == [[0, 0], [0.5, 0.5], [0.5, 0.5]]


def test_gym_026_env(trace_dir):
    """A gym 0.26 env: the caller sees gym's API; episodes and spaces are recorded exactly."""
    gym = pytest.importorskip("gym")
    inner = gym.make("CartPole-v1", disable_env_checker=True)
    assert not isinstance(inner, gymnasium.Env)
    env = TraceRecordingWrapper(inner, trace_dir)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = env.reset(seed=5)
        assert type(out) is tuple and len(out) == 2 and isinstance(out[1], dict)
        out = env.step(0)
        assert type(out) is tuple and len(out) == 5
    assert [str(w.message) for w in caught] == []  # recording adds no warnings
    traces = run_episodes(env, 3, seed=7)
    env.close()
    assert all(t.terminated and not t.truncated for t in traces)
    with gym_recording.load(trace_dir) as rec:
        assert len(rec) == 4  # the first, hand-played episode is cut by the next reset
        assert rec[0].length == 1 and not rec[0].terminated and rec[0].seed == 5
        for ep, trace in zip(rec[1:], traces, strict=True):
            assert_episode_exact(ep, trace)
        assert rec.env_id == "CartPole-v1"
        space = rec.observation_space
        assert isinstance(space, gymnasium.spaces.Box)
        assert space.shape == inner.observation_space.shape
        assert space.dtype == inner.observation_space.dtype
        np.testing.assert_array_equal(space.high, inner.observation_space.high)
        assert rec.action_space == gymnasium.spaces.Discrete(2)


def test_a_gym_vector_env_is_refused_by_both_wrappers(trace_dir):
    """gym's vector envs are neither single envs nor Gymnasium's: each wrapper says so before
    anything is recorded (the single-env wrapper took it for a legacy env)."""
    gym = pytest.importorskip("gym")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (gym 0.26 on NumPy 2)
        envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2)
        wrapped = gym.wrappers.RecordEpisodeStatistics(envs)  # (gym 0.26's idiom)
    for wrapper, env in itertools.product(
        (TraceRecordingWrapper, TraceRecordingVectorWrapper), (envs, wrapped)
    ):
        with pytest.raises(
            TypeError, match=r"gym's vector env SyncVectorEnv.*before gym vectorizes"
        ):
            wrapper(env, trace_dir)
    assert not trace_dir.exists() or not list(trace_dir.iterdir())


class _VecEnv:
    """Stable-Baselines3's VecEnv API (``num_envs``, ``step_async``/``step_wait``, a 4-tuple
    step, ``reset()`` giving the batched observation), which is no Gymnasium env."""

    def __init__(self, n: int) -> None:
        self.envs = [gymnasium.make("CartPole-v1") for _ in range(n)]
        self.num_envs = n
        self.observation_space = self.envs[0].observation_space
        self.action_space = self.envs[0].action_space

    def reset(self) -> np.ndarray:
        return np.stack([e.reset()[0] for e in self.envs])

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> tuple[Any, ...]:
        res = [e.step(a) for e, a in zip(self.envs, self._actions, strict=True)]
        done = np.array([r[2] or r[3] for r in res])
        return np.stack([r[0] for r in res]), np.array([r[1] for r in res]), done, [{}] * 2

    def step(self, actions: np.ndarray) -> tuple[Any, ...]:
        self.step_async(actions)
        return self.step_wait()


def test_a_vector_env_of_another_library_is_refused_by_both_wrappers(trace_dir):
    """An SB3 VecEnv is no single env: the single-env wrapper took it for a legacy env (its
    batch recorded as one observation, then its first step refused), and the vector
    wrapper's message sent the user there. Both say to wrap each env before it is
    vectorized."""
    for wrapper in (TraceRecordingWrapper, TraceRecordingVectorWrapper):
        with pytest.raises(TypeError, match=r"got _VecEnv, a vector env of another library.*"):
            wrapper(_VecEnv(2), trace_dir)
    assert not trace_dir.exists() or not list(trace_dir.iterdir())


def test_gym_026_time_limit_is_truncated(trace_dir):
    """A gym 0.26 episode ended by its TimeLimit is recorded as truncated."""
    gym = pytest.importorskip("gym")
    inner = gym.make("Pendulum-v1", disable_env_checker=True, max_episode_steps=15)
    with TraceRecordingWrapper(inner, trace_dir) as env:
        traces = run_episodes(env, 2, seed=3)
    with gym_recording.load(trace_dir) as rec:
        for ep, trace in zip(rec, traces, strict=True):
            assert_episode_exact(ep, trace)
            assert ep.truncated and not ep.terminated and ep.length == 15


def test_not_an_env_is_refused(trace_dir):
    """Wrapping something without step/reset, or a non-callable trigger, raises TypeError."""
    with pytest.raises(TypeError, match="step"):
        TraceRecordingWrapper(object(), trace_dir)
    with pytest.raises(TypeError, match="episode_trigger"):
        TraceRecordingWrapper(
            SpaceEnv(OBSERVATION_SPACES["discrete"]), trace_dir, episode_trigger=3
        )


# --------------------------------------------------------------------------------------------
# What is recorded per episode
# --------------------------------------------------------------------------------------------


def test_terminated_and_truncated_of_the_final_step(trace_dir):
    """Each episode's terminated/truncated are those of its final step."""
    env = SpaceEnv(OBSERVATION_SPACES["box_rank1_f32"])
    with TraceRecordingWrapper(env, trace_dir) as wrapped:
        traces = run_episodes(wrapped, 12, seed=40)
    flags = {(t.terminated, t.truncated) for t in traces}
    assert flags == {(True, False), (False, True)}
    with gym_recording.load(trace_dir) as rec:
        assert [(ep.terminated, ep.truncated) for ep in rec] == [
            (t.terminated, t.truncated) for t in traces
        ]


def test_episode_cut_by_reset_or_close_has_both_flags_false(trace_dir):
    """An episode cut by reset() mid-episode, or by close() mid-episode, is neither."""
    env = SpaceEnv(OBSERVATION_SPACES["box_rank1_f32"], min_len=50, max_len=50)
    wrapped = TraceRecordingWrapper(env, trace_dir)
    cut_by_reset = run_episodes(wrapped, 1, seed=1, max_steps=3)
    cut_by_close = run_episodes(wrapped, 1, seed=2, max_steps=4)
    wrapped.close()
    with gym_recording.load(trace_dir) as rec:
        assert [ep.length for ep in rec] == [3, 4]
        for ep, trace in zip(rec, cut_by_reset + cut_by_close, strict=True):
            assert ep.terminated is False and ep.truncated is False
            assert_episode_exact(ep, trace)


def test_reset_seed_and_nested_options_are_recorded(trace_dir):
    """The reset's seed and options (nested dicts, lists, tuples, arrays) are kept exactly."""
    options = {
        "level": 3,
        "nested": {"list": [1, 2.5, None, "s"], "tuple": (1, "x"), "deep": {"flag": True}},
        "array": np.arange(4, dtype=np.int16),
        "scale": np.float32(0.25),
    }
    env = SpaceEnv(OBSERVATION_SPACES["discrete"])
    with TraceRecordingWrapper(env, trace_dir) as wrapped:
        with_options = run_episodes(wrapped, 1, seed=99, options=options)
        options["nested"]["deep"]["flag"] = False  # mutated after reset: not the recorded value
        options["array"][:] = 0
        without = run_episodes(wrapped, 1, seed=None)
    with gym_recording.load(trace_dir) as rec:
        assert rec[0].seed == 99
        assert_value_exact(rec[0].options, with_options[0].options, "options")
        assert rec[0].options["nested"]["deep"]["flag"] is True
        assert rec[1].seed is None and rec[1].options is None
        assert_episode_exact(rec[1], without[0])


@pytest.mark.parametrize("space_name", ["box_rank1_f32", "dict_nested", "text"])
def test_record_infos_keeps_every_info_exactly(space_name, trace_dir):
    """record_infos=True keeps the reset info and each step's info (N+1), numpy values included."""
    env = SpaceEnv(OBSERVATION_SPACES[space_name], rich_infos=True)
    with TraceRecordingWrapper(env, trace_dir, record_infos=True) as wrapped:
        traces = run_episodes(wrapped, 4, seed=12)
    assert manifest_of(trace_dir)["record_infos"] is True
    with gym_recording.load(trace_dir) as rec:
        for ep, trace in zip(rec, traces, strict=True):
            assert_episode_exact(ep, trace, infos=True)
            assert ep.infos is not None and len(ep.infos) == ep.length + 1
            assert type(ep.infos[0]["scalar"]) is np.float32
            assert ep.infos[-1]["array"].dtype == np.float32


def test_record_infos_false_records_none(trace_dir):
    """record_infos=False (the default) stores no infos at all."""
    env = SpaceEnv(OBSERVATION_SPACES["box_rank1_f32"], rich_infos=True)
    with TraceRecordingWrapper(env, trace_dir) as wrapped:
        traces = run_episodes(wrapped, 3, seed=12)
    assert manifest_of(trace_dir)["record_infos"] is False
    for batch in Path(trace_dir).glob("*.ep*.json"):
        episodes = json.loads(batch.read_text(encoding="utf-8"))["episodes"]
        assert all("infos" not in ep for ep in episodes)
    with gym_recording.load(trace_dir) as rec:
        for ep, trace in zip(rec, traces, strict=True):
            assert_episode_exact(ep, trace, infos=False)


def test_episode_trigger_records_only_chosen_episodes(trace_dir):
    """episode_trigger=lambda i: i % 2 == 0 records episodes 0, 2, 4, ... exactly."""
    seen: list[int] = []

    def trigger(i: int) -> bool:
        seen.append(i)
        return i % 2 == 0

    env = SpaceEnv(OBSERVATION_SPACES["box_rank1_f32"])
    with TraceRecordingWrapper(env, trace_dir, episode_trigger=trigger) as wrapped:
        traces = run_episodes(wrapped, 7, seed=50)
        assert wrapped.episode_id == 6
    assert seen == list(range(7))
    with gym_recording.load(trace_dir) as rec:
        assert len(rec) == 4
        for ep, trace in zip(rec, traces[::2], strict=True):
            assert_episode_exact(ep, trace)


def test_metadata_and_manifest_fields(trace_dir):
    """metadata lands in the manifest and Recording.metadata; the manifest has every key."""
    metadata = {"algorithm": "ppo", "lr": 0.0003, "layers": [64, 64], "notes": {"run": 7}}
    inner = gymnasium.make("FrozenLake-v1")
    with TraceRecordingWrapper(inner, trace_dir, metadata=metadata) as env:
        run_episodes(env, 2, seed=0)
        writer = env.recording.writer_id
    (path,) = Path(trace_dir).glob("openaigym.trace.*.manifest.json")
    assert path.name == f"openaigym.trace.{writer}.manifest.json"
    m = manifest_of(trace_dir)
    assert m["format"] == "gym-recording"
    assert m["format_version"] == "2.3" == gym_recording.FORMAT_VERSION
    assert m["writer"] == writer
    created = datetime.datetime.fromisoformat(m["created"])
    assert created.utcoffset() == datetime.timedelta(0)
    assert abs((datetime.datetime.now(datetime.timezone.utc) - created).total_seconds()) < 3600
    assert m["env_id"] == "FrozenLake-v1"
    assert m["env_spec"]["id"] == "FrozenLake-v1"
    assert m["observation_space"] == {"type": "Discrete", "n": 16, "start": 0}
    assert m["action_space"]["type"] == "Discrete"
    assert m["metadata"] == metadata
    versions = m["versions"]
    assert versions["gym_recording"] == gym_recording.__version__
    assert versions["numpy"] == np.__version__
    assert versions["gymnasium"] == gymnasium.__version__
    assert versions["python"].count(".") == 2
    with gym_recording.load(trace_dir) as rec:
        assert rec.metadata == metadata
        assert rec.env_id == "FrozenLake-v1"
        assert rec.observation_space == inner.observation_space
        assert rec.action_space == inner.action_space


@pytest.mark.parametrize("space_name", ["dict_nested", "tuple", "box_image_u8", "text"])
def test_spaces_round_trip_through_the_manifest(space_name, trace_dir):
    """Recording.observation_space/action_space equal the env's spaces."""
    env = SpaceEnv(OBSERVATION_SPACES[space_name], ACTION_SPACES["dict"])
    with TraceRecordingWrapper(env, trace_dir) as wrapped:
        run_episodes(wrapped, 1, seed=0)
    with gym_recording.load(trace_dir) as rec:
        assert rec.observation_space == env.observation_space
        assert rec.action_space == env.action_space


def test_metadata_must_be_json(trace_dir):
    """Metadata that is not JSON is refused when the wrapper is made, not later at close."""
    env = SpaceEnv(OBSERVATION_SPACES["discrete"])
    for bad in ({"obj": object()}, {"nan": float("nan")}, {"inf": [1.0, float("inf")]}):
        with pytest.raises(gym_recording.RecordingError, match="metadata"):
            TraceRecordingWrapper(env, trace_dir / "bad", metadata=bad)
    # (a key that is not a str came back as one, and two keys that read alike as one)
    for bad, said in (
        ({1: "int key", "1": "str key"}, 'got 1 .int.; it would read back as "1"'),
        ({"a": [{None: 1}]}, 'got None .NoneType.; it would read back as "null"'),
        ({"a": {(1, 2): 1}}, r"got \(1, 2\) .tuple.; JSON cannot hold it"),
    ):
        with pytest.raises(
            gym_recording.RecordingError,
            match=f"metadata's dict keys to be strings .JSON's., {said}",
        ):
            TraceRecordingWrapper(env, trace_dir / "bad", metadata=bad)
    # (np.str_ keys, from a NumPy array or a pandas index, read back as the same strings)
    keys = np.array(["lr", "gamma"])
    metadata = {"h": dict(zip(keys, [3e-4, 0.99], strict=True))}
    with TraceRecording(trace_dir / "np", metadata=metadata) as rec:
        rec.add_reset(0)
    with gym_recording.load(trace_dir / "np") as r:
        assert r.metadata == {"h": {"lr": 3e-4, "gamma": 0.99}}


def test_numpy_values_in_metadata_become_plain_json(trace_dir):
    """Numpy scalars and arrays in metadata are stored as plain JSON numbers and lists."""
    metadata = {"seed": np.int64(3), "lr": np.float32(0.5), "sizes": np.array([64, 32])}
    with TraceRecordingWrapper(
        SpaceEnv(OBSERVATION_SPACES["discrete"]), trace_dir, metadata=metadata
    ) as env:
        run_episodes(env, 1, seed=0)
    with gym_recording.load(trace_dir) as rec:
        assert rec.metadata == {"seed": 3, "lr": 0.5, "sizes": [64, 32]}
        assert type(rec.metadata["seed"]) is int


# --------------------------------------------------------------------------------------------
# Directory and lifetime
# --------------------------------------------------------------------------------------------


def test_directory_none_makes_a_fresh_temp_dir(tmp_path, monkeypatch, caplog):
    """directory=None records into a new dir under the temp dir, logged at INFO."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    caplog.set_level(logging.INFO, logger="gym_recording")
    env = SpaceEnv(OBSERVATION_SPACES["box_rank1_f32"])
    with TraceRecordingWrapper(env) as a, TraceRecordingWrapper(env) as b:
        traces = run_episodes(a, 2, seed=1)
        assert a.directory != b.directory
    directory = Path(a.directory)
    assert directory.is_dir() and directory.parent == tmp_path
    assert isinstance(a.recording, TraceRecording)
    assert a.recording.directory == a.directory
    assert any(
        r.levelno == logging.INFO and a.directory in r.getMessage() for r in caplog.records
    ), [r.getMessage() for r in caplog.records]
    with gym_recording.load(directory) as rec:
        for ep, trace in zip(rec, traces, strict=True):
            assert_episode_exact(ep, trace)


def test_directory_is_created(tmp_path):
    """A directory that does not exist yet (nested) is created."""
    directory = tmp_path / "a" / "b" / "c"
    with TraceRecordingWrapper(SpaceEnv(OBSERVATION_SPACES["discrete"]), directory) as env:
        run_episodes(env, 1, seed=0)
        assert env.directory == str(directory)
    assert directory.is_dir()
    with gym_recording.load(directory) as rec:
        assert len(rec) == 1


def test_close_is_idempotent(trace_dir):
    """close() twice writes once and closes the wrapped env once."""
    inner = SpyEnv(OBSERVATION_SPACES["box_rank1_f32"])
    env = TraceRecordingWrapper(inner, trace_dir)
    traces = run_episodes(env, 2, seed=3)
    env.close()
    batches = manifest_of(trace_dir)["batches"]
    env.close()
    assert inner.close_calls == 1
    assert env.recording.closed
    assert manifest_of(trace_dir)["batches"] == batches
    with gym_recording.load(trace_dir) as rec:
        assert len(rec) == 2
        for ep, trace in zip(rec, traces, strict=True):
            assert_episode_exact(ep, trace)


def test_a_closed_wrapper_refuses_reset_and_step(trace_dir):
    """Used after close(), the wrapper raises RecordingClosedError instead of recording
    nothing; what it recorded before stays as it was."""
    env = TraceRecordingWrapper(gymnasium.make("CartPole-v1"), trace_dir)
    env.reset(seed=0)
    env.step(0)
    env.close()
    with pytest.raises(RecordingClosedError, match=r"reset\(\) on a closed recording wrapper"):
        env.reset(seed=1)
    with pytest.raises(RecordingClosedError, match="the env has stepped"):
        env.step(1)
    with gym_recording.load(trace_dir) as rec:
        assert [(ep.length, ep.seed) for ep in rec] == [(1, 0)]


def test_a_vector_env_is_refused_with_the_vector_wrapper_named(trace_dir):
    envs = gymnasium.make_vec("CartPole-v1", num_envs=2)
    with pytest.raises(TypeError, match="TraceRecordingVectorWrapper"):
        TraceRecordingWrapper(envs, trace_dir)
    envs.close()
    assert not list(Path(trace_dir).glob("openaigym.trace.*"))


def test_context_manager_closes_even_on_error(trace_dir):
    """`with TraceRecordingWrapper(...) as env:` closes, also when the block raises."""
    inner = SpyEnv(OBSERVATION_SPACES["box_rank1_f32"])
    with pytest.raises(KeyError), TraceRecordingWrapper(inner, trace_dir) as env:
        traces = run_episodes(env, 2, seed=3)
        raise KeyError("boom")
    assert env.recording.closed and inner.close_calls == 1
    with gym_recording.load(trace_dir) as rec:
        for ep, trace in zip(rec, traces, strict=True):
            assert_episode_exact(ep, trace)


_CHILD = """
import sys
sys.path.insert(0, {tests!r})
from conftest import OBSERVATION_SPACES, SpaceEnv, run_episodes
from gym_recording.wrappers import TraceRecordingWrapper
env = TraceRecordingWrapper(
    SpaceEnv(OBSERVATION_SPACES["box_image_u8"], max_len=20), {directory!r}, batch_bytes=20_000
)
run_episodes(env, 6, seed=77)
run_episodes(env, 1, seed=83, max_steps=3)  # left open: the exit must end it, cut
{ending}
"""


def _expected_child_traces() -> list[Trace]:
    env = SpaceEnv(OBSERVATION_SPACES["box_image_u8"], max_len=20)
    return run_episodes(env, 6, seed=77) + run_episodes(env, 1, seed=83, max_steps=3)


def _run_child(directory: Path, ending: str) -> None:
    code = _CHILD.format(tests=str(TESTS_DIR), directory=str(directory), ending=ending)
    subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=True, timeout=120)


def test_buffered_episodes_are_flushed_at_interpreter_exit(trace_dir):
    """A process that never calls close() still writes every episode when it exits."""
    _run_child(trace_dir, "")
    expected = _expected_child_traces()
    with gym_recording.load(trace_dir) as rec:
        assert len(rec) == len(expected)
        for ep, trace in zip(rec, expected, strict=True):
            assert_episode_exact(ep, trace)


@pytest.mark.parametrize(
    "child",
    [
        # a thread the interpreter waits for at exit, recording after the main thread's end
        """
import threading, time
def work():
    for e in range(20):
        rec.add_reset(np.zeros(2))
        for t in range(5):
            rec.add_step(0, np.ones(2), 1.0)
        time.sleep(0.01)
threading.Thread(target=work).start()
""",
        # the user's own exit handler, recording the last episodes
        """
import atexit
@atexit.register
def last():
    for e in range(20):
        rec.add_reset(np.zeros(2))
        for t in range(5):
            rec.add_step(0, np.ones(2), 1.0)
""",
    ],
    ids=["non-daemon-thread", "user-atexit-handler"],
)
def test_what_is_recorded_as_the_interpreter_exits_is_written(trace_dir, child):
    """A local recording left open is closed at ``atexit`` (after the handlers the user
    registered, and after the threads the interpreter waits for), so everything they
    record is written."""
    src = "import sys, numpy as np\nfrom gym_recording import TraceRecording\n"
    src += f"rec = TraceRecording({str(trace_dir)!r})\n" + child
    proc = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    with gym_recording.load(trace_dir) as rec:
        assert [ep.length for ep in rec] == [5] * 20


def test_a_wrapper_dropped_without_close_frees_its_env_and_is_written_at_exit(tmp_path):
    """Its recording stays open until exit writes it, but does not keep the wrapper (and its
    env: an emulator, a renderer) alive till then: a notebook cell re-run many times."""
    src = f"""
import gc, sys, weakref
sys.path.insert(0, {str(TESTS_DIR)!r})
from conftest import OBSERVATION_SPACES, SpaceEnv, run_episodes
from gym_recording.wrappers import TraceRecordingWrapper
env = SpaceEnv(OBSERVATION_SPACES["box_rank1_f32"], max_len=5)
wrapper = TraceRecordingWrapper(env, {str(tmp_path)!r})
run_episodes(wrapper, 3, seed=0)
alive = weakref.ref(env)
del env, wrapper
gc.collect()
print("env alive" if alive() is not None else "env freed")
"""
    proc = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    assert proc.stdout.strip() == "env freed"
    with gym_recording.load(tmp_path) as rec:
        assert len(rec) == 3


class _Frames(gymnasium.Env[np.ndarray, int]):
    """84x84x3 frames, 100-step episodes."""

    observation_space = gymnasium.spaces.Box(0, 255, (84, 84, 3), np.uint8)
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict]:
        self.t = 0
        return np.full((84, 84, 3), 7, np.uint8), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        return np.full((84, 84, 3), self.t, np.uint8), 1.0, self.t >= 100, False, {}


@pytest.mark.parametrize("vector", [False, True], ids=["single", "vector"])
def test_close_frees_the_buffers_of_a_wrapper_still_referenced(tmp_path, vector):
    """A closed wrapper records no more: ``close()`` frees its buffers (a notebook, or a
    sweep's results, keeps ``env`` after ``env.close()``), not its garbage collection."""
    import gc
    import tracemalloc

    tracemalloc.start()  # (it sees the frees of what it saw allocated)
    try:
        if vector:
            frames = gymnasium.vector.SyncVectorEnv([_Frames] * 2)
            env: Any = TraceRecordingVectorWrapper(frames, tmp_path)
            env.reset(seed=0)
            for _ in range(250):
                env.step(np.zeros(2, np.int64))
        else:
            env = TraceRecordingWrapper(_Frames(), tmp_path)
            run_episodes(env, 3, seed=0)
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        env.close()
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
        del env
        gc.collect()
        dropped = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert before - after > 4 << 20  # (a batch of 250 frames is 5.3 MB)
    assert after - dropped < 1 << 20


@pytest.mark.parametrize("outside", [False, True], ids=["below-us", "below-a-time-limit"])
def test_an_env_under_gymnasiums_autoreset_records_each_episode(tmp_path, outside):
    """Under ``gymnasium.wrappers.Autoreset`` the step after an episode's end resets the env
    (its action ignored, reward 0): it starts the next episode, with its observation and info
    as the reset's. (Every episode was merged into one, its flags lost.)"""
    env: Any = gymnasium.wrappers.Autoreset(gymnasium.make("CartPole-v1"))
    if outside:
        env = gymnasium.wrappers.TimeLimit(env, 1000)
    env = TraceRecordingWrapper(env, tmp_path, record_infos=True)
    env.action_space.seed(0)
    obs, info = env.reset(seed=0)
    episodes: list[dict[str, list[Any]]] = []
    current = {"obs": [obs], "actions": [], "rewards": [], "infos": [info]}
    for _ in range(120):
        action = env.action_space.sample()
        obs, reward, terminated, truncated, info = env.step(action)
        if current is None:  # (the env's own reset)
            current = {"obs": [obs], "actions": [], "rewards": [], "infos": [info]}
            continue
        current["obs"].append(obs)
        current["actions"].append(action)
        current["rewards"].append(reward)
        current["infos"].append(info)
        if terminated or truncated:
            episodes.append(current | {"end": [terminated, truncated]})
            current = None
    env.close()
    assert len(episodes) >= 3
    with gym_recording.load(tmp_path) as rec:
        got = list(rec)
    assert len(got) in (len(episodes), len(episodes) + 1)  # (and the open one, if any)
    for ep, want in zip(got, episodes, strict=False):
        np.testing.assert_array_equal(ep.observations, np.array(want["obs"]))
        np.testing.assert_array_equal(ep.actions, np.array(want["actions"]))
        assert ep.rewards.tolist() == want["rewards"]
        assert [ep.terminated, ep.truncated] == want["end"]
        assert ep.infos == want["infos"]
    assert [ep.seed for ep in got] == [0] + [None] * (len(got) - 1)


def test_recordings_that_compare_equal_are_each_written_at_exit(tmp_path):
    """A subclass may define equality (so no hash): each recording is still its own."""
    src = "import numpy as np\nfrom gym_recording import TraceRecording\n"
    src += "class Named(TraceRecording):\n    def __eq__(self, other): return True\n"
    for name in ("a", "b"):
        src += f"{name} = Named({str(tmp_path / name)!r})\n"
        src += f"{name}.add_reset(np.zeros(2)); {name}.add_step(0, np.ones(2), 1.0)\n"
    proc = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    for name in ("a", "b"):
        with gym_recording.load(tmp_path / name) as rec:
            assert [ep.length for ep in rec] == [1]


def test_a_recording_that_cannot_be_written_at_exit_says_so_in_one_line(tmp_path):
    """Its error names the file and why; no traceback (the library's error says it all)."""
    d = tmp_path / "gone"
    src = "import os, shutil, numpy as np\nfrom gym_recording import TraceRecording\n"
    src += f"rec = TraceRecording({str(d)!r})\n"
    src += "rec.add_reset(np.zeros(2)); rec.add_step(0, np.ones(2), 1.0, terminated=True)\n"
    src += f"shutil.rmtree({str(d)!r}); open({str(d)!r}, 'w').close()  # (a file in its place)\n"
    proc = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"could not flush the recording in {d} at exit: could not write")
    assert line.endswith("; what it had not written is lost")  # (not "the next flush")
    assert "next flush" not in line


def test_a_write_that_fails_twice_says_its_batch_stays_buffered(tmp_path):
    """The WriteError of a full disk said "nothing of it was published", which read as data
    lost: it says that the batch stays buffered, and what writes it."""
    import resource
    import signal

    src = f"""
import resource, signal, numpy as np
from gym_recording import TraceRecording, WriteError
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
rec = TraceRecording({str(tmp_path / "d")!r}, batch_bytes=1000)
resource.setrlimit(resource.RLIMIT_FSIZE, (100, hard))  # (files past 100 bytes: EFBIG)
try:
    for e in range(50):
        rec.add_reset(np.zeros(4), seed=e)
        for t in range(10):
            rec.add_step(0, np.zeros(4), 1.0, terminated=t == 9)
except WriteError as exc:
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    print(exc)
rec.close()
"""
    assert signal.SIGXFSZ and resource.RLIMIT_FSIZE  # (POSIX)
    proc = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    said = proc.stdout.strip()
    assert said.startswith("could not write") and "(File too large)" in said, said
    assert said.endswith(
        "the batch stays buffered: the next flush or close() writes it (free space first, if "
        "the disk is full)"
    ), said
    with gym_recording.load(tmp_path / "d") as rec:
        lengths = [ep.length for ep in rec]  # (the last one cut where the loop stopped)
        assert len(lengths) >= 2 and set(lengths[:-1]) == {10}, lengths


def test_a_directory_we_cannot_write_in_is_refused_when_the_recording_starts(tmp_path):
    """Not at close(), after the whole run: a read-only directory (a read-only bind mount as
    root, whose writes ignore modes; a mode of 0o555 otherwise) is refused by the wrapper."""
    d = tmp_path / "ro"
    d.mkdir()
    src = (
        "import gymnasium as gym, gym_recording\n"
        "try:\n"
        f"    gym_recording.TraceRecordingWrapper(gym.make('CartPole-v1'), {str(d)!r})\n"
        "except gym_recording.RecordingError as exc:\n"
        "    print(exc)\n"
    )
    if os.geteuid() == 0:
        if shutil.which("unshare") is None or shutil.which("mount") is None:
            pytest.skip("needs unshare and mount")
        shell = f'mount --bind -o ro {d} {d} && exec {sys.executable} -c "$0"'
        cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c", shell, src]
        why = "Read-only file system"
    else:
        d.chmod(0o555)
        cmd, why = [sys.executable, "-c", src], "Permission denied"
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    if os.geteuid() == 0 and "mount" in proc.stderr:
        pytest.skip(f"cannot bind-mount here: {proc.stderr[-300:]}")
    assert proc.stdout == f"cannot write in the recording directory {str(d)!r} ({why}); " + (
        "give a directory you may write to\n"
    ), proc.stderr
    assert list(d.iterdir()) == []


def test_killed_process_loses_only_unflushed_episodes(trace_dir):
    """A process that dies without exit handlers leaves only complete, exact episodes."""
    _run_child(trace_dir, "import os; os._exit(0)")
    expected = _expected_child_traces()
    # A write cut short may leave a .gymrec-tmp-* file behind; readers ignore it.
    with gym_recording.load(trace_dir) as rec:
        assert 1 <= len(rec) < len(expected)
        for ep, trace in zip(rec, expected, strict=False):
            assert_episode_exact(ep, trace)


def test_recording_does_not_change_what_the_env_produces(trace_dir):
    """The wrapped env produces the same values as an unwrapped twin with the same seeds."""
    space = OBSERVATION_SPACES["tuple_of_dict"]
    with TraceRecordingWrapper(SpaceEnv(space), trace_dir) as env:
        recorded = run_episodes(env, 3, seed=4)
    plain = run_episodes(SpaceEnv(space), 3, seed=4)
    for a, b in zip(recorded, plain, strict=True):
        assert_value_exact(a.rewards, b.rewards, "rewards")
        assert_value_exact(a.observations, b.observations, "observations")


@pytest.mark.parametrize("space_name", sorted(ACTION_SPACES))
def test_zero_step_episodes_alone_keep_the_action_layout(space_name, tmp_path):
    """A batch of zero-step episodes only (reset, then close) stores its actions as no steps
    of the action space's layout, as a batch with steps would: shape and dtype alike."""

    def actions(d: Path, steps: bool) -> Any:
        env = TraceRecordingWrapper(
            SpaceEnv(OBSERVATION_SPACES["box_rank1_f32"], ACTION_SPACES[space_name]), d
        )
        env.reset(seed=0)
        if steps:
            env.step(env.action_space.sample())
        env.close()
        with gym_recording.load(d) as rec:
            return rec[0].actions

    def layout(a: Any) -> Any:
        if isinstance(a, dict):
            return {k: layout(v) for k, v in sorted(a.items())}
        if isinstance(a, tuple):
            return tuple(layout(v) for v in a)
        if isinstance(a, np.ndarray):
            return a.dtype, a.shape[1:]
        return type(a)

    empty, stepped = actions(tmp_path / "empty", False), actions(tmp_path / "stepped", True)
    if space_name == "text":  # (per-step values: no layout to keep)
        assert len(empty) == 0
    else:
        assert layout(empty) == layout(stepped)


def test_the_wrapper_shows_its_parameters() -> None:
    """``help()``, IDEs and ``inspect`` show the constructor's parameters, not ``__new__``'s."""
    params = inspect.signature(TraceRecordingWrapper).parameters
    assert list(params)[:2] == ["env", "directory"] and "record_render" in params

    class Mine(TraceRecordingWrapper[Any, Any]):  # (a subclass shows its own)
        def __init__(self, env: Any, run: str, *, every: int = 10) -> None:
            super().__init__(env, run)

    assert list(inspect.signature(Mine).parameters) == ["env", "run", "every"]


def test_an_episode_ends_as_the_next_reset_begins(tmp_path: Path) -> None:
    """ended_at is taken as reset() is called, before the env's reset runs (which may take
    long), and an env's reset that fails still ends the last episode."""
    import time

    class SlowReset(gymnasium.Wrapper[Any, Any, Any, Any]):
        fail = False

        def reset(self, **kwargs: Any) -> Any:
            time.sleep(0.2)
            if self.fail:
                raise ValueError("the env could not reset")
            return self.env.reset(**kwargs)

    slow = SlowReset(gymnasium.make("CartPole-v1"))
    env = TraceRecordingWrapper(slow, tmp_path)
    env.reset(seed=0)
    env.step(0)
    before = time.time()
    env.reset()
    env.step(1)
    slow.fail = True
    with pytest.raises(ValueError):
        env.reset()
    assert not env.recording.in_episode  # (ended: a step now is not recorded)
    env.step(0)
    env.close()
    with gym_recording.load(tmp_path) as r:
        first, second = list(r)
    assert first.ended_at is not None and first.ended_at <= before + 0.05
    assert second.started_at is not None and second.started_at >= before + 0.2
    assert second.length == 1 and second.ended_at is not None
    assert second.ended_at < second.started_at + 0.1  # (when the failed reset was called)
