"""What an env returned comes back from ``gym_recording.load`` exactly: byte, dtype and shape.

Every space type is recorded through ``TraceRecordingWrapper`` from a synthetic env, and a few
real Gymnasium envs are recorded too; the values the env handed to the caller are kept aside
(deep copies) and compared with what the reader returns.
"""

from __future__ import annotations

import collections
import gc
import mmap
import multiprocessing
import os
import pickle
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
from conftest import (
    ACTION_SPACES,
    OBSERVATION_SPACES,
    BufferReuseEnv,
    SpaceEnv,
    Trace,
    assert_array_exact,
    assert_episode_exact,
    assert_field_exact,
    assert_value_exact,
    record,
    run_episodes,
)
from gymnasium import spaces

import gym_recording
from gym_recording import TraceRecording
from gym_recording.wrappers import TraceRecordingWrapper


def assert_recording_exact(directory: Path, traces: list[Trace], **kwargs: Any) -> None:
    """The recording in ``directory`` holds exactly the episodes ``traces``, in order."""
    with gym_recording.load(directory) as rec:
        assert len(rec) == len(traces)
        for i, trace in enumerate(traces):
            assert_episode_exact(rec[i], trace, **kwargs)


# --------------------------------------------------------------------------------------------
# Space types
# --------------------------------------------------------------------------------------------


def test_observation_space_round_trips(observation_space_name, trace_dir):
    """Observations of every space type come back exactly, stacked per leaf."""
    env = SpaceEnv(OBSERVATION_SPACES[observation_space_name])
    traces = record(env, trace_dir, n_episodes=4, seed=11)
    assert_recording_exact(trace_dir, traces)


@pytest.mark.parametrize(
    ("name", "shape", "dtype"),
    [
        ("box_rank0_f32", (), np.float32),
        ("box_rank1_f16", (5,), np.float16),
        ("box_rank1_f64_unbounded", (3,), np.float64),
        ("box_rank2_i32", (2, 3), np.int32),
        ("box_image_u8", (12, 16, 3), np.uint8),
        ("box_rank4_f32", (2, 3, 4, 5), np.float32),
        ("multidiscrete_2d", (2, 2), np.int64),
        ("multibinary", (6,), np.int8),
        ("discrete", (), np.int64),
        ("discrete_start", (), np.int64),
    ],
)
def test_array_observations_are_one_stacked_array(name, shape, dtype, trace_dir):
    """A Box/Discrete/Multi* observation of shape S is ONE array [N+1, *S] of the space dtype."""
    traces = record(SpaceEnv(OBSERVATION_SPACES[name]), trace_dir, n_episodes=2, seed=3)
    with gym_recording.load(trace_dir) as rec:
        for ep, trace in zip(rec, traces, strict=True):
            assert type(ep.observations) is np.ndarray
            assert ep.observations.shape == (trace.length + 1, *shape)
            assert ep.observations.dtype == np.dtype(dtype)


def test_discrete_start_values_are_kept(trace_dir):
    """Discrete(5, start=-2) observations keep their offset values (-2..2), as int64."""
    traces = record(SpaceEnv(OBSERVATION_SPACES["discrete_start"]), trace_dir, 3, seed=5)
    with gym_recording.load(trace_dir) as rec:
        values = np.concatenate([ep.observations for ep in rec])
    assert values.dtype == np.int64
    assert set(values.tolist()) <= set(range(-2, 3))
    assert values.tolist() == [int(o) for t in traces for o in t.observations]


def test_dict_and_tuple_come_back_as_dict_and_tuple_of_arrays(trace_dir):
    """A nested Dict (with a Dict and a Tuple inside) reads back as dicts/tuples of arrays."""
    traces = record(SpaceEnv(OBSERVATION_SPACES["dict_nested"]), trace_dir, n_episodes=2, seed=1)
    with gym_recording.load(trace_dir) as rec:
        ep = rec[0]
    n = traces[0].length + 1
    obs = ep.observations
    # The env's own key order (gymnasium sorts a Dict space's keys).
    assert list(obs) == list(traces[0].observations[0]) == ["inner", "pair", "position"]
    assert obs["position"].shape == (n, 3) and obs["position"].dtype == np.float64
    assert list(obs["inner"]) == ["count", "deeper", "frame"]
    assert obs["inner"]["count"].shape == (n,) and obs["inner"]["count"].dtype == np.int64
    assert obs["inner"]["frame"].shape == (n, 4, 5, 3) and obs["inner"]["frame"].dtype == np.uint8
    assert obs["inner"]["deeper"]["bits"].shape == (n, 3)
    assert type(obs["pair"]) is tuple and len(obs["pair"]) == 2
    assert obs["pair"][1].shape == (n, 2)


