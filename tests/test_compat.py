"""gym_recording reads the original tool's traces (tests/data/compat) exactly, through its API.

The same ground truth as test_seed_reader.py, but through ``gym_recording.load`` and
``gym_recording.playback.scan_recorded_traces``.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from compat_expect import (
    COMPAT_DIR,
    assert_episode_matches,
    assert_episodes_match_in_some_order,
    assert_recording_matches,
    compat_cases,
    expected_by_writer,
    iter_steps,
    load_expected,
    step_digest,
)
from seed_reader import MANIFEST_GLOB, seed_writer_id

import gym_recording
from gym_recording import TraceFormatError, playback

CASES = compat_cases()

# Cases whose observations, actions and rewards are all single ndarray references on disk.
ARRAY_CASES = [c for c in ("cartpole", "discrete", "multiwriter") if c in CASES]


def case_dir(case: str) -> Path:
    if not COMPAT_DIR.is_dir():
        pytest.skip(f"{COMPAT_DIR} is missing")
    path = COMPAT_DIR / case
    if not path.is_dir():
        pytest.skip(f"compat case {case!r} is missing")
    return path


def writer_ids(directory: Path) -> set[str]:
    return {seed_writer_id(p.name) for p in directory.glob(MANIFEST_GLOB)}


def by_writer(episodes: Sequence[Any]) -> dict[str, list[Any]]:
    groups: dict[str, list[Any]] = {}
    for ep in episodes:
        groups.setdefault(ep.writer, []).append(ep)
    return groups


def fingerprint(ep: Any) -> tuple[Any, ...]:
    """Everything an episode holds, as hashable digests, to compare two reads of it."""
    actions = ep.actions
    empty = isinstance(actions, np.ndarray) and actions.size == 0
    return (
        ep.writer,
        ep.index,
        ep.length,
        tuple(step_digest(o) for o in iter_steps(ep.observations)),
        () if empty else tuple(step_digest(a) for a in iter_steps(actions)),
        tuple(np.asarray(ep.rewards, dtype=np.float64).reshape(-1).tolist()),
        ep.terminated,
        ep.truncated,
        ep.seed,
    )


@pytest.mark.parametrize("case", CASES)
def test_load_matches_expected(case):
    """Every episode of every writer equals the expected digests and rewards exactly."""
    directory = case_dir(case)
    expected = load_expected(case)
    with gym_recording.load(directory) as rec:
        groups = by_writer(list(rec))
        assert set(groups) == writer_ids(directory)
        assert_recording_matches(groups, expected)


@pytest.mark.parametrize("case", CASES)
def test_len_iteration_and_indexing_agree(case):
    """len(rec), iteration and rec[i] give the same episodes, whatever the access order."""
    expected = load_expected(case)
    with gym_recording.load(case_dir(case)) as rec:
        n = len(rec)
        assert n == len(expected["episodes_in_writer_order"])
        iterated = [fingerprint(ep) for ep in rec]
        assert len(iterated) == n
        backwards = [fingerprint(rec[i]) for i in reversed(range(n))]
        assert backwards[::-1] == iterated


@pytest.mark.parametrize("case", CASES)
def test_episode_metadata(case):
    """Version 1 episodes: length, total_reward, float rewards (N,), no end flags, no seed."""
    directory = case_dir(case)
    expected = load_expected(case)
    with gym_recording.load(directory) as rec:
        groups = by_writer(list(rec))
    for writer, episodes in groups.items():
        assert isinstance(writer, str) and writer in writer_ids(directory)
        indices = [ep.index for ep in episodes]
        assert all(isinstance(i, int) for i in indices)
        assert indices == sorted(set(indices)), f"writer {writer}: indices {indices}"
    steps = sorted(e["steps"] for e in expected["episodes_in_writer_order"])
    assert sorted(ep.length for eps in groups.values() for ep in eps) == steps
    for ep in (ep for eps in groups.values() for ep in eps):
        assert isinstance(ep.rewards, np.ndarray) and ep.rewards.dtype.kind == "f"
        assert ep.rewards.shape == (ep.length,)
        assert ep.total_reward == pytest.approx(
            math.fsum(ep.rewards.tolist()), rel=1e-12, abs=1e-12
        )
        assert ep.terminated is False and ep.truncated is False
        assert ep.seed is None
        assert len(ep.observations) == ep.length + 1


def test_multiwriter_writer_ids():
    """The three writers come back under their file prefixes' ids, matched to expected 0, 1, 2."""
    directory = case_dir("multiwriter")
    with gym_recording.load(directory) as rec:
        mapping = assert_recording_matches(by_writer(list(rec)), load_expected("multiwriter"))
    assert mapping == {0: "4.4287", 1: "5.4287", 2: "6.4287"}


