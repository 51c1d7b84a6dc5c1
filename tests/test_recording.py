"""``TraceRecording`` on its own: the buffer's API, errors, batching and episodes split in parts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
from conftest import (
    OBSERVATION_SPACES,
    SpaceEnv,
    Trace,
    assert_episode_exact,
    assert_value_exact,
    manifest_of,
    run_episodes,
)

import gym_recording
from gym_recording import RecordingClosedError, RecordingError, TraceFormatError, TraceRecording
from gym_recording.wrappers import TraceRecordingWrapper

MB = 1_000_000


def ndarray_refs(obj: Any) -> list[dict[str, Any]]:
    """Every ndarray reference inside a parsed batch JSON."""
    if isinstance(obj, dict):
        if obj.get("__type") == "ndarray":
            return [obj]
        return [r for v in obj.values() for r in ndarray_refs(v)]
    if isinstance(obj, list):
        return [r for v in obj for r in ndarray_refs(v)]
    return []


def assert_batches_well_formed(directory: Path) -> list[dict[str, Any]]:
    """Contiguous first/len, files present, sizes as listed, arrays 8-byte aligned in the blob."""
    batches: list[dict[str, Any]] = manifest_of(directory)["batches"]
    expect_first = 0
    for b in batches:
        assert b["first"] == expect_first, batches
        expect_first += b["len"]
        with open(Path(directory) / b["fn"], encoding="utf-8") as f:
            batch = json.load(f)
        assert len(batch["episodes"]) == b["len"]
        bin_size = os.path.getsize(Path(directory) / b["bin"])
        json_size = os.path.getsize(Path(directory) / b["fn"])
        assert b["bytes"] == bin_size + json_size
        assert b["steps"] == sum(ep["rewards"]["shape"][0] for ep in batch["episodes"])
        for ref in ndarray_refs(batch):
            assert ref["npyfile"] == b["bin"]
            assert ref["npyoff"] % 8 == 0, ref
            assert ref["npyoff"] + ref["size"] <= bin_size
    return batches


def feed(rec: TraceRecording, trace: Trace) -> None:
    """Feed one episode to a TraceRecording (reset, steps), without ending it."""
    rec.add_reset(trace.observations[0], seed=trace.seed, options=trace.options)
    for t in range(trace.length):
        rec.add_step(
            trace.actions[t],
            trace.observations[t + 1],
            trace.rewards[t],
            terminated=trace.terminated and t == trace.length - 1,
            truncated=trace.truncated and t == trace.length - 1,
        )


def make_trace(n: int, *, obs_shape: tuple[int, ...] = (3,), start: int = 0, **kw: Any) -> Trace:
    """A synthetic episode of ``n`` steps with distinct float32 observations and int actions."""
    obs = [np.full(obs_shape, start + i, dtype=np.float32) for i in range(n + 1)]
    return Trace(
        observations=obs,
        actions=[(start + i) % 5 for i in range(n)],
        rewards=[float(start + i) / 2 for i in range(n)],
        **kw,
    )


# --------------------------------------------------------------------------------------------
# The buffer's API
# --------------------------------------------------------------------------------------------


def test_add_reset_add_step_end_episode_save_complete_close(trace_dir):
    """The original API records episodes; save_complete writes a readable batch at once."""
    first = [make_trace(3, start=0, terminated=True, seed=5), make_trace(2, start=10)]
    later = make_trace(4, start=20, truncated=True, options={"level": 2})
    rec = TraceRecording(trace_dir)
    for trace in first:
        feed(rec, trace)
        rec.end_episode()
    rec.save_complete()
    with gym_recording.load(trace_dir) as r:
        assert len(r) == 2
        for ep, trace in zip(r, first, strict=True):
            assert_episode_exact(ep, trace)
    feed(rec, later)
    rec.close()
    assert rec.closed
    with gym_recording.load(trace_dir) as r:
        assert len(r) == 3
        assert_episode_exact(r[2], later)
    assert len(assert_batches_well_formed(trace_dir)) == 2


def test_save_complete_writes_an_episode_its_last_step_ended(trace_dir):
    """An episode whose last step terminated (or truncated) it is complete: save_complete
    writes it, though no reset or end_episode came (the wrapper ends it at its next reset).
    An episode whose last step set no flag stays open, and is written whole later."""
    env = TraceRecordingWrapper(gymnasium.make("CartPole-v1"), trace_dir)
    env.reset(seed=1)
    while not any(env.step(0)[2:4]):
        pass
    env.recording.save_complete()
    with gym_recording.load(trace_dir) as r:
        assert [(ep.seed, ep.terminated) for ep in r] == [(1, True)]
    # A step past the end (Gymnasium's undefined behaviour) has no episode to go to now.
    with pytest.raises(RecordingError, match=r"save_complete\(\) wrote it whole.*env.reset\(\)"):
        env.step(0)
    env.reset(seed=2)
    env.step(0)
    env.recording.save_complete()
    with gym_recording.load(trace_dir) as r:
        assert len(r) == 1
    env.step(0)
    env.close()
    with gym_recording.load(trace_dir) as r:
        assert [(ep.seed, ep.length, ep.terminated) for ep in r] == [
            (1, r[0].length, True),
            (2, 2, False),
        ]


def test_add_reset_ends_the_open_episode(trace_dir):
    """add_reset() while an episode is open ends it, cut: terminated and truncated false."""
    with TraceRecording(trace_dir) as rec:
        feed(rec, make_trace(2))
        feed(rec, make_trace(1, start=5, terminated=True))
    with gym_recording.load(trace_dir) as r:
        assert [(ep.length, ep.terminated, ep.truncated) for ep in r] == [
            (2, False, False),
            (1, True, False),
        ]


def test_end_episode_and_save_complete_are_harmless_when_idle(trace_dir):
    """end_episode() twice and save_complete() with nothing buffered write no extra batch."""
    rec = TraceRecording(trace_dir)
    rec.end_episode()
    rec.save_complete()
    assert not list(Path(trace_dir).glob("*.ep*.json"))
    feed(rec, make_trace(2))
    rec.end_episode()
    rec.end_episode()
    rec.save_complete()
    rec.save_complete()
    rec.close()
    assert len(manifest_of(trace_dir)["batches"]) == 1


def test_add_step_before_add_reset_raises(trace_dir):
    """add_step() with no episode open raises RecordingError naming add_reset."""
    rec = TraceRecording(trace_dir)
    with pytest.raises(RecordingError, match="add_reset"):
        rec.add_step(0, np.zeros(3), 1.0)
    feed(rec, make_trace(1))
    rec.end_episode()
    with pytest.raises(RecordingError, match="add_reset"):
        rec.add_step(0, np.zeros(3), 1.0)
    rec.close()


def test_use_after_close_raises(trace_dir):
    """add_reset()/add_step() after close() raise RecordingClosedError (a RecordingError)."""
    rec = TraceRecording(trace_dir)
    feed(rec, make_trace(1))
    rec.close()
    rec.close()  # idempotent
    with pytest.raises(RecordingClosedError):
        rec.add_reset(np.zeros(3))
    with pytest.raises(RecordingClosedError):
        rec.add_step(0, np.zeros(3), 1.0)
    assert issubclass(RecordingClosedError, RecordingError)
    assert issubclass(TraceFormatError, RecordingError)
    with gym_recording.load(trace_dir) as r:
        assert len(r) == 1
    for index in (0, 999, slice(None)):  # (closed, whether or not the index is in range)
        with pytest.raises(RecordingClosedError, match="load\\(\\) it again"):
            r[index]


def test_empty_recording_writes_a_manifest(trace_dir):
    """A recording closed without episodes leaves a manifest with no batches and 0 episodes."""
    TraceRecording(trace_dir, env_id="X-v0").close()
    assert manifest_of(trace_dir)["batches"] == []
    with gym_recording.load(trace_dir) as r:
        assert len(r) == 0
        assert r.env_id == "X-v0"


def test_record_infos_keeps_reset_and_step_infos(trace_dir):
    """record_infos=True keeps N+1 infos exactly; False keeps none even when infos are given."""
    infos = [{"r": np.arange(3)}, {"s": np.float32(1.5)}, {"t": (1, "a"), "u": None}]
    for keep in (True, False):
        directory = Path(trace_dir) / str(keep)
        with TraceRecording(directory, record_infos=keep) as rec:
            rec.add_reset(np.zeros(2), info=infos[0])
            rec.add_step(0, np.ones(2), 1.0, info=infos[1])
            rec.add_step(1, np.ones(2), 1.0, info=infos[2])
        with gym_recording.load(directory) as r:
            if keep:
                assert_value_exact(r[0].infos, infos)
            else:
                assert r[0].infos is None


def test_rewards_of_any_numeric_type_are_float64(trace_dir):
    """Python int/bool/float and numpy scalar rewards are stored as the same float64 values."""
    rewards = [1, True, 0.1, np.float32(0.1), np.int64(-3), np.float64(2.5), np.float16(0.3)]
    with TraceRecording(trace_dir) as rec:
        rec.add_reset(np.zeros(1))
        for r in rewards:
            rec.add_step(0, np.zeros(1), r)
    with gym_recording.load(trace_dir) as r:
        got = r[0].rewards
    assert got.dtype == np.float64
    assert got.tolist() == [float(x) for x in rewards]


def test_seed_and_bad_arguments(trace_dir):
    """A numpy seed is stored as int; bad seed, batch_bytes and metadata are refused."""
    with TraceRecording(trace_dir) as rec:
        rec.add_reset(np.zeros(1), seed=np.int64(42))
    with gym_recording.load(trace_dir) as r:
        assert r[0].seed == 42 and type(r[0].seed) is int
    rec = TraceRecording(Path(trace_dir) / "b")
    with pytest.raises(TypeError, match="seed"):
        rec.add_reset(np.zeros(1), seed="42")  # type: ignore[arg-type]
    rec.close()
    for bad in (0, -5, 1.5, True):
        with pytest.raises(ValueError, match="batch_bytes"):
            TraceRecording(Path(trace_dir) / "c", batch_bytes=bad)
    with pytest.raises(TypeError, match="metadata"):
        TraceRecording(Path(trace_dir) / "d", metadata=[1, 2])  # type: ignore[arg-type]
    with pytest.raises(RecordingError, match="metadata"):
        TraceRecording(Path(trace_dir) / "e", metadata={"f": object()})
    # env_id and record_infos go into the manifest as §3 types them: anything else made a
    # recording every reader refused.
    for env_id in (5, ["CartPole-v1"], {"id": "x"}):
        with pytest.raises(TypeError, match="env_id"):
            TraceRecording(Path(trace_dir) / "f", env_id=env_id)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="record_infos"):
        TraceRecording(Path(trace_dir) / "f", record_infos=1)  # type: ignore[arg-type]
    assert not (Path(trace_dir) / "f").exists()  # (refused before the directory is made)
    with TraceRecording(Path(trace_dir) / "g", record_infos=np.bool_(True)) as rec:
        rec.add_reset(np.zeros(1), info={"a": 1})
    with gym_recording.load(Path(trace_dir) / "g") as r:
        assert r[0].infos == [{"a": 1}]


# --------------------------------------------------------------------------------------------
# Batching
# --------------------------------------------------------------------------------------------


def test_small_batch_bytes_makes_contiguous_batches(trace_dir):
    """A small batch_bytes makes several batches, listed contiguously, all episodes kept."""
    traces = [make_trace(3 + i % 4, start=10 * i) for i in range(30)]
    with TraceRecording(trace_dir, batch_bytes=600) as rec:
        for trace in traces:
            feed(rec, trace)
    batches = assert_batches_well_formed(trace_dir)
    assert len(batches) >= 5
    assert sum(b["len"] for b in batches) == 30
    with gym_recording.load(trace_dir) as r:
        assert len(r) == 30
        for ep, trace in zip(r, traces, strict=True):
            assert_episode_exact(ep, trace)


@pytest.mark.parametrize(("obs_shape", "batch_bytes"), [((16,), 20_000), ((8, 8, 3), 60_000)])
def test_batch_size_adapts_toward_batch_bytes(obs_shape, batch_bytes, trace_dir):
    """After the first batch, every full batch is within 25% of batch_bytes."""
    with TraceRecording(trace_dir, batch_bytes=batch_bytes) as rec:
        for i in range(150):
            feed(rec, make_trace(5, obs_shape=obs_shape, start=i))
    batches = assert_batches_well_formed(trace_dir)
    full = batches[1:-1]
    assert len(full) >= 3
    for b in full:
        assert 0.75 * batch_bytes <= b["bytes"] <= 1.25 * batch_bytes, b


@pytest.mark.parametrize("kind", ["text", "arrays-of-varying-shapes"])
def test_batches_of_per_step_values_are_sized_by_what_the_values_take(kind, trace_dir):
    """Observations stored as per-step values (text, arrays whose shape varies) fill a
    batch by their size: 10 KB texts at 64 bytes a step made one batch of every step."""
    rng = np.random.default_rng(0)

    def obs(t: int) -> Any:
        if kind == "text":
            return f"{t:06d}" + "x" * 10_000
        return rng.random(1000 + t % 7)  # (8 KB, a shape of its own each step)

    want = [obs(t) for t in range(400)]
    with TraceRecording(trace_dir, batch_bytes=400_000) as rec:
        for e in range(4):
            rec.add_reset(want[100 * e])
            for t in range(100 * e + 1, 100 * e + 100):
                rec.add_step(0, want[t], 1.0, truncated=t % 100 == 99)
    batches = assert_batches_well_formed(trace_dir)
    assert len(batches) >= 8
    assert max(b["bytes"] for b in batches) <= 1.25 * 400_000, batches
    with gym_recording.load(trace_dir) as r:
        got = [x for ep in r for x in ep.observations]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert type(g) is type(w)
        if kind == "text":
            assert g == w
        else:
            assert g.dtype == w.dtype and g.tobytes() == w.tobytes()


def test_per_step_values_an_open_episode_carries_into_the_next_batch_count_there(trace_dir):
    """An episode open as a batch is written keeps its per-step values for the next batch,
    which counts them: it held twice batch_bytes."""
    rng = np.random.default_rng(0)
    with TraceRecording(trace_dir, batch_bytes=400_000) as rec:
        rec.add_reset(np.zeros(3))  # (an episode waiting to be written)
        rec.add_step(0, np.zeros(4), 1.0, terminated=True)
        rec.add_reset(rng.random(1000))  # (8 KB arrays of a shape of their own each step)
        for t in range(300):
            rec.add_step(0, rng.random(1000 + t % 7), 1.0, truncated=t == 299)
    batches = assert_batches_well_formed(trace_dir)
    assert len(batches) >= 5
    assert max(b["bytes"] for b in batches) <= 1.25 * 400_000, batches


def test_resets_of_text_alone_fill_batches_by_their_size(trace_dir):
    """Zero-step episodes (resets alone) of 10 KB texts: batches of about batch_bytes, not
    one batch of every episode (which readers refuse once it passes their limit)."""
    with TraceRecording(trace_dir, batch_bytes=200_000) as rec:
        for e in range(200):
            rec.add_reset(f"{e:04d}" + "x" * 10_000)
    batches = assert_batches_well_formed(trace_dir)
    assert len(batches) >= 10
    assert max(b["bytes"] for b in batches) <= 1.25 * 200_000, batches
    with gym_recording.load(trace_dir) as r:
        assert [ep.observations[0][:4] for ep in r] == [f"{e:04d}" for e in range(200)]


def test_resets_alone_with_rendered_frames_fill_batches_by_their_frames(trace_dir):
    """Zero-step episodes with a rendered frame each: batches of about batch_bytes, not one
    batch of every episode."""
    frame = np.zeros((64, 64, 3), np.uint8)  # (12 KB)
    with TraceRecording(trace_dir, batch_bytes=100_000) as rec:
        for e in range(300):
            rec.add_reset(np.full(3, e), render_frame=frame)
    batches = assert_batches_well_formed(trace_dir)
    assert len(batches) >= 20
    assert max(b["bytes"] for b in batches) <= 1.5 * 100_000, batches
    with gym_recording.load(trace_dir) as r:
        assert [int(ep.observations[0, 0]) for ep in r] == list(range(300))


class ImageEnv(SpaceEnv):
    """84x84x3 uint8 frames (about 21 KB per step), cheap to make and different every step."""

    def __init__(self, *, min_len: int, max_len: int) -> None:
        super().__init__(OBSERVATION_SPACES["box_image_u8"], min_len=min_len, max_len=max_len)
        self.observation_space = gymnasium.spaces.Box(0, 255, (84, 84, 3), np.uint8)
        self._frame = np.zeros((84, 84, 3), dtype=np.uint8)

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        _, info = super().reset(seed=seed, options=options)
        self._frame[:] = 0
        return self._frame.copy(), info

    def step(self, action: Any) -> Any:
        _, reward, terminated, truncated, info = super().step(action)
        self._frame[self._t % 84] = self._t % 251
        return self._frame.copy(), reward, terminated, truncated, info


@pytest.mark.parametrize(
    ("min_len", "max_len", "episodes"),
    [(5, 30, 40), (700, 700, 1)],
    ids=["short-episodes", "one-long-episode"],
)
def test_default_batches_land_near_5_mb(min_len, max_len, episodes, trace_dir):
    """With the default 5 MB and 84x84x3 frames, every full batch is 4-6.5 MB."""
    env = ImageEnv(min_len=min_len, max_len=max_len)
    with TraceRecordingWrapper(env, trace_dir) as wrapped:  # the default batch_bytes: 5 MB
        traces = run_episodes(wrapped, episodes, seed=0)
    batches = assert_batches_well_formed(trace_dir)
    assert len(batches) >= 3, [b["bytes"] for b in batches]
    for b in batches[:-1]:
        assert 4 * MB <= b["bytes"] <= 6.5 * MB, [b["bytes"] for b in batches]
    with gym_recording.load(trace_dir) as r:
        assert len(r) == len(traces)
        for ep, trace in zip(r, traces, strict=True):
            assert_episode_exact(ep, trace)


@pytest.mark.parametrize("episode_len", [60_000, 7])
def test_batch_steps_never_exceed_50000(episode_len, trace_dir):
    """Even with a huge batch_bytes, no batch holds more than 50000 steps."""
    total = 60_000
    with TraceRecording(trace_dir, batch_bytes=10**12) as rec:
        obs = np.zeros(1, dtype=np.int8)
        rec.add_reset(obs)
        for t in range(1, total + 1):
            rec.add_step(1, obs, 1.0)
            if t % episode_len == 0 and t < total:
                rec.add_reset(obs)
    batches = manifest_of(trace_dir)["batches"]
    assert sum(b["steps"] for b in batches) == total
    assert max(b["steps"] for b in batches) <= 50_000, [b["steps"] for b in batches]
    assert len(batches) >= 2
    with gym_recording.load(trace_dir) as r:
        assert len(r) == -(-total // episode_len)
        assert sum(ep.length for ep in r) == total


def test_one_byte_batches_still_round_trip(trace_dir):
    """batch_bytes=1 (one step per batch, the lower clamp) still records everything exactly."""
    traces = [make_trace(n, start=10 * n) for n in (0, 1, 3, 25, 2)]
    with TraceRecording(trace_dir, batch_bytes=1) as rec:
        for trace in traces:
            feed(rec, trace)
    batches = assert_batches_well_formed(trace_dir)
    assert len(batches) >= 5
    assert all(b["len"] >= 1 for b in batches)
    with gym_recording.load(trace_dir) as r:
        assert len(r) == len(traces)
        for i, trace in enumerate(traces):
            assert_episode_exact(r[i], trace)


# --------------------------------------------------------------------------------------------
# Episodes longer than a batch
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "space_name", ["box_rank1_f32", "dict_nested", "text", "tuple_of_dict", "discrete"]
)
def test_long_episode_split_across_batches_reads_as_one(space_name, trace_dir):
    """An episode longer than a batch is written in parts and read back as ONE exact episode."""
    env = SpaceEnv(OBSERVATION_SPACES[space_name], min_len=150, max_len=150, rich_infos=True)
    with TraceRecordingWrapper(env, trace_dir, batch_bytes=700, record_infos=True) as wrapped:
        traces = run_episodes(wrapped, 1, seed=3)
        env.min_len, env.max_len = 2, 4
        traces += run_episodes(wrapped, 3, seed=4)
        env.min_len, env.max_len = 90, 90
        traces += run_episodes(wrapped, 1, seed=5)
    batches = assert_batches_well_formed(trace_dir)
    assert sum(1 for b in batches if b.get("continues")) >= 4
    assert sum(b["len"] for b in batches) > len(traces)  # parts are episode objects
    with gym_recording.load(trace_dir) as r:
        assert len(r) == len(traces)
        for i in reversed(range(len(traces))):
            assert_episode_exact(r[i], traces[i], infos=True)
        for i, ep in enumerate(r):
            assert ep.index == i
            assert_episode_exact(ep, traces[i], infos=True)


def test_steps_larger_than_a_batch_are_not_stored_twice(trace_dir):
    """Each part of a split episode repeats the observation the part before ended with: steps
    larger than ``batch_bytes`` still go several to a part, so that few are stored twice."""
    frames = np.random.default_rng(0).integers(0, 256, (81, 64, 64, 3), dtype=np.uint8)
    with TraceRecording(trace_dir, batch_bytes=1_000) as rec:
        rec.add_reset(frames[0])
        for t in range(1, 81):
            rec.add_step(0, frames[t], 1.0)
    blobs = sum(p.stat().st_size for p in Path(trace_dir).glob("*.bin"))
    assert len(manifest_of(trace_dir)["batches"]) >= 5
    assert blobs < 1.15 * frames.nbytes  # (it was 2x: a part of one step each)
    with gym_recording.load(trace_dir) as r:
        assert r[0].observations.tobytes() == frames.tobytes()


def test_close_in_the_middle_of_a_split_episode(trace_dir):
    """A long episode cut by close() is complete, with terminated and truncated false."""
    trace = make_trace(300, obs_shape=(4,))
    with TraceRecording(trace_dir, batch_bytes=500) as rec:
        feed(rec, trace)
    assert len(manifest_of(trace_dir)["batches"]) > 3
    with gym_recording.load(trace_dir) as r:
        assert len(r) == 1
        assert_episode_exact(r[0], trace)


def test_unfinished_split_episode_is_hidden_until_written(trace_dir):
    """While a long episode is being written in parts, readers see only complete episodes."""
    done = make_trace(3, terminated=True)
    long = make_trace(200, start=100)
    rec = TraceRecording(trace_dir, batch_bytes=400)
    feed(rec, done)
    feed(rec, long)
    assert manifest_of(trace_dir)["batches"][-1].get("continues") is True
    with gym_recording.load(trace_dir) as r:
        assert len(r) == 1
        assert_episode_exact(r[0], done)
        rec.close()
        r.refresh()
        assert len(r) == 2
        assert_episode_exact(r[1], long)


def test_refresh_while_iterating_keeps_the_writers_iteration_began_with(trace_dir):
    """A writer that publishes its first manifest during an iteration sorts before the one
    being read; refresh() then shows it to new reads, and the iteration goes on reading the
    writers it began with, each episode under its own writer."""
    first, second = (
        TraceRecording(trace_dir, batch_bytes=1),
        TraceRecording(trace_dir, batch_bytes=1),
    )
    for rec, base in ((second, 100), (first, 0)):
        for e in range(3):
            rec.add_reset(np.full(2, base + e, np.float32))
            rec.add_step(0, np.full(2, base + e, np.float32), 1.0, terminated=True)
            if base:  # (the second writes now; the first once the iteration has begun)
                rec.end_episode()
        if base:
            rec.save_complete()
            r = gym_recording.load(trace_dir)
            it = iter(r)
            seen = [next(it)]
    first.close()
    r.refresh()
    seen += list(it)
    assert [(ep.writer, int(ep.observations[0, 0])) for ep in seen] == [
        (second.writer_id, 100 + e) for e in range(3)
    ]
    assert [int(ep.observations[0, 0]) for ep in r] == [0, 1, 2, 100, 101, 102]
    second.close()


def test_writers_are_read_in_the_order_of_the_times_they_started(tmp_path: Path) -> None:
    """§8 orders writers by ``created``: compared as text, a writer that wrote "...:00Z" came
    after one that started half a second later and wrote "...:00.500000+00:00"."""
    for writer, created, value in (
        ("c", "2024-01-01T00:00:01+01:00", 0.0),  # (an hour before the others)
        ("a", "2024-01-01T00:00:00Z", 1.0),
        ("b", "2024-01-01T00:00:00.500000+00:00", 2.0),
        ("d", "not a time", 4.0),  # (last)
    ):
        prefix = f"openaigym.trace.{writer}"
        ref = {"__type": "ndarray", "shape": [1], "dtype": "float64", "size": 8}
        ref.update(npyfile=f"{prefix}.ep000000000.bin", npyoff=0, order="C")
        (tmp_path / f"{prefix}.ep000000000.bin").write_bytes(np.array([value]).tobytes())
        batch = {"episodes": [{"observations": ref, "actions": [], "rewards": []}]}
        (tmp_path / f"{prefix}.ep000000000.json").write_text(json.dumps(batch))
        manifest = {"batches": [{"first": 0, "len": 1, "fn": f"{prefix}.ep000000000.json"}]}
        manifest.update(format="gym-recording", format_version="2.3", writer=writer)
        (tmp_path / f"{prefix}.manifest.json").write_text(
            json.dumps({**manifest, "created": created})
        )
    with gym_recording.load(tmp_path) as r:
        assert [ep.observations[0] for ep in r] == [0.0, 1.0, 2.0, 4.0]


def test_manifest_segments_keep_episode_order(trace_dir, monkeypatch):
    """A writer continuing in new manifests (segments .s1 ... .s12) keeps every episode in order."""
    from gym_recording.record import writer

    monkeypatch.setattr(writer, "SEGMENT_BATCHES", 2)
    traces = [make_trace(2 + i % 3, start=100 * i) for i in range(24)]
    traces.insert(5, make_trace(60, start=7000))  # split in parts: never cut by a segment
    with TraceRecording(trace_dir, batch_bytes=150) as rec:
        for trace in traces:
            feed(rec, trace)
    manifests = sorted(p.name for p in Path(trace_dir).glob("*.manifest.json"))
    assert len(manifests) >= 12
    assert any(".s11." in name for name in manifests)  # sorts before .s2. by name
    with gym_recording.load(trace_dir) as r:
        assert len(r) == len(traces)
        for i, trace in enumerate(traces):
            assert_episode_exact(r[i], trace)
        assert len({ep.writer for ep in r}) == 1
        assert repr(r).endswith("from 1 writer(s)>")  # (segments are one writer's)


# --------------------------------------------------------------------------------------------
# Damaged recordings (basic cases)
# --------------------------------------------------------------------------------------------


def _recorded(directory: Path) -> Path:
    with TraceRecording(directory) as rec:
        feed(rec, make_trace(3))
    return directory


def test_manifest_that_is_not_json(trace_dir):
    """A manifest that does not parse raises TraceFormatError naming the manifest."""
    _recorded(trace_dir)
    (manifest,) = Path(trace_dir).glob("*.manifest.json")
    manifest.write_text('{"batches": [', encoding="utf-8")
    with pytest.raises(TraceFormatError, match=manifest.name) as info:
        gym_recording.load(trace_dir)
    assert info.value.path is not None and manifest.name in info.value.path


@pytest.mark.parametrize("suffix", [".json", ".bin"])
def test_missing_batch_file(suffix, trace_dir):
    """A batch JSON or blob listed but missing raises TraceFormatError naming that file."""
    _recorded(trace_dir)
    (victim,) = Path(trace_dir).glob(f"*.ep000000000{suffix}")
    victim.unlink()
    with pytest.raises(TraceFormatError, match=victim.name), gym_recording.load(trace_dir) as r:
        r[0]


def test_other_files_in_the_directory_are_ignored(trace_dir):
    """Leftover temporary files, unrelated files and subdirectories do not disturb reading."""
    trace = make_trace(3)
    with TraceRecording(trace_dir) as rec:
        feed(rec, trace)
    (Path(trace_dir) / ".gymrec-tmp-abc123").write_bytes(b'{"batches": [')
    (Path(trace_dir) / "notes.txt").write_text("not a trace", encoding="utf-8")
    (Path(trace_dir) / "openaigym.trace.sub.manifest.json.bak").write_text("{", encoding="utf-8")
    (Path(trace_dir) / "subdir").mkdir()
    with gym_recording.load(trace_dir) as r:
        assert len(r) == 1
        assert_episode_exact(r[0], trace)


def test_empty_directory_has_no_episodes(trace_dir):
    """A directory with no manifest is an empty recording."""
    Path(trace_dir).mkdir()
    with gym_recording.load(trace_dir) as r:
        assert len(r) == 0
        assert list(r) == []


def test_a_recordings_parent_directory_warns_and_has_no_episodes(tmp_path):
    """load() of a directory of files and folders but no trace file names it in a warning."""
    with TraceRecording(tmp_path / "runs" / "run1") as rec:
        feed(rec, make_trace(2))
    (tmp_path / "runs" / "notes.txt").write_text("seeds 1-2", encoding="utf-8")
    with pytest.warns(gym_recording.NoRecordingWarning, match=r"holds no recording.*run1"):
        r = gym_recording.load(tmp_path / "runs")
    assert len(r) == 0
    r.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (the recording itself, and an empty folder: no warning)
        (tmp_path / "empty").mkdir()
        with gym_recording.load(tmp_path / "empty") as r:
            assert len(r) == 0
        with gym_recording.load(tmp_path / "runs" / "run1") as r:
            assert len(r) == 1


def test_missing_directory(tmp_path):
    """load() of a directory that does not exist raises TraceFormatError naming it."""
    with pytest.raises(TraceFormatError, match="nowhere"):
        gym_recording.load(tmp_path / "nowhere")


FORK_AND_EXIT = """
import os, sys
import numpy as np
from gym_recording import TraceRecording