def test_text_observations_are_a_list_of_str(trace_dir):
    """Text observations come back as a list of N+1 Python strings."""
    traces = record(SpaceEnv(OBSERVATION_SPACES["text"]), trace_dir, n_episodes=3, seed=2)
    with gym_recording.load(trace_dir) as rec:
        for ep, trace in zip(rec, traces, strict=True):
            assert type(ep.observations) is list
            assert ep.observations == trace.observations
            assert all(type(s) is str for s in ep.observations)


@pytest.mark.parametrize("action_space_name", sorted(ACTION_SPACES))
def test_action_space_round_trips(action_space_name, trace_dir):
    """Actions sampled from every action space type come back exactly."""
    env = SpaceEnv(OBSERVATION_SPACES["box_rank1_f32"], ACTION_SPACES[action_space_name])
    traces = record(env, trace_dir, n_episodes=3, seed=21)
    assert_recording_exact(trace_dir, traces)


@pytest.mark.parametrize(
    "make_action",
    [
        pytest.param(lambda t: np.int64(t % 3), id="np.int64"),
        pytest.param(lambda t: t % 3, id="python-int"),
        pytest.param(lambda t: np.int32(t % 3), id="np.int32"),
        pytest.param(lambda t: bool(t % 2), id="python-bool"),
        pytest.param(lambda t: float(t) / 4, id="python-float"),
        pytest.param(lambda t: np.array(t % 3), id="0-d-array"),
    ],
)
def test_scalar_actions_round_trip(make_action, trace_dir):
    """Numpy-scalar and Python-scalar actions (np.int64 crashed the original) are kept exactly."""
    traces = record(
        SpaceEnv(OBSERVATION_SPACES["box_rank1_f32"]), trace_dir, 3, seed=4, action_fn=make_action
    )
    assert_recording_exact(trace_dir, traces)


def test_numpy_int64_and_python_int_actions_mixed(trace_dir):
    """A recording mixing np.int64 and Python int actions keeps every value, as int64."""
    traces = record(
        SpaceEnv(OBSERVATION_SPACES["discrete"]),
        trace_dir,
        3,
        seed=6,
        action_fn=lambda t: np.int64(t) if t % 2 else t,
    )
    with gym_recording.load(trace_dir) as rec:
        for ep, trace in zip(rec, traces, strict=True):
            assert_array_exact(ep.actions, np.array(trace.actions, dtype=np.int64), "actions")


def test_zero_step_episode_round_trips(trace_dir):
    """An episode reset again before any step keeps its one observation and no actions."""
    env = SpaceEnv(OBSERVATION_SPACES["box_rank1_f32"], ACTION_SPACES["box_f32"])
    with TraceRecordingWrapper(env, trace_dir) as wrapped:
        first = run_episodes(wrapped, 1, seed=1)
        empty = run_episodes(wrapped, 1, seed=2, max_steps=0)
        last = run_episodes(wrapped, 1, seed=3)
    traces = [*first, *empty, *last]
    assert traces[1].length == 0
    assert_recording_exact(trace_dir, traces)
    with gym_recording.load(trace_dir) as rec:
        assert rec[1].length == 0
        assert rec[1].observations.shape == (1, 4)
        assert rec[1].rewards.shape == (0,)
        assert rec[1].total_reward == 0.0


# --------------------------------------------------------------------------------------------
# Buffers reused by the env
# --------------------------------------------------------------------------------------------


def test_env_reusing_its_observation_buffer(trace_dir):
    """An env mutating one ndarray in place each step: every step's own value is recorded."""
    env = BufferReuseEnv(episode_len=5)
    traces = record(env, trace_dir, n_episodes=3, seed=0, record_infos=True)
    # Sanity: the env really returned the same objects each step.
    assert traces[0].observations[0]["vec"][0] != traces[0].observations[-1]["vec"][0]
    assert_recording_exact(trace_dir, traces, infos=True)
    with gym_recording.load(trace_dir) as rec:
        vec = rec[0].observations["vec"]
        assert vec[:, 0].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]