def test_recording_is_a_sequence_of_frozen_episodes():
    """load() gives a Sequence of frozen dataclass Episodes."""
    with gym_recording.load(case_dir("cartpole")) as rec:
        assert isinstance(rec, Sequence)
        ep = rec[0]
        assert dataclasses.is_dataclass(ep) and not isinstance(ep, type)
        with pytest.raises(dataclasses.FrozenInstanceError):
            ep.length = 0  # type: ignore[misc]
        names = {f.name for f in dataclasses.fields(ep)}
        assert {"observations", "actions", "rewards", "terminated", "truncated", "seed"} <= names
        for attr in ("length", "total_reward", "writer", "index"):
            assert hasattr(ep, attr)


def test_cartpole_fields_are_arrays():
    """Box observations are one float32 (N+1, 4) array; Discrete actions one int64 (N,) array."""
    with gym_recording.load(case_dir("cartpole")) as rec:
        assert len(rec) == 12  # across two batches
        for ep in rec:
            assert ep.observations.dtype == np.float32
            assert ep.observations.shape == (ep.length + 1, 4)
            assert ep.actions.dtype == np.int64 and ep.actions.shape == (ep.length,)


def test_discrete_observations_are_an_int64_vector():
    """Discrete observations are one int64 (N+1,) array."""
    with gym_recording.load(case_dir("discrete")) as rec:
        for ep in rec:
            assert ep.observations.dtype == np.int64
            assert ep.observations.shape == (ep.length + 1,)


def test_image_frames_are_stacked():
    """The original's one-array-per-frame list comes back as ONE uint8 (N+1, 24, 32, 3) array."""
    expected = expected_by_writer(load_expected("image"))[0]
    with gym_recording.load(case_dir("image")) as rec:
        assert len(rec) == len(expected)
        for ep, entry in zip(rec, expected, strict=True):
            assert isinstance(ep.observations, np.ndarray)
            assert ep.observations.dtype == np.uint8
            assert ep.observations.shape == (entry["steps"] + 1, 24, 32, 3)
            assert_episode_matches(ep.observations, ep.actions, ep.rewards, entry)


def test_tuple_observations_have_one_value_per_step():
    """Tuple observations stored as JSON lists come back with one value per step."""
    expected = expected_by_writer(load_expected("tuple"))[0]
    with gym_recording.load(case_dir("tuple")) as rec:
        assert len(rec) == len(expected)
        for ep, entry in zip(rec, expected, strict=True):
            values = list(iter_steps(ep.observations))
            assert len(values) == entry["steps"] + 1
            assert step_digest(values[0])[:2] == ("int64", [3])


def test_empty_episode_has_zero_steps():
    """The zero-step episode between two others has length 0 and rewards of shape (0,)."""
    with gym_recording.load(case_dir("empty_episode")) as rec:
        assert [ep.length for ep in rec] == [5, 0, 4]
        empty = rec[1]
        assert empty.rewards.shape == (0,)
        assert empty.total_reward == 0
        assert len(empty.observations) == 1
        assert empty.actions.shape in ((0,), (1, 0))


