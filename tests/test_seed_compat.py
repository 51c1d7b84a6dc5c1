"""Our recordings are readable by a reader that knows only the original (version 1) format.

``seed_reader`` replaces every ndarray reference with the raw bytes it points at and leaves every
other JSON value alone. Version 2 adds keys and ``{"__type": "dict"/"tuple", "fields": ...}``
field objects; an old reader must still find the same observations, actions and rewards.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
from conftest import (
    ACTION_SPACES,
    OBSERVATION_SPACES,
    SpaceEnv,
    Trace,
    assert_array_exact,
    assert_field_exact,
    record,
    run_episodes,
)
from seed_reader import read_seed_format, seed_writer_id

import gym_recording
from gym_recording import TraceRecording, playback
from gym_recording.wrappers import TraceRecordingWrapper


def seed_episodes(directory: Path) -> list[dict[str, Any]]:
    """The episodes of the only writer in ``directory``, as the seed reader sees them."""
    writers = read_seed_format(directory)
    assert len(writers) == 1, list(writers)
    return next(iter(writers.values()))


def from_seed_field(value: Any) -> Any:
    """Turn a version 2 field object, as an old reader leaves it, into dicts/tuples of arrays."""
    if isinstance(value, dict):
        assert value.get("__type") in ("dict", "tuple"), value
        fields = value["fields"]
        if value["__type"] == "dict":
            assert isinstance(fields, dict)
            return {k: from_seed_field(v) for k, v in fields.items()}
        assert isinstance(fields, list)
        return tuple(from_seed_field(v) for v in fields)
    return value


def assert_same_as_ours(ours: Any, theirs: Any, where: str) -> None:
    """A field read by the seed reader holds the same values, dtypes and shapes as ours."""
    if isinstance(ours, dict):
        assert isinstance(theirs, dict) and list(theirs) == list(ours), where
        for k in ours:
            assert_same_as_ours(ours[k], theirs[k], f"{where}.{k}")
    elif isinstance(ours, tuple):
        assert isinstance(theirs, tuple) and len(theirs) == len(ours), where
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            assert_same_as_ours(a, b, f"{where}[{i}]")
    elif isinstance(ours, np.ndarray):
        assert_array_exact(theirs, np.asarray(ours), where)
    else:
        assert theirs == ours, where


# --------------------------------------------------------------------------------------------
# Box and Discrete: plain arrays an old reader understands as they are
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "space_name",
    [
        "box_rank0_f32",
        "box_rank1_f16",
        "box_rank1_f64_unbounded",
        "box_rank2_i32",
        "box_image_u8",
        "box_rank4_f32",
        "discrete",
        "discrete_start",
        "multidiscrete",
        "multibinary",
    ],
)
@pytest.mark.parametrize("action_name", ["discrete", "box_f32"])
def test_seed_reader_reads_array_envs(space_name, action_name, trace_dir):
    """Box/Discrete recordings: the seed reader's arrays equal the env's values and ours."""
    env = SpaceEnv(OBSERVATION_SPACES[space_name], ACTION_SPACES[action_name])
    traces = record(env, trace_dir, 5, seed=31, batch_bytes=20_000)  # no episode split
    episodes = seed_episodes(trace_dir)
    assert len(episodes) == len(traces)
    with gym_recording.load(trace_dir) as rec:
        for i, (theirs, trace) in enumerate(zip(episodes, traces, strict=True)):
            where = f"episode {i}"
            assert_field_exact(theirs["observations"], trace.observations, f"{where} obs")
            assert_field_exact(theirs["actions"], trace.actions, f"{where} actions")
            want_rewards = np.array(trace.rewards, dtype=np.float64)
            assert_array_exact(theirs["rewards"], want_rewards, f"{where} rewards")
            ours = rec[i]
            for name in ("observations", "actions", "rewards"):
                assert_same_as_ours(getattr(ours, name), theirs[name], f"{where} {name}")


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1", "FrozenLake-v1"])
def test_seed_reader_reads_real_envs(env_id, trace_dir):
    """Recordings of real Gymnasium envs read by the seed reader equal what the env returned."""
    traces = record(gymnasium.make(env_id), trace_dir, 3, seed=5, max_steps=80)
    episodes = seed_episodes(trace_dir)
    assert len(episodes) == len(traces)
    for theirs, trace in zip(episodes, traces, strict=True):
        assert_field_exact(theirs["observations"], trace.observations)
        assert_field_exact(theirs["actions"], trace.actions)
        assert theirs["rewards"].tolist() == [float(r) for r in trace.rewards]


# --------------------------------------------------------------------------------------------
# Dict, Tuple and Text
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("space_name", ["dict_nested", "tuple", "tuple_of_dict", "dict_with_text"])
def test_seed_reader_sees_dict_and_tuple_field_objects(space_name, trace_dir):
    """Dict/Tuple fields reach an old reader as __type dict/tuple objects holding the same data."""
    env = SpaceEnv(OBSERVATION_SPACES[space_name], ACTION_SPACES["dict"])
    traces = record(env, trace_dir, 4, seed=17)
    episodes = seed_episodes(trace_dir)
    expected_type = "dict" if space_name.startswith("dict") else "tuple"
    with gym_recording.load(trace_dir) as rec:
        for i, (theirs, trace) in enumerate(zip(episodes, traces, strict=True)):
            raw = theirs["observations"]
            assert isinstance(raw, dict) and raw["__type"] == expected_type
            assert theirs["actions"]["__type"] == "dict"
            obs, actions = from_seed_field(raw), from_seed_field(theirs["actions"])
            assert_field_exact(obs, trace.observations, f"episode {i} obs")
            assert_field_exact(actions, trace.actions, f"episode {i} actions")
            assert_same_as_ours(rec[i].observations, obs, f"episode {i} obs")
            assert_same_as_ours(rec[i].actions, actions, f"episode {i} actions")


def test_seed_reader_sees_text_as_a_list_of_strings(trace_dir):
    """Text observations reach an old reader as a JSON list of strings."""
    traces = record(SpaceEnv(OBSERVATION_SPACES["text"]), trace_dir, 3, seed=2)
    for theirs, trace in zip(seed_episodes(trace_dir), traces, strict=True):
        assert theirs["observations"] == trace.observations


def test_files_are_ascii_so_a_reader_of_any_locale_reads_text_alike(trace_dir):
    """Non-ASCII text is written as \\u escapes (as the original writer's json.dump did): an
    old reader that decodes files in its locale's encoding (ASCII, cp1252) reads it alike."""
    words = ["café", "Zoë 日本", "🎲 dice", "\u00ff\U0010ffff"]
    with TraceRecording(trace_dir, metadata={"who": words[1]}, record_infos=True) as rec:
        rec.add_reset(words[0], info={"note": words[2]})
        rec.add_step(words[3], words[1], 1.0, info={"note": words[0]}, terminated=True)
    files = sorted(trace_dir.glob("*.json"))
    assert len(files) == 2
    for f in files:
        assert f.read_bytes().isascii(), f.name
    (theirs,) = seed_episodes(trace_dir)
    assert theirs["observations"] == [words[0], words[1]]
    assert theirs["actions"] == [words[3]]
    with gym_recording.load(trace_dir) as got:
        assert got.metadata == {"who": words[1]}
        assert got[0].observations == [words[0], words[1]]
        assert got[0].actions == [words[3]]
        assert got[0].infos == [{"note": words[2]}, {"note": words[0]}]


# --------------------------------------------------------------------------------------------
# Episodes in parts, zero-step episodes, several writers, infos
# --------------------------------------------------------------------------------------------


def _unstack(field: Any) -> list[Any]:
    """Per-step values of a field of arrays, or of dicts/tuples of arrays."""
    if isinstance(field, dict):
        columns = {k: _unstack(v) for k, v in field.items()}
        n = len(next(iter(columns.values())))
        return [{k: c[i] for k, c in columns.items()} for i in range(n)]
    if isinstance(field, tuple):
        members = [_unstack(v) for v in field]
        return [tuple(m[i] for m in members) for i in range(len(members[0]))]
    return list(field)


def _assert_step_equal(got: Any, want: Any, where: str) -> None:
    """One step's value (a row, or dict/tuple of rows) equals ``want`` in dtype, shape, bytes."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want), where
        for k in want:
            _assert_step_equal(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _assert_step_equal(g, w, f"{where}[{i}]")
    else:
        assert_array_exact(np.asarray(got), np.asarray(want), where)


@pytest.mark.parametrize("space_name", ["box_rank1_f32", "discrete", "dict_nested"])
def test_seed_reader_sees_parts_as_consecutive_well_formed_episodes(space_name, trace_dir):
    """A long episode split across batches is, for an old reader, consecutive N_k+1 episodes."""
    env = SpaceEnv(OBSERVATION_SPACES[space_name], min_len=120, max_len=120)
    (trace,) = record(env, trace_dir, 1, seed=8, batch_bytes=600)
    parts = seed_episodes(trace_dir)
    assert len(parts) >= 3
    observations: list[Any] = []
    actions: list[Any] = []
    rewards: list[float] = []
    for k, part in enumerate(parts):
        n = part["rewards"].shape[0]
        obs = _unstack(from_seed_field(part["observations"]))
        acts = _unstack(from_seed_field(part["actions"]))
        assert len(obs) == n + 1, f"part {k}: {len(obs)} observations for {n} steps"
        assert len(acts) == n, f"part {k}: {len(acts)} actions for {n} steps"
        if k > 0:  # a later part starts with the previous part's last observation
            _assert_step_equal(obs[0], observations[-1], f"part {k} first observation")
            obs = obs[1:]
        observations.extend(obs)
        actions.extend(acts)
        rewards.extend(part["rewards"].tolist())
    assert len(observations) == trace.length + 1
    for t, (got, want) in enumerate(zip(observations, trace.observations, strict=True)):
        _assert_step_equal(got, want, f"observation {t}")
    for t, (got, want) in enumerate(zip(actions, trace.actions, strict=True)):
        _assert_step_equal(got, want, f"action {t}")
    assert rewards == [float(r) for r in trace.rewards]
    with gym_recording.load(trace_dir) as rec:
        assert len(rec) == 1
        assert rec[0].length == trace.length


def test_seed_reader_reads_zero_step_episodes(trace_dir):
    """A zero-step episode is, for an old reader, one observation with empty actions/rewards."""
    with TraceRecording(trace_dir) as rec:
        rec.add_reset(np.zeros(3, np.float32))
        rec.add_step(1, np.ones(3, np.float32), 0.5)
        rec.add_reset(np.full(3, 2, np.float32))  # reset again at once: zero steps
        rec.add_reset(np.full(3, 3, np.float32))
        rec.add_step(0, np.full(3, 4, np.float32), 1.0)
    episodes = seed_episodes(trace_dir)
    assert [ep["rewards"].shape for ep in episodes] == [(1,), (0,), (1,)]
    empty = episodes[1]
    assert empty["observations"].shape == (1, 3)
    assert empty["observations"].tolist() == [[2.0, 2.0, 2.0]]
    assert len(empty["actions"]) == 0


def test_seed_reader_reads_a_batch_of_zero_step_episodes_of_text(trace_dir):
    """A batch of zero-step episodes whose observations are text has no array bytes: its
    blob is still a file the original reader can map (it maps each blob an episode names)."""
    with TraceRecording(trace_dir, batch_bytes=1) as rec:  # (a batch an episode)
        rec.add_reset("start")
        rec.add_step(0, "next", 1.0, terminated=True)
        rec.add_reset("alone")  # (zero steps, in a batch of its own)
    episodes = seed_episodes(trace_dir)
    assert [ep["observations"] for ep in episodes] == [["start", "next"], ["alone"]]
    assert [len(ep["rewards"]) for ep in episodes] == [1, 0]


def test_seed_reader_reads_every_writer(trace_dir):
    """Several writers in one directory: one manifest each, all read by the old reader."""
    expected: dict[str, list[Trace]] = {}
    for k in range(3):
        env = SpaceEnv(OBSERVATION_SPACES["box_rank1_f32"])
        with TraceRecordingWrapper(env, trace_dir, batch_bytes=500) as wrapped:
            expected[wrapped.recording.writer_id] = run_episodes(wrapped, 4, seed=10 * k)
    writers = read_seed_format(trace_dir)
    assert {seed_writer_id(name) for name in writers} == set(expected)
    for name, episodes in writers.items():
        traces = expected[seed_writer_id(name)]
        assert len(episodes) == len(traces)
        for theirs, trace in zip(episodes, traces, strict=True):
            assert_field_exact(theirs["observations"], trace.observations)
            assert_field_exact(theirs["actions"], trace.actions)


def test_seed_reader_reads_recordings_with_infos(trace_dir):
    """Infos with numpy arrays and version 2 episode keys do not disturb an old reader."""
    env = SpaceEnv(OBSERVATION_SPACES["box_rank1_f32"], rich_infos=True)
    traces = record(env, trace_dir, 3, seed=6, record_infos=True, options={"a": [1, 2]})
    episodes = seed_episodes(trace_dir)
    for theirs, trace in zip(episodes, traces, strict=True):
        assert_field_exact(theirs["observations"], trace.observations)
        assert len(theirs["infos"]) == trace.length + 1
        assert_array_exact(theirs["infos"][0]["ints"], trace.infos[0]["ints"], "infos")
        # (Writers omit keys at their defaults, FORMAT.md §4: false flags, a null seed.)
        assert theirs.get("seed") == trace.seed
        assert theirs.get("terminated", False) is trace.terminated
        assert theirs.get("truncated", False) is trace.truncated


def test_scan_recorded_traces_reads_our_recordings(trace_dir):
    """The original entry point, scan_recorded_traces, calls back with our episodes exactly."""
    env = SpaceEnv(OBSERVATION_SPACES["box_image_u8"], ACTION_SPACES["discrete"], max_len=30)
    traces = record(env, trace_dir, 6, seed=3, batch_bytes=5000)
    calls: list[tuple[Any, Any, Any]] = []
    playback.scan_recorded_traces(trace_dir, lambda o, a, r: calls.append((o, a, r)))
    assert len(calls) == len(traces)
    for (obs, actions, rewards), trace in zip(calls, traces, strict=True):
        assert_field_exact(obs, trace.observations)
        assert_field_exact(actions, trace.actions)
        assert rewards.tolist() == [float(r) for r in trace.rewards]
    calls.clear()
    playback.scan_recorded_traces(trace_dir, lambda o, a, r: calls.append((o, a, r)), 2)
    assert len(calls) == 2