def test_reused_action_array_is_copied(trace_dir):
    """An agent that reuses one action array (mutated after step) has each step's value kept."""
    action = np.zeros(2, dtype=np.float32)

    def act(t: int) -> np.ndarray:
        action[:] = (t, -t)
        return action

    env = SpaceEnv(OBSERVATION_SPACES["box_rank1_f32"], ACTION_SPACES["box_f32"])
    traces = record(env, trace_dir, 2, seed=9, action_fn=act)
    assert_recording_exact(trace_dir, traces)


# --------------------------------------------------------------------------------------------
# Real Gymnasium envs
# --------------------------------------------------------------------------------------------


def _taxi_id() -> str:
    registry = gymnasium.envs.registration.registry
    return "Taxi-v3" if "Taxi-v3" in registry else "Taxi-v4"


@pytest.mark.parametrize(
    ("env_id", "n_episodes", "max_steps"),
    [
        ("CartPole-v1", 4, None),
        ("Pendulum-v1", 2, None),
        ("MountainCarContinuous-v0", 2, 120),
        ("FrozenLake-v1", 5, None),
        ("Blackjack-v1", 6, None),
        (_taxi_id(), 2, 60),
    ],
)
def test_real_gymnasium_envs(env_id, n_episodes, max_steps, trace_dir):
    """Seeded episodes of real Gymnasium envs come back exactly as the env returned them."""
    env = gymnasium.make(env_id)
    traces = record(env, trace_dir, n_episodes, seed=123, max_steps=max_steps)
    assert_recording_exact(trace_dir, traces)
    with gym_recording.load(trace_dir) as rec:
        assert rec.env_id == env_id
        assert rec.observation_space == env.observation_space
        assert rec.action_space == env.action_space
    if env_id == "Pendulum-v1":  # 200-step time limit: truncated, not terminated
        assert all(t.truncated and not t.terminated and t.length == 200 for t in traces)
    if max_steps is not None:
        assert all(not (t.terminated or t.truncated) for t in traces if t.length == max_steps)


def test_blackjack_tuple_observations(trace_dir):
    """Blackjack's (int, int, int) observations come back as a tuple of three int64 arrays."""
    traces = record(gymnasium.make("Blackjack-v1"), trace_dir, 3, seed=7)
    with gym_recording.load(trace_dir) as rec:
        for ep, trace in zip(rec, traces, strict=True):
            assert type(ep.observations) is tuple and len(ep.observations) == 3
            for i, column in enumerate(ep.observations):
                want = np.array([o[i] for o in trace.observations], dtype=np.int64)
                assert_array_exact(column, want, f"observations[{i}]")


# --------------------------------------------------------------------------------------------
# Values that do not fit the inferred layout
# --------------------------------------------------------------------------------------------


class _ChangingEnv(gymnasium.Env[Any, Any]):
    """Observations whose shape or dtype changes after ``change_at`` steps of the recording."""

    def __init__(self, kind: str, change_at: int = 3) -> None:
        self.kind = kind
        self.change_at = change_at
        self.observation_space = spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.action_space = spaces.Discrete(2)
        self._k = 0
        self._t = 0

    def _obs(self) -> Any:
        self._k += 1
        late = self._k > self.change_at
        k = float(self._k)
        if self.kind == "shape":
            return np.full(3 if late else 2, k, dtype=np.float32)
        if self.kind == "dtype":
            return np.full(2, k, dtype=np.float64 if late else np.float32)
        if self.kind == "type":  # an int, then a float, then a string
            return "text" if self._k > 2 * self.change_at else (k if late else self._k)
        if self.kind == "bigint":  # a Python int beyond 64 bits among small ones
            return 2**70 + self._k if self._k == self.change_at + 1 else self._k
        if self.kind == "dict_keys":
            return {"a": np.float32(k), "b": self._k} if late else {"a": np.float32(k)}
        if self.kind == "defaultdict":  # its [key] answers for a key it lacks
            if late:
                return collections.defaultdict(int, {"a": np.float32(k), "c": self._k})
            return {"a": np.float32(k), "b": self._k}
        raise AssertionError(self.kind)

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self._t = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        self._t += 1
        return self._obs(), 1.0, self._t >= 3, False, {}


