"""Arrays handed to users stay valid after the reader is closed, collected, and the files gone.

Arrays are zero-copy views of memory-mapped blobs; the mapping must live as long as any array
made from it. Each test takes arrays out, closes and drops every reader object, collects
garbage, deletes the recording's files, and then reads the arrays again.
"""

from __future__ import annotations

import gc
import shutil
import weakref
from pathlib import Path
from typing import Any

import numpy as np

import gym_recording
from gym_recording import TraceRecording, TraceRecordingReader, scan_recorded_traces


def _record(directory: Path) -> None:
    """Dict observations, an episode split across batches, infos with arrays."""
    with TraceRecording(directory, batch_bytes=3_000, record_infos=True) as rec:
        for e in range(4):
            rec.add_reset(
                {"img": np.full((16, 16, 3), e, np.uint8), "v": np.arange(3.0) + e},
                seed=e,
                info={"a": np.arange(4) * e},
            )
            for s in range(5 + 20 * (e == 2)):
                obs = {"img": np.full((16, 16, 3), s + e, np.uint8), "v": np.arange(3.0) * s}
                rec.add_step(s % 3, obs, float(s), terminated=s == 4 + 20 * (e == 2), info={})


def _leaves(value: Any) -> list[np.ndarray]:
    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, dict):
        return [a for v in value.values() for a in _leaves(v)]
    if isinstance(value, (list, tuple)):
        return [a for v in value for a in _leaves(v)]
    return []


def _gone(directory: Path) -> None:
    gc.collect()
    shutil.rmtree(directory)
    gc.collect()


def test_load_arrays_outlive_the_recording(tmp_path):
    """Arrays from load() (views, joined parts, infos) survive close, gc and deletion."""
    d = tmp_path / "rec"
    _record(d)
    rec = gym_recording.load(d)
    kept: list[np.ndarray] = []
    for ep in rec:
        kept += [*_leaves(ep.observations), ep.actions, ep.rewards, *_leaves(ep.infos)]
    copies = [a.copy() for a in kept]
    assert any(a.base is not None for a in kept)  # zero-copy views are among them
    assert all(not a.flags.writeable for a in kept if a.base is not None)
    ref = weakref.ref(rec)
    rec.close()
    del rec, ep
    _gone(d)
    assert ref() is None
    for a, c in zip(kept, copies, strict=True):
        assert np.array_equal(a, c)
        assert int(np.asarray(a, dtype=np.float64).sum()) == int(c.astype(np.float64).sum())


def test_playback_arrays_outlive_the_reader(tmp_path):
    """Arrays from TraceRecordingReader and scan_recorded_traces survive too."""
    d = tmp_path / "rec"
    _record(d)
    reader = TraceRecordingReader(d)
    kept: list[np.ndarray] = []
    for batch in reader.get_recorded_batches():
        for ep in reader.get_recorded_episodes(batch):
            kept += [*_leaves(ep["observations"]), ep["actions"], ep["rewards"]]
    scan_recorded_traces(d, lambda o, a, r: kept.extend([*_leaves(o), a, r]))
    copies = [a.copy() for a in kept]
    reader.close()
    del reader
    _gone(d)
    for a, c in zip(kept, copies, strict=True):
        assert np.array_equal(a, c)


def test_episode_outlives_its_recording(tmp_path):
    """An Episode object kept alone keeps its data readable."""
    d = tmp_path / "rec"
    _record(d)
    with gym_recording.load(d) as rec:
        ep = rec[2]  # the split episode
        want = (ep.observations["img"].copy(), ep.rewards.copy())
    del rec
    _gone(d)
    assert ep.length == 25
    assert np.array_equal(ep.observations["img"], want[0])
    assert np.array_equal(ep.rewards, want[1])