@pytest.mark.parametrize("case", CASES)
def test_scan_recorded_traces_calls_back_every_episode(case):
    """scan_recorded_traces calls back once per episode with matching data."""
    calls: list[tuple[Any, Any, Any]] = []

    def episode_cb(observations, actions, rewards):
        calls.append((observations, actions, rewards))

    playback.scan_recorded_traces(case_dir(case), episode_cb)
    assert_episodes_match_in_some_order(calls, load_expected(case))


@pytest.mark.parametrize("case", ["cartpole", "multiwriter"])
def test_scan_recorded_traces_max_episodes(case):
    """max_episodes=2 stops after two episodes."""
    calls: list[tuple[Any, Any, Any]] = []

    def episode_cb(observations, actions, rewards):
        calls.append((observations, actions, rewards))

    playback.scan_recorded_traces(case_dir(case), episode_cb, max_episodes=2)
    assert len(calls) == 2
    expected = load_expected(case)
    matched = assert_episodes_match_in_some_order(calls, expected, complete=False)
    if case == "cartpole":
        assert matched == expected["episodes_in_writer_order"][:2]


@pytest.mark.parametrize("case", CASES)
def test_arrays_outlive_the_recording(case):
    """Episodes stay valid and equal after close and after the recording is garbage-collected."""
    expected = load_expected(case)
    with gym_recording.load(case_dir(case)) as rec:
        episodes = list(rec)
        before = [fingerprint(ep) for ep in episodes]
        arrays = [
            (ep.observations, ep.actions, ep.rewards)
            for ep in episodes
            if isinstance(ep.observations, np.ndarray)
        ]
        copies = copy.deepcopy(arrays)
    assert [fingerprint(ep) for ep in episodes] == before
    del rec
    gc.collect()
    assert [fingerprint(ep) for ep in episodes] == before
    for kept, copied in zip(arrays, copies, strict=True):
        for a, b in zip(kept, copied, strict=True):
            np.testing.assert_array_equal(a, b)
            assert a.dtype == b.dtype and a.shape == b.shape
    assert_recording_matches(by_writer(episodes), expected)


@pytest.mark.parametrize("case", ARRAY_CASES)
def test_ndarray_fields_are_read_only(case):
    """Arrays read from ndarray references are read-only (zero-copy views of the blob)."""
    with gym_recording.load(case_dir(case)) as rec:
        for ep in rec:
            for name in ("observations", "actions", "rewards"):
                value = getattr(ep, name)
                assert isinstance(value, np.ndarray), name
                assert value.flags.writeable is False, f"{name} is writeable"


@pytest.mark.parametrize("case", CASES)
def test_negative_and_out_of_range_indices(case):
    """rec[-1] is rec[len - 1]; indices past either end raise IndexError."""
    with gym_recording.load(case_dir(case)) as rec:
        n = len(rec)
        assert fingerprint(rec[-1]) == fingerprint(rec[n - 1])
        assert fingerprint(rec[-n]) == fingerprint(rec[0])
        with pytest.raises(IndexError):
            rec[n]
        with pytest.raises(IndexError):
            rec[-n - 1]


def test_dict_and_tuple_fields_come_back_per_step_as_the_original_gave_them(tmp_path):
    """The original handed a Tuple (Dict) observation or action to ``scan_recorded_traces``'
    callback as a list of one list (dict) per step: so does a recording of this writer.
    (It got a tuple (dict) of per-leaf arrays: ``len()`` counted leaves, and ``obs[0]`` was
    the first leaf of every step.) The original's own tuple traces come back so too."""
    from gym_recording import TraceRecording

    with TraceRecording(tmp_path) as rec:
        rec.add_reset((20, 7, 0))
        rec.add_step({"a": np.array([1.0, 2.0]), "b": 3}, (22, 7, 0), -1.0, terminated=True)
    calls: list[Any] = []
    playback.scan_recorded_traces(tmp_path, lambda *args: calls.append(args))
    ((observations, actions, rewards),) = calls
    assert rewards.tolist() == [-1.0]
    assert [[int(v) for v in o] for o in observations] == [[20, 7, 0], [22, 7, 0]]
    assert len(actions) == 1 and int(actions[0]["b"]) == 3
    np.testing.assert_array_equal(actions[0]["a"], [1.0, 2.0])
    reader = playback.TraceRecordingReader(tmp_path)
    (ep,) = reader.get_recorded_episodes(reader.get_recorded_batches()[0])
    assert [[int(v) for v in o] for o in ep["observations"]] == [[20, 7, 0], [22, 7, 0]]
    original: list[Any] = []
    playback.scan_recorded_traces(case_dir("tuple"), lambda *args: original.append(args))
    assert isinstance(original[0][0], list) and isinstance(original[0][0][0], list)