def _per_step(f: Any) -> list[Any]:
    """The per-step values of a field read back, whatever its layout."""
    if isinstance(f, dict):
        columns = {k: _per_step(v) for k, v in f.items()}
        n = len(next(iter(columns.values())))
        return [{k: c[i] for k, c in columns.items()} for i in range(n)]
    return list(f)


def _assert_step_exact(got: Any, want: Any, where: str) -> None:
    """One step's value equals ``want``; a Python scalar may come back as its int64/float64."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want), f"{where}: {got!r}"
        for key in want:
            _assert_step_exact(got[key], want[key], f"{where}[{key!r}]")
    elif isinstance(want, np.ndarray):
        assert_array_exact(got, want, where)
    elif type(want) is int and isinstance(got, np.ndarray | np.generic):
        assert_array_exact(np.asarray(got), np.asarray(want, dtype=np.int64), where)
    elif type(want) is float and isinstance(got, np.ndarray | np.generic):
        assert_array_exact(np.asarray(got), np.asarray(want, dtype=np.float64), where)
    else:
        assert_value_exact(got, want, where)


@pytest.mark.parametrize("kind", ["shape", "dtype", "type", "bigint", "dict_keys", "defaultdict"])
@pytest.mark.parametrize(
    ("batch_bytes", "change_at"),
    [(5_000_000, 3), (60, 3), (60, 6)],
    ids=["one-batch", "change-in-first-batch", "change-in-later-batch"],
)
def test_value_not_fitting_the_layout_round_trips(kind, batch_bytes, change_at, trace_dir):
    """An observation whose shape/dtype/type changes mid-recording still round-trips exactly."""
    env = _ChangingEnv(kind, change_at)
    traces = record(env, trace_dir, 4, seed=0, batch_bytes=batch_bytes)
    with gym_recording.load(trace_dir) as rec:
        assert len(rec) == len(traces)
        for e, (ep, trace) in enumerate(zip(rec, traces, strict=True)):
            got = _per_step(ep.observations)
            assert len(got) == trace.length + 1
            for i, want in enumerate(trace.observations):
                _assert_step_exact(got[i], want, f"episode {e} obs[{i}]")
            assert_field_exact(ep.actions, trace.actions, "actions")


def test_layout_change_inside_a_split_episode(trace_dir):
    """A long episode in parts whose observation shape changes half-way reads back exactly."""
    observations = [np.full(2 if t < 50 else 3, t, dtype=np.float32) for t in range(101)]
    with TraceRecording(trace_dir, batch_bytes=200) as rec:
        rec.add_reset(observations[0])
        for t in range(100):
            rec.add_step(t, observations[t + 1], float(t))
    assert len(list(Path(trace_dir).glob("*.ep*.json"))) > 3
    with gym_recording.load(trace_dir) as r:
        assert len(r) == 1
        ep = r[0]
    assert ep.length == 100
    got = _per_step(ep.observations)
    assert len(got) == 101
    for t, want in enumerate(observations):
        _assert_step_exact(got[t], want, f"obs[{t}]")
    assert_array_exact(ep.actions, np.arange(100, dtype=np.int64), "actions")


@pytest.mark.parametrize("change", ["shape", "dtype"])
def test_actions_changing_at_a_part_boundary_of_a_split_episode(trace_dir, change):
    """Actions that stop fitting their layout go per step; in small batches, a part may hold
    only arrays of the old layout, the next only of the new: stacked each on its own, they
    would not join. Joined as the per-step values they are, they read back exactly."""

    def action(t: int) -> np.ndarray:
        if change == "shape":
            return np.full(2 if t < 10 else 3, t, dtype=np.float32)
        return np.full(2, t, dtype=np.float32 if t < 10 else np.float64)

    with TraceRecording(trace_dir, batch_bytes=200) as rec:
        rec.add_reset(0.0)
        for t in range(60):
            rec.add_step(action(t), float(t + 1), 0.0)
    assert gym_recording.verify(trace_dir).ok
    with gym_recording.load(trace_dir) as r:
        (ep,) = list(r)
    assert len(ep.actions) == 60
    for t, got in enumerate(ep.actions):
        assert_array_exact(got, action(t), f"actions[{t}]")


def test_non_array_values_round_trip_as_json(trace_dir):
    """Observations that are not arrays (None, lists, big ints, bytes, NaN...) come back exact."""
    values: list[Any] = [
        None,
        [1, 2.5, "three"],
        {"a": "b", "n": [None, True]},
        (1, "tuple"),
        2**70,
        -(2**65),
        b"\x00raw",
        1 + 2j,
        float("nan"),
        float("-inf"),
        {1: "int key", (2, 3): "tuple key"},
        {"__type": "not a type tag"},
        "text",
        np.array(["str", "array"]),
        np.float32(1.5),
    ]
    with TraceRecording(trace_dir) as rec:
        rec.add_reset(values[0])
        for i, v in enumerate(values[1:]):
            rec.add_step(i, v, 0.0)
    with gym_recording.load(trace_dir) as r:
        got = r[0].observations
    assert isinstance(got, list) and len(got) == len(values)
    for i, (g, want) in enumerate(zip(got, values, strict=True)):
        if isinstance(want, np.ndarray):
            assert isinstance(g, np.ndarray) and g.tolist() == want.tolist(), i
            assert g.dtype.kind == want.dtype.kind, i
        else:
            assert_value_exact(g, want, f"obs[{i}]")


def test_numpy_strings_and_bytes_come_back_as_their_text_and_bytes(trace_dir):
    """A numpy str or bytes scalar (np.str_, np.bytes_: what a Minari dataset or an
    element of a numpy string array gives) is its text or bytes, not its repr."""
    info = {"s": np.str_("é"), "b": np.bytes_(b"\x00x"), "u": np.array(["ab"])[0]}
    with TraceRecording(trace_dir, record_infos=True) as rec:
        rec.add_reset(np.str_("reset"), info=info)
        rec.add_step(0, "obs", 0.0, info=info)
    with gym_recording.load(trace_dir) as r:
        ep = r[0]
    assert ep.observations == ["reset", "obs"]
    for got in ep.infos:
        assert got == {"s": "é", "b": b"\x00x", "u": "ab"}


@pytest.mark.parametrize("layout", ["fortran", "strided", "transposed-image"])
def test_non_contiguous_arrays_are_recorded_by_value(layout, trace_dir):
    """Observations that are views (Fortran order, strided, transposed) keep their values."""
    rng = np.random.default_rng(0)

    def make(i: int) -> np.ndarray:
        if layout == "fortran":
            return np.asfortranarray(rng.normal(size=(3, 4)).astype(np.float32))
        if layout == "strided":
            return rng.integers(0, 100, size=12, dtype=np.int32)[::3]
        return rng.integers(0, 255, size=(3, 40, 50), dtype=np.uint8).transpose(1, 2, 0)

    observations = [make(i) for i in range(6)]
    assert not observations[0].flags.c_contiguous
    with TraceRecording(trace_dir) as rec:
        rec.add_reset(observations[0])
        for i, obs in enumerate(observations[1:]):
            rec.add_step(i, obs, 1.0)
    with gym_recording.load(trace_dir) as r:
        got = r[0].observations
    assert_array_exact(got, np.stack(observations), "observations")


def test_random_access_reads_one_batch(trace_dir, monkeypatch):
    """rec[i] reads only the batch holding episode i, not the whole recording."""
    from gym_recording.storage import LocalStorage

    env = SpaceEnv(OBSERVATION_SPACES["box_rank1_f32"], min_len=3, max_len=3)
    traces = record(env, trace_dir, n_episodes=40, seed=1, batch_bytes=300)
    reads: list[str] = []
    original = LocalStorage.read_bytes

    def counting(self: Any, name: str, max_size: int) -> bytes:
        reads.append(name)
        return original(self, name, max_size)

    monkeypatch.setattr(LocalStorage, "read_bytes", counting)
    with gym_recording.load(trace_dir) as rec:
        n_batches = len(rec.writers[0].batches)
        assert n_batches >= 8
        reads.clear()
        assert_episode_exact(rec[23], traces[23])
    batch_reads = [n for n in reads if not n.endswith(".manifest.json")]
    assert len(batch_reads) == 1, batch_reads


# --------------------------------------------------------------------------------------------
# Lifetime of the arrays read back
# --------------------------------------------------------------------------------------------


def test_arrays_are_read_only_and_outlive_the_reader(trace_dir):
    """Arrays from load() are read-only, and stay valid and equal after close() and gc."""
    env = SpaceEnv(OBSERVATION_SPACES["dict_nested"], ACTION_SPACES["box_f32"])
    traces = record(env, trace_dir, n_episodes=5, seed=8, batch_bytes=300)
    rec = gym_recording.load(trace_dir)
    episodes = list(rec)
    for ep in episodes:
        for arr in (ep.actions, ep.rewards, ep.observations["position"]):
            assert arr.flags.writeable is False
            with pytest.raises(ValueError, match="read-only"):
                arr[0] = 0
    rec.close()
    with pytest.raises(gym_recording.RecordingClosedError):
        rec[0]
    for ep, trace in zip(episodes, traces, strict=True):
        assert_episode_exact(ep, trace)
    del rec
    gc.collect()
    for ep, trace in zip(episodes, traces, strict=True):
        assert_episode_exact(ep, trace)


def test_arrays_are_zero_copy_views_of_the_mapped_file(trace_dir):
    """Observations, actions and rewards are views over a memory-mapped blob, not copies."""
    env = SpaceEnv(OBSERVATION_SPACES["box_image_u8"], ACTION_SPACES["box_f32"])
    record(env, trace_dir, n_episodes=2, seed=3)
    with gym_recording.load(trace_dir) as rec:
        ep = rec[1]
    for name in ("observations", "actions", "rewards"):
        base = getattr(ep, name)
        while isinstance(base, np.ndarray):
            base = base.base
        if isinstance(base, memoryview):
            base = base.obj
        assert isinstance(base, mmap.mmap), name


def test_random_access_in_any_order(trace_dir):
    """rec[i] in reverse, shuffled and negative order gives the same episodes as iteration."""
    env = SpaceEnv(OBSERVATION_SPACES["box_image_u8"], max_len=12)
    traces = record(env, trace_dir, n_episodes=12, seed=10, batch_bytes=4000)
    with gym_recording.load(trace_dir) as rec:
        assert len(rec.writers[0].batches) > 3
        order = list(np.random.default_rng(0).permutation(len(traces)))
        for i in [*reversed(range(len(traces))), *order]:
            assert_episode_exact(rec[int(i)], traces[int(i)])
        assert_episode_exact(rec[-1], traces[-1])
        assert [ep.index for ep in rec[2:5]] == [2, 3, 4]


# --------------------------------------------------------------------------------------------
# Many writers in one directory
# --------------------------------------------------------------------------------------------


def _record_in_child(directory: str, k: int, out: str) -> None:
    """Run in a spawned process: record 5 episodes with a small batch size, pickle the traces."""
    env = SpaceEnv(OBSERVATION_SPACES["box_rank1_f32"], ACTION_SPACES["discrete"], max_len=8)
    with TraceRecordingWrapper(env, directory, batch_bytes=400) as wrapped:
        traces = run_episodes(wrapped, 5, seed=1000 * k)
        writer = wrapped.recording.writer_id
    with open(out, "wb") as f:
        pickle.dump((writer, traces), f)


def test_writers_in_many_processes_share_a_directory(tmp_path):
    """4 spawned processes record into one directory: unique writer ids, every episode back."""
    trace_dir = tmp_path / "traces"
    ctx = multiprocessing.get_context("spawn")
    outs = [tmp_path / f"child{k}.pickle" for k in range(4)]
    children = [
        ctx.Process(target=_record_in_child, args=(str(trace_dir), k, str(out)))
        for k, out in enumerate(outs)
    ]
    for child in children:
        child.start()
    for child in children:
        child.join(timeout=120)
        assert child.exitcode == 0
    results: list[tuple[str, list[Trace]]] = []
    for out in outs:
        with open(out, "rb") as f:
            results.append(pickle.load(f))
    writers = [w for w, _ in results]
    assert len(set(writers)) == 4
    assert len({w.split(".")[1] for w in writers}) == 4  # four different pids
    names = os.listdir(trace_dir)
    assert not [n for n in names if n.startswith(".gymrec-tmp-")]
    manifests = sorted(n for n in names if n.endswith(".manifest.json"))
    assert manifests == sorted(f"openaigym.trace.{w}.manifest.json" for w in writers)
    with gym_recording.load(trace_dir) as rec:
        assert len(rec) == 20
        by_writer: dict[str, list[Any]] = {}
        for ep in rec:
            by_writer.setdefault(ep.writer, []).append(ep)
    assert set(by_writer) == set(writers)
    for writer, traces in results:
        assert len(by_writer[writer]) == len(traces)
        for ep, trace in zip(by_writer[writer], traces, strict=True):
            assert_episode_exact(ep, trace)


def test_two_writers_in_one_process_have_distinct_ids(trace_dir):
    """Two recordings open at once in one process write distinct files."""
    a = TraceRecording(trace_dir)
    b = TraceRecording(trace_dir)
    assert a.writer_id != b.writer_id
    for rec in (a, b):  # <counter>.<pid>.<random token> (FORMAT.md §1)
        counter, pid, token = rec.writer_id.split(".")
        assert counter.isdigit() and pid == str(os.getpid()) and len(token) >= 8
    a.add_reset(np.zeros(2))
    b.add_reset(np.ones(2))
    a.close()
    b.close()
    with gym_recording.load(trace_dir) as rec:
        firsts = sorted(float(ep.observations[0, 0]) for ep in rec)
    assert firsts == [0.0, 1.0]


def test_playback_stacks_each_parts_per_step_actions(trace_dir):
    """TraceRecordingReader hands out an episode's parts as they are stored: a part whose
    per-step actions are of one layout comes as one array, as an unsplit episode's do."""
    from gym_recording import TraceRecordingReader

    with TraceRecording(trace_dir, batch_bytes=200) as rec:
        rec.add_reset(0.0)
        for t in range(40):
            rec.add_step(np.full(2 if t < 10 else 3, t, np.float32), float(t + 1), 0.0)
    reader = TraceRecordingReader(trace_dir)
    parts = [e for b in reader.get_recorded_batches() for e in reader.get_recorded_episodes(b)]
    assert len(parts) > 3
    later = [p["actions"] for p in parts if p["part"] and all(len(a) == 3 for a in p["actions"])]
    assert later and all(isinstance(a, np.ndarray) and a.shape[1:] == (3,) for a in later)