rec = TraceRecording(sys.argv[1])
rec.add_reset(np.zeros(3, np.float32))
rec.add_step(0, np.ones(3, np.float32), 1.0, terminated=True)
pid = os.fork()
if pid == 0:
    sys.exit(0)  # a normal exit: atexit handlers run in the child
os.waitpid(pid, 0)
print("AFTER CHILD", sorted(os.listdir(sys.argv[1])))
rec.close()
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_does_not_flush_the_parents_recording_at_exit(tmp_path: Path) -> None:
    """At exit, a forked child leaves the recordings it inherited to the parent: it would
    otherwise write the parent's buffered episodes too, under the parent's file names."""
    d = tmp_path / "traces"
    run = subprocess.run(
        [sys.executable, "-c", FORK_AND_EXIT, str(d)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    assert "AFTER CHILD []" in run.stdout, run.stdout  # the child wrote nothing
    with gym_recording.load(d) as r:
        assert [len(e.rewards) for e in r] == [1]


WORKER_RECORDS = """
import multiprocessing as mp, sys
import numpy as np
from gym_recording import TraceRecording


def work(directory):
    rec = TraceRecording(directory)  # (never closed: the worker's exit writes it)
    for e in range(3):
        rec.add_reset(np.zeros(2), seed=e)
        rec.add_step(0, np.ones(2), 1.0, terminated=True)


if __name__ == "__main__":
    p = mp.get_context(sys.argv[2]).Process(target=work, args=(sys.argv[1],))
    p.start()
    p.join()
    sys.exit(p.exitcode)
"""


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_a_multiprocessing_worker_writes_its_recording_as_it_exits(
    tmp_path: Path, method: str
) -> None:
    """A worker started by fork or forkserver ends without running atexit: its recordings
    are written by multiprocessing's own exit, as a spawned one's are at interpreter exit."""
    import multiprocessing

    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {method} start method here")
    script = tmp_path / "worker.py"
    script.write_text(WORKER_RECORDS)
    d = tmp_path / "traces"
    run = subprocess.run(
        [sys.executable, str(script), str(d), method], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    with gym_recording.load(d) as r:
        assert [ep.seed for ep in r] == [0, 1, 2]


TERMINATED_WORKERS = """
import multiprocessing as mp, sys
import gymnasium as gym
import numpy as np
from gym_recording import TraceRecording, TraceRecordingWrapper

RECORDINGS = []


def work(directory):
    rec = TraceRecording(directory)  # (kept open: the pool's terminate() ends the worker)
    rec.add_reset(np.zeros(2), seed=0)
    rec.add_step(0, np.ones(2), 1.0, terminated=True)
    RECORDINGS.append(rec)


if __name__ == "__main__":
    d, how = sys.argv[1], sys.argv[2]
    if how == "pool":
        with mp.get_context("fork").Pool(2) as pool:  # (terminate() at the block's end)
            pool.map(work, [d + "/a", d + "/b"])
        sys.exit(0)
    env = gym.make_vec(
        "CartPole-v1",
        num_envs=2,
        vectorization_mode="async",
        wrappers=[lambda e: TraceRecordingWrapper(e, d)],
    )
    env.reset(seed=1)
    for _ in range(100):
        env.step(env.action_space.sample())
    if how == "raise":
        raise RuntimeError("the training script failed")
"""

KEPT_ALIVE = """
import sys, threading
import gymnasium as gym
import gym_recording.record.lifetime
from gym_recording import TraceRecordingWrapper

gym_recording.record.lifetime.SIGTERM_GRACE = 1.0  # (its 10 s, shorter for the test)


class KeepsAlive(gym.Wrapper):  # (an env with a thread the interpreter waits for)
    def reset(self, **kwargs):
        threading.Thread(target=threading.Event().wait, daemon=False).start()
        return self.env.reset(**kwargs)


if __name__ == "__main__":
    d = sys.argv[1]
    env = gym.make_vec(
        "CartPole-v1",
        num_envs=1,
        vectorization_mode="async",
        wrappers=[KeepsAlive, lambda e: TraceRecordingWrapper(e, d)],
    )
    env.reset(seed=1)
    for _ in range(50):
        env.step(env.action_space.sample())
    env.close(terminate=True)  # (Gymnasium's way to end workers that hang)
"""


def test_a_worker_that_sigterm_cannot_end_through_python_is_ended_after_a_grace(
    tmp_path: Path,
) -> None:
    """A worker whose env keeps a thread the interpreter waits for never finished exiting
    after SIGTERM became SystemExit, and its parent's join() hung: it is ended with
    os._exit once a grace has passed (its recording written before)."""
    with gym_recording.load(_traces_of(KEPT_ALIVE, tmp_path)) as r:
        assert 50 - len(r) <= sum(ep.length for ep in r) <= 50


def _traces_of(script: str, tmp_path: Path, *args: str, code: int = 0) -> Path:
    """The directory ``script`` (run with it and ``args``) records into; it exits ``code``."""
    (tmp_path / "script.py").write_text(script)
    d = tmp_path / "traces"
    run = subprocess.run(
        [sys.executable, str(tmp_path / "script.py"), str(d), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == code, run.stderr
    return d


@pytest.mark.parametrize("how", ["end", "raise", "pool"])
def test_daemonic_workers_ended_by_sigterm_write_their_recordings(tmp_path: Path, how: str) -> None:
    """AsyncVectorEnv's workers and a Pool's are daemons, ended by SIGTERM as the script
    exits without closing the env (or as the Pool's block ends): they were killed with every
    episode they buffered. Now SIGTERM exits through Python there, and they are written."""
    d = _traces_of(TERMINATED_WORKERS, tmp_path, how, code=1 if how == "raise" else 0)
    if how == "pool":
        for sub in ("a", "b"):
            with gym_recording.load(d / sub) as r:
                assert [ep.length for ep in r] == [1]
        return
    with gym_recording.load(d) as r:
        assert len({ep.writer for ep in r}) == 2
        steps = sum(ep.length for ep in r)  # (each step a sub-env did not spend resetting)
        assert 200 - len(r) <= steps <= 200, [ep.length for ep in r]


@pytest.mark.parametrize(
    ("compression", "batch_bytes"), [(None, 10**6), ("zstd", 10**6), (None, 300)]
)
def test_an_episode_read_again_shares_nothing_with_one_changed_before(
    tmp_path: Path, compression: str | None, batch_bytes: int
) -> None:
    """Infos, options and Dict observations are plain containers: changing those of one
    episode read leaves every later read of it as the file holds it (they were shared with
    the recording's cache of decoded batches). Episodes split across batches too."""
    with TraceRecording(
        tmp_path, record_infos=True, compression=compression, batch_bytes=batch_bytes
    ) as rec:
        for e in range(3):
            rec.add_reset({"x": np.zeros(2)}, options={"level": e}, info={"e": e})
            for t in range(4):
                rec.add_step(t, {"x": np.full(2, t, float)}, 1.0, terminated=t == 3, info={"t": t})

    def as_read(ep: gym_recording.Episode) -> Any:
        return (ep.options, ep.infos, sorted(ep.observations), ep.observations["x"].tolist())

    with gym_recording.load(tmp_path) as r:
        expected = [as_read(ep) for ep in gym_recording.load(tmp_path)]
        for first in (r[1], *r):  # (by index, then by iterating, then by index again)
            first.options["level"] = 99
            first.infos[0]["note"] = "changed"
            first.observations["y"] = 1
        assert [as_read(r[i]) for i in range(len(r))] == expected
        assert [as_read(ep) for ep in r] == expected
    # An episode of read-only arrays only is read again from the batch decoded once.
    with TraceRecording(tmp_path / "arrays", batch_bytes=batch_bytes) as rec:
        rec.add_reset(np.zeros(2))
        rec.add_step(0, np.ones(2), 1.0)
    with gym_recording.load(tmp_path / "arrays") as r:
        assert r[0].observations is r[0].observations
    # (An array of Python objects is read-only, and its objects are not.)
    with TraceRecording(tmp_path / "objects", batch_bytes=batch_bytes) as rec:
        rec.add_reset(np.array([{"a": [1]}], dtype=object))
        rec.add_step(0, np.array([{"a": [2]}], dtype=object), 1.0)
    with gym_recording.load(tmp_path / "objects") as r:
        r[0].observations[0][0]["a"].append(99)
        assert r[0].observations[0][0]["a"] == [1]


@pytest.mark.parametrize("dtype", ["<U3", "|S2", "O"])
def test_string_and_object_arrays_with_a_zero_dimension_round_trip(dtype, tmp_path):
    """Arrays stored as nested JSON lists keep every dimension, a zero past the first one
    included (nested lists of no elements), in options, infos and observations alike."""
    values = [np.empty(shape, dtype) for shape in [(2, 3, 0), (0, 2), (2, 0), (1, 0, 4)]]
    with TraceRecording(tmp_path / "t", record_infos=True) as rec:
        rec.add_reset(values[0], options={"a": values}, info={"a": values[1]})
        rec.add_step(0, values[0], 1.0, info={"b": values[2]}, terminated=True)
    with gym_recording.load(tmp_path / "t") as r:
        (ep,) = r
        pairs = [*zip(ep.options["a"], values, strict=True), (ep.observations[0], values[0])]
        for got, want in pairs:
            assert (got.shape, got.dtype) == (want.shape, want.dtype)
        assert ep.infos[0]["a"].shape == (0, 2) and ep.infos[1]["b"].shape == (2, 0)


def test_a_directory_given_as_bytes_is_refused_in_the_library_s_words(tmp_path: Path) -> None:
    """Every call that takes a directory says it takes a str or a path (it said
    "startswith first arg must be bytes or a tuple of bytes, not str")."""
    from gym_recording.playback import scan_recorded_traces

    calls = [
        lambda d: gym_recording.load(d),
        lambda d: TraceRecording(d),
        lambda d: gym_recording.verify(d),
        lambda d: list(scan_recorded_traces(d)),
    ]
    for call in calls:
        with pytest.raises(TypeError, match=r"^expected a directory as a str or os\.PathLike"):
            call(os.fsencode(tmp_path))


def test_parts_whose_repeated_info_holds_nan_in_an_object_array_join(tmp_path: Path) -> None:
    """The check that a later part repeats the step the part before ends with compared
    object arrays without NaN being NaN: an episode of such infos split into parts (a row
    of a pandas frame, say) was refused as parts that do not join."""
    with TraceRecording(tmp_path, record_infos=True, batch_bytes=20_000) as rec:
        info = {"v": np.array([0, None, np.nan], dtype=object)}
        rec.add_reset(np.zeros(2, np.float32), info=info)
        for t in range(1, 301):
            info = {"v": np.array([t, None, np.nan], dtype=object)}
            rec.add_step(0, np.zeros(2, np.float32), 1.0, truncated=t == 300, info=info)
    with gym_recording.load(tmp_path) as r:
        assert len(r.writers[0].batches) > 1
        (ep,) = r
        assert ep.length == 300 and ep.infos[300]["v"][0] == 300


SLOW_CLOSE = """
import multiprocessing as mp, sys, time
import numpy as np
import gym_recording.record.lifetime
from gym_recording import TraceRecording


def work(d, ready):
    gym_recording.record.lifetime.SIGTERM_GRACE = 0.001  # (a close takes longer than this)
    rec = TraceRecording(d, compression="zstd", compression_level=19)
    rec.add_reset(np.zeros(10_000, np.uint8))
    for t in range(100):
        rec.add_step(0, np.full(10_000, t, np.uint8), 1.0, terminated=t == 99)
    ready.set()
    time.sleep(3600)


if __name__ == "__main__":
    ctx = mp.get_context("fork")
    ready = ctx.Event()
    p = ctx.Process(target=work, args=(sys.argv[1], ready), daemon=True)
    p.start()
    ready.wait()
    p.terminate()  # (as the parent's exit ends a daemonic worker)
    p.join()
    sys.exit(0 if p.exitcode == 143 else 1)
"""


def test_the_grace_after_sigterm_begins_once_the_recordings_are_closed(tmp_path: Path) -> None:
    """The watchdog that ends a worker SIGTERM could not end through Python was armed as the
    signal came, and cut a close that took longer than the grace: the episodes were lost."""
    with gym_recording.load(_traces_of(SLOW_CLOSE, tmp_path)) as r:
        assert [ep.length for ep in r] == [100]


def test_a_relative_directory_stays_where_it_was_when_the_process_changes_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Training code (or a library) that changes the working directory partway: the
    recording keeps writing where it was made, and a Recording reads where it was opened
    (the writer wrote the later batches, and a manifest of every episode, into the new
    directory's "traces", or lost them; the reader said its files did not exist)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b" / "traces").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "a")
    rec = TraceRecording("traces", batch_bytes=300)
    assert rec.directory == str(tmp_path / "a" / "traces")
    for e in range(6):
        if e == 3:
            monkeypatch.chdir(tmp_path / "b")
        rec.add_reset(np.full(4, e, np.float32))
        for t in range(5):
            rec.add_step(0, np.full(4, e, np.float32), 1.0, terminated=t == 4)
    rec.close()
    assert os.listdir(tmp_path / "b" / "traces") == []
    monkeypatch.chdir(tmp_path / "a")
    loaded = gym_recording.load("traces")
    monkeypatch.chdir(tmp_path / "b")
    assert loaded.directory == str(tmp_path / "a" / "traces")
    assert [int(ep.observations[0, 0]) for ep in loaded] == list(range(6))
    loaded.refresh()
    assert len(loaded) == 6 and gym_recording.verify(loaded.directory).ok
    # Made absolute as the OS reads it: "link/.." is the link's parent, not ".".
    (tmp_path / "real" / "deep").mkdir(parents=True)
    (tmp_path / "b" / "link").symlink_to(tmp_path / "real" / "deep")
    with TraceRecording("link/../rec") as rec:
        rec.add_reset(np.zeros(2))
    assert (tmp_path / "real" / "rec").is_dir() and not (tmp_path / "b" / "rec").exists()
    assert len(gym_recording.load("link/../rec")) == 1
    # An empty string names no directory (not the working one).
    with pytest.raises(RecordingError, match="cannot create the recording directory ''"):
        TraceRecording("")
    with pytest.raises(TraceFormatError, match="'' does not exist"):
        gym_recording.load("")


def test_holding_more_mapped_batches_than_files_may_be_open_says_what_to_do(
    tmp_path: Path,
) -> None:
    """Each mapped batch whose arrays are held keeps its file open: past the limit of open
    files, the read raises a ReadError saying so and what to do, not a TraceFormatError (a
    damaged file, which it is not); mmap=False holds none."""
    with TraceRecording(tmp_path, batch_bytes=100) as w:
        for _ in range(80):
            w.add_reset(np.zeros(4))
            w.add_step(0, np.ones(4), 1.0, terminated=True)
    code = f"""
import resource, gym_recording
resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
try:
    held = list(gym_recording.load({str(tmp_path)!r}))
except gym_recording.ReadError as exc:
    print("ReadError", exc)
print(len(list(gym_recording.load({str(tmp_path)!r}, mmap=False))))
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out[0].startswith("ReadError "), out
    assert "Too many open files" in out[0] and "load(..., mmap=False)" in out[0]
    assert out[1] == "80"