def test_int_rewards_of_the_original_writer_are_read_as_float64(tmp_path):
    """The original stored a Python int reward (Taxi's, CliffWalking's) as an int64 array:
    episodes hand rewards as float64, whichever writer wrote them."""
    blob = np.array([0, 1], np.int64).tobytes() + np.array([-1, 20], np.int64).tobytes()
    blob += np.array([3, 4, 5], np.int64).tobytes()

    def ref(off: int, n: int) -> dict[str, Any]:
        return {
            "__type": "ndarray",
            "shape": [n],
            "order": "C",
            "dtype": "int64",
            "npyfile": "openaigym.trace.0.1.ep000000000.bin",
            "npyoff": off,
            "size": 8 * n,
        }

    episode = {"actions": ref(0, 2), "rewards": ref(16, 2), "observations": ref(32, 3)}
    (tmp_path / "openaigym.trace.0.1.ep000000000.bin").write_bytes(blob)
    (tmp_path / "openaigym.trace.0.1.ep000000000.json").write_text(
        json.dumps({"episodes": [episode]})
    )
    batch = {"first": 0, "len": 1, "fn": "openaigym.trace.0.1.ep000000000.json"}
    (tmp_path / "openaigym.trace.0.1.manifest.json").write_text(json.dumps({"batches": [batch]}))
    with gym_recording.load(tmp_path) as rec:
        (ep,) = rec
        assert ep.rewards.dtype == np.float64 and ep.rewards.tolist() == [-1.0, 20.0]
        assert ep.total_reward == 19.0 and ep.observations.dtype == np.int64


@pytest.mark.parametrize("dtype", ["<U2", "|S2", "float128", "datetime64[D]", ">f4"])
def test_arrays_of_dtypes_the_original_stored_but_we_do_not_read_are_named(tmp_path, dtype):
    """The original wrote ``str(array.dtype)`` of any array; a batch holding one of a dtype
    this reader does not read is refused with the dtype named, as version 1 (FORMAT.md §6.1)."""
    bin_fn = "openaigym.trace.0.1.ep000000000.bin"
    (tmp_path / bin_fn).write_bytes(bytes(16))
    obs = {"__type": "ndarray", "shape": [2], "order": "C", "dtype": dtype}
    obs |= {"npyfile": bin_fn, "npyoff": 0, "size": 8}
    episode = {"actions": [0], "rewards": [1.0], "observations": obs}
    (tmp_path / "openaigym.trace.0.1.ep000000000.json").write_text(
        json.dumps({"episodes": [episode]})
    )
    batch = {"first": 0, "len": 1, "fn": "openaigym.trace.0.1.ep000000000.json"}
    (tmp_path / "openaigym.trace.0.1.manifest.json").write_text(json.dumps({"batches": [batch]}))
    want = f"holds a version 1 array of a dtype gym-recording does not read: .*'{re.escape(dtype)}'"
    with gym_recording.load(tmp_path) as rec, pytest.raises(TraceFormatError, match=want):
        rec[0]
    # (per-step values the original could not stack: a list of references, one a step)
    episode["observations"] = [[obs, 1], [obs | {"npyoff": 8}, 2]]
    (tmp_path / "openaigym.trace.0.1.ep000000000.json").write_text(
        json.dumps({"episodes": [episode]})
    )
    want = f"an array of a dtype gym-recording does not read .*'{re.escape(dtype)}'"
    with gym_recording.load(tmp_path) as rec, pytest.raises(TraceFormatError, match=want):
        rec[0]