def test_playback_refuses_what_is_not_a_batch_or_a_count(trace_dir):
    """The original reader's calls say what they expected: a batch entry of
    get_recorded_batches() (an unhashable ``fn`` was a bare TypeError from a dict lookup),
    and an int ``max_episodes`` (2.5 read 3 episodes, "3" failed comparing str to int)."""
    from gym_recording import TraceRecordingReader, scan_recorded_traces

    with TraceRecording(trace_dir) as rec:
        for _ in range(3):
            rec.add_reset(np.zeros(2))
    reader = TraceRecordingReader(trace_dir)
    for bad in ({"fn": ["a"]}, {}, "x.json"):
        with pytest.raises(TypeError, match="a batch entry dict from get_recorded_batches"):
            reader.get_recorded_episodes(bad)
    with pytest.raises(KeyError, match=r"lists a batch 'nothing\.json'"):
        reader.get_recorded_episodes({"fn": "nothing.json"})
    for bad in (2.5, "3", True):
        with pytest.raises(TypeError, match="max_episodes must be an int"):
            scan_recorded_traces(trace_dir, max_episodes=bad)
    seen = []
    scan_recorded_traces(trace_dir, lambda o, a, r: seen.append(o), max_episodes=np.int64(2))
    assert len(seen) == 2


def test_a_negative_max_episodes_and_a_mmap_that_is_not_a_bool_are_refused(trace_dir):
    """scan_recorded_traces(max_episodes=-1) is a ValueError (it read no episode, silently),
    0 reads none; load(mmap="no") is a TypeError (a truthy string mapped the files)."""
    from gym_recording import scan_recorded_traces

    with TraceRecording(trace_dir) as rec:
        for _ in range(3):
            rec.add_reset(np.zeros(2))
    seen: list[Any] = []
    with pytest.raises(ValueError, match=r"expected max_episodes to be 0 or more.*got -1"):
        scan_recorded_traces(trace_dir, lambda o, a, r: seen.append(o), max_episodes=-1)
    scan_recorded_traces(trace_dir, lambda o, a, r: seen.append(o), max_episodes=0)
    assert seen == []
    for bad in ("no", "False", 0, None):
        with pytest.raises(TypeError, match=rf"expected mmap to be True .* or False .*got {bad!r}"):
            gym_recording.load(trace_dir, mmap=bad)
    for flag in (False, np.True_):
        with gym_recording.load(trace_dir, mmap=flag) as rec:
            assert len(rec) == 3
