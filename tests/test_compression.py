"""Compressed recordings (FORMAT.md §6.2): ``compression="zstd"`` is lossless everywhere.

Every space type, infos and options, vector envs and a real Atari env are recorded compressed
and read back equal to the byte and the dtype; the files carry the codec and raw size in each
reference; ``compress`` and ``decompress`` copy recordings (the original writer's too) into
ones that verify and hold equal episodes; every reader (load, scan, verify, exports) reads
them; bad arguments are refused.
"""

from __future__ import annotations

import gc
import json
import os
import re
import tracemalloc
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
from conftest import (
    ACTION_SPACES,
    OBSERVATION_SPACES,
    SpaceEnv,
    assert_episode_exact,
    record,
    run_episodes,
)

import gym_recording
from gym_recording import RecordingError, TraceFormatError, TraceRecording, scan_recorded_traces
from gym_recording.tools.cli import main as cli
from gym_recording.tools.recode import recode
from gym_recording.tools.verify import verify
from gym_recording.wrappers import TraceRecordingVectorWrapper, TraceRecordingWrapper

COMPAT = Path(__file__).resolve().parent / "data" / "compat"


def _refs(v: Any) -> list[dict[str, Any]]:
    """Every ndarray reference in a parsed batch JSON."""
    if isinstance(v, list):
        return [r for x in v for r in _refs(x)]
    if isinstance(v, dict):
        if v.get("__type") == "ndarray":
            return [v]
        return [r for x in v.values() for r in _refs(x)]
    return []


def _batch_refs(directory: Path) -> list[dict[str, Any]]:
    refs = []
    for p in sorted(directory.glob("openaigym.trace.*.ep*.json")):
        refs += _refs(json.loads(p.read_bytes()))
    return refs


def _bytes(directory: Path, suffix: str) -> int:
    return sum(p.stat().st_size for p in directory.glob(f"openaigym.trace.*{suffix}"))


def _same_field(x: Any, y: Any, where: str) -> None:
    """Two fields read back are equal: the same structure, dtypes, shapes and bytes."""
    assert type(x) is type(y), where
    if isinstance(x, dict):
        assert list(x) == list(y), where
        for k in x:
            _same_field(x[k], y[k], f"{where}.{k}")
    elif isinstance(x, (tuple, list)) and not isinstance(x, np.ndarray):
        assert len(x) == len(y), where
        for i, (u, v) in enumerate(zip(x, y, strict=True)):
            _same_field(u, v, f"{where}[{i}]")
    elif isinstance(x, np.ndarray):
        assert (x.dtype, x.shape) == (y.dtype, y.shape), where
        assert x.tobytes() == y.tobytes(), where
        assert y.flags.writeable is False, where
    else:
        assert repr(x) == repr(y), where


def _assert_same_episodes(
    a: Path | str, b: Path | str, *, infos: bool = False, times: bool = True
) -> None:
    """The recordings ``a`` and ``b`` hold equal episodes, to the byte and the dtype (and
    the same times: one is a copy of the other)."""
    with gym_recording.load(a) as ra, gym_recording.load(b) as rb:
        assert len(ra) == len(rb)
        for x, y in zip(ra, rb, strict=True):
            _same_field(x.observations, y.observations, "observations")
            _same_field(x.actions, y.actions, "actions")
            _same_field(x.rewards, y.rewards, "rewards")
            assert (y.terminated, y.truncated, y.seed) == (x.terminated, x.truncated, x.seed)
            if times:
                assert (y.started_at, y.ended_at) == (x.started_at, x.ended_at)
            if infos:
                assert repr(y.infos) == repr(x.infos)
        assert ra.metadata == rb.metadata and ra.env_id == rb.env_id


# ------------------------------------------------------------------------------ round trips


def test_observation_space_round_trips_compressed(observation_space_name, trace_dir):
    """Observations of every space type come back exactly from a compressed recording."""
    env = SpaceEnv(OBSERVATION_SPACES[observation_space_name])
    traces = record(env, trace_dir, n_episodes=3, seed=11, compression="zstd")
    with gym_recording.load(trace_dir) as rec:
        assert len(rec) == len(traces)
        for ep, trace in zip(rec, traces, strict=True):
            assert_episode_exact(ep, trace)
    assert verify(trace_dir).ok


@pytest.mark.parametrize("action_space_name", sorted(ACTION_SPACES))
def test_action_space_round_trips_compressed(action_space_name, trace_dir):
    env = SpaceEnv(OBSERVATION_SPACES["box_rank1_f32"], ACTION_SPACES[action_space_name])
    traces = record(env, trace_dir, n_episodes=3, seed=5, compression="zstd")
    with gym_recording.load(trace_dir) as rec:
        for ep, trace in zip(rec, traces, strict=True):
            assert_episode_exact(ep, trace)


def test_infos_and_options_arrays_are_compressed_and_come_back(trace_dir):
    """Arrays inside infos and reset options are compressed like fields, and come back."""
    frame = np.zeros((64, 64), np.uint8)
    with TraceRecording(trace_dir, compression="zstd", record_infos=True) as rec:
        rec.add_reset(frame, options={"map": np.ones((32, 32), np.int32)}, info={"f": frame})
        for t in range(3):
            rec.add_step(t, frame + t, 1.0, info={"f": frame + t, "n": np.int16(t)})
        rec.end_episode()
    refs = _batch_refs(trace_dir)
    assert len(refs) >= 6 and all(r.get("codec") == "zstd" for r in refs if r["size"] > 64)
    with gym_recording.load(trace_dir) as r:
        ep = r[0]
        assert ep.options["map"].dtype == np.int32 and (ep.options["map"] == 1).all()
        assert [int(i["f"][0, 0]) for i in ep.infos] == [0, 0, 1, 2]
        assert ep.infos[3]["n"] == np.int16(2) and type(ep.infos[3]["n"]) is np.int16
        assert ep.observations.flags.writeable is False


def test_references_carry_codec_and_raw_size_and_the_default_is_raw(tmp_path):
    """A compressed reference names its codec and raw size; without ``compression`` none does."""
    frames = np.zeros((40, 84, 84), np.uint8)
    frames[:, 20:40, 30:50] = 255
    for name, compression in (("raw", None), ("z", "zstd")):
        with TraceRecording(tmp_path / name, compression=compression) as rec:
            rec.add_reset(frames[0])
            for t in range(1, 40):
                rec.add_step(t % 4, frames[t], 0.0)
            rec.end_episode()
    raw, z = _batch_refs(tmp_path / "raw"), _batch_refs(tmp_path / "z")
    assert not any("codec" in r or "rawsize" in r for r in raw)
    obs = next(r for r in z if r["shape"] == [40, 84, 84])
    assert obs["codec"] == "zstd" and obs["rawsize"] == 40 * 84 * 84 > 100 * obs["size"]
    assert obs["npyoff"] % 8 == 0
    manifest = json.loads(next((tmp_path / "z").glob("*.manifest.json")).read_bytes())
    assert manifest["format_version"] == gym_recording.FORMAT_VERSION == "2.3"
    assert _bytes(tmp_path / "z", ".bin") * 100 < _bytes(tmp_path / "raw", ".bin")
    _assert_same_episodes(tmp_path / "raw", tmp_path / "z", times=False)


@pytest.mark.parametrize("cut", [1, 4, 5, "half"])
def test_a_large_frame_cut_short_is_called_truncated(tmp_path, cut):
    """A frame of 4 MiB or more (read as a stream) whose reference is cut short, in its
    checksum, its last block's header or its data, is refused as truncated (it was "-4 bytes
    after it", or a size "or more")."""
    obs = (np.arange(3 << 20) % 251).astype(np.uint8)
    with TraceRecording(tmp_path / "r", compression="zstd") as rec:
        rec.add_reset(obs)
        rec.add_step(0, obs, 0.0, terminated=True)
    batch = next(p for p in (tmp_path / "r").glob("*.json") if "manifest" not in p.name)
    doc = json.loads(batch.read_bytes())
    ref = doc["episodes"][0]["observations"]
    assert ref["codec"] == "zstd" and ref["rawsize"] == 2 * (3 << 20)
    ref["size"] -= ref["size"] // 2 if cut == "half" else cut
    batch.write_text(json.dumps(doc))
    with gym_recording.load(tmp_path / "r") as rec2, pytest.raises(TraceFormatError) as caught:
        _ = rec2[0].observations
    said = str(caught.value)
    assert "got a truncated one" in said and batch.name in said


def test_zero_step_and_empty_arrays_among_compressed_ones(trace_dir):
    """Empty arrays (a zero-step episode's actions, a zero-size observation dimension) sit
    beside compressed ones, within the blob."""
    with TraceRecording(trace_dir, compression="zstd", record_infos=True) as rec:
        for n in (0, 50, 0):
            rec.add_reset(np.zeros(500, np.float32), info={"e": np.zeros((0, 3))})
            for t in range(n):
                rec.add_step(np.full(2, t, np.float32), np.full(500, t, np.float32), 1.0)
            rec.end_episode()
    assert verify(trace_dir).ok
    with gym_recording.load(trace_dir) as r:
        assert [ep.length for ep in r] == [0, 50, 0]
        assert r[0].actions.shape == (0, 2) and r[0].actions.dtype == np.float32
        assert r[2].infos[0]["e"].shape == (0, 3)
        assert (r[1].observations[7] == 6).all()


@pytest.mark.parametrize("batch_bytes", [200, 5_000_000])
def test_observations_of_no_bytes_are_recorded_compressed(tmp_path, batch_bytes):
    """A Box of shape (0,): each observation an empty array, in small batches (episodes
    split into parts) or one."""
    with TraceRecording(tmp_path, compression="zstd", batch_bytes=batch_bytes) as rec:
        for _ in range(3):
            rec.add_reset(np.zeros((0,), np.float32))
            for t in range(30):
                rec.add_step(t, np.zeros((0,), np.float32), 1.0)
            rec.end_episode()
    assert verify(tmp_path).ok
    with gym_recording.load(tmp_path) as r:
        assert [ep.length for ep in r] == [30, 30, 30]
        assert all(ep.observations.shape == (31, 0) for ep in r)
        assert r[2].observations.dtype == np.float32


def test_arrays_outlive_the_reader_and_read_without_mapping(trace_dir):
    env = SpaceEnv(OBSERVATION_SPACES["box_image_u8"])
    traces = record(env, trace_dir, n_episodes=2, seed=1, compression="zstd")
    for mmap in (True, False):
        with gym_recording.load(trace_dir, mmap=mmap) as rec:
            eps = list(rec)
        for ep, trace in zip(eps, traces, strict=True):  # (after close)
            assert_episode_exact(ep, trace)


def test_many_batches_and_scan(tmp_path):
    """Small batches: episodes across many compressed batches, read by load and scan."""
    env = SpaceEnv(OBSERVATION_SPACES["box_rank2_i32"])
    traces = record(env, tmp_path, n_episodes=12, seed=2, batch_bytes=300, compression="zstd")
    assert len(list(tmp_path.glob("*.ep*.json"))) > 3
    with gym_recording.load(tmp_path) as rec:
        for ep, trace in zip(rec, traces, strict=True):
            assert_episode_exact(ep, trace)
    scanned: list[Any] = []
    scan_recorded_traces(str(tmp_path), lambda o, a, r: scanned.append((o, a, r)))
    assert len(scanned) == len(traces)
    for (_, _, rews), trace in zip(scanned, traces, strict=True):
        assert np.asarray(rews).tolist() == [float(r) for r in trace.rewards]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_vector_env_compressed(mode, tmp_path):
    envs = gymnasium.make_vec("CartPole-v1", num_envs=3, vectorization_mode=mode)
    with TraceRecordingVectorWrapper(envs, tmp_path, compression="zstd") as venv:
        venv.reset(seed=0)
        venv.action_space.seed(0)
        for _ in range(120):
            venv.step(venv.action_space.sample())
    with gym_recording.load(tmp_path) as rec:
        assert len(rec) >= 3 and sum(ep.length for ep in rec) > 0
    assert verify(tmp_path).ok
    assert any(r.get("codec") == "zstd" for r in _batch_refs(tmp_path))


def test_real_atari_frames_compress_over_100x_losslessly(tmp_path):
    """Pong's raw frames take >= 100x less disk compressed, and come back equal."""
    pytest.importorskip("ale_py")
    import ale_py

    gymnasium.register_envs(ale_py)
    for name, compression in (("raw", None), ("z", "zstd")):
        env = gymnasium.make("ALE/Pong-v5", max_episode_steps=150)
        with TraceRecordingWrapper(env, tmp_path / name, compression=compression) as wrapped:
            run_episodes(wrapped, 2, seed=3)
    raw, z = _bytes(tmp_path / "raw", ""), _bytes(tmp_path / "z", "")
    assert raw >= 100 * z, f"{raw} bytes raw, {z} compressed"
    _assert_same_episodes(tmp_path / "raw", tmp_path / "z", times=False)


# ------------------------------------------------------------------------- compress, decompress


def test_compress_and_decompress_commands(tmp_path, capsys):
    """compress then decompress: each copy verifies and holds equal episodes, infos too."""
    src = tmp_path / "src"
    for k, name in enumerate(("dict_nested", "box_image_u8")):
        env = SpaceEnv(OBSERVATION_SPACES[name])
        record(env, src, n_episodes=4, seed=4 + k, record_infos=True, batch_bytes=1500)
    with TraceRecording(src, record_infos=True, batch_bytes=30_000) as rec:  # compressible
        for e in range(3):
            rec.add_reset(np.zeros((32, 32), np.uint8), info={"e": e})
            for t in range(20):
                frame = np.full((32, 32), t, np.uint8)
                rec.add_step(t % 2, frame, 0.5, terminated=t == 19, info={"map": frame})
    assert cli(["compress", str(src), str(tmp_path / "z"), "--level", "9"]) == 0
    assert cli(["decompress", str(tmp_path / "z"), str(tmp_path / "raw")]) == 0
    for d in ("z", "raw"):
        assert cli(["verify", str(tmp_path / d)]) == 0
        _assert_same_episodes(src, tmp_path / d, infos=True)
    assert any(r.get("codec") for r in _batch_refs(tmp_path / "z"))
    assert not any("codec" in r for r in _batch_refs(tmp_path / "raw"))
    assert cli(["compress", str(src), str(tmp_path / "z")]) == 1  # (holds a recording)
    assert "already holds a recording" in capsys.readouterr().err


def test_decompress_frees_each_batch_as_it_goes(tmp_path):
    """A copy holds one batch's arrays at a time, freed as it is written, not when the garbage
    collector runs: decompressing 1.2 GB of Pong-like frames (7 MB compressed) peaked at
    1.2 GB, each batch's arrays kept by a reference cycle. Counted here with the collector
    off, by tracemalloc (which sees NumPy's buffers)."""
    src = tmp_path / "z"
    frame = np.zeros((64, 64, 3), np.uint8)
    with TraceRecording(src, compression="zstd", batch_bytes=1) as rec:
        for _ in range(12):  # (a batch each: 258 KB raw)
            rec.add_reset(frame)
            for t in range(20):
                frame[t % 64] = t
                rec.add_step(0, frame, 0.0, terminated=t == 19)
    raw = 12 * 21 * frame.nbytes
    gc.disable()
    tracemalloc.start()
    try:
        assert cli(["decompress", str(src), str(tmp_path / "raw")]) == 0
        kept, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        gc.enable()
    assert kept < raw / 4, f"{kept} bytes kept after decompressing {raw} bytes"
    _assert_same_episodes(src, tmp_path / "raw")


def test_compress_of_a_damaged_recording_copies_nothing(tmp_path, capsys):
    """The last batch of the last writer is damaged: nothing is written (not the batches
    before it: a copy that verifies but lacks episodes), and the exit code says a problem
    with the recording (1), not bad usage (2)."""
    src = tmp_path / "src"
    for w in range(2):
        with TraceRecording(src, batch_bytes=500) as rec:
            for e in range(4):
                rec.add_reset(np.zeros(8), seed=10 * w + e)
                for t in range(5):
                    rec.add_step(t, np.full(8, t, float), 1.0, terminated=t == 4)
    last = sorted(src.glob("*.ep*.json"))[-1]
    last.write_bytes(last.read_bytes()[:-10])
    assert cli(["compress", str(src), str(tmp_path / "z")]) == 1
    assert str(last.name) in capsys.readouterr().err
    assert not (tmp_path / "z").exists()


def _one_episode(directory: Path | str) -> None:
    with TraceRecording(directory) as rec:
        rec.add_reset(np.zeros(8))
        rec.add_step(0, np.ones(8), 1.0, terminated=True)


def test_a_copy_inside_the_recording_around_it_or_onto_it_is_refused(tmp_path, capsys):
    """OUT inside DIR, OUT holding DIR, or DIR itself by another path (a symbolic link, a
    trailing slash, DIR/.) is refused with a RecordingError, by the function and by both
    commands (exit 1), before anything is written; a sibling named alike is a copy."""
    src = tmp_path / "rec"
    _one_episode(src)
    (tmp_path / "link").symlink_to(src)
    before = sorted(tmp_path.rglob("*"))
    cases = {
        "is inside it": [src / "sub", tmp_path / "link" / "sub", f"{src}/./sub/"],
        "holds it": [tmp_path, f"{tmp_path}/link/..", f"file://{tmp_path}/"],
        "is that same directory": [tmp_path / "link", f"{src}/", f"{src}/.", f"file://{src}"],
    }
    for how, outs in cases.items():
        for out in outs:
            match = f"apart from the recording {re.escape(str(src))}, .* {how};"
            with pytest.raises(RecordingError, match=match):
                recode(src, out, compression="zstd")
            for command in ("compress", "decompress"):
                assert cli([command, str(src), str(out)]) == 1
                err = capsys.readouterr().err
                assert err.count("\n") == 1 and f"{out} {how}; give a new directory" in err
    assert sorted(tmp_path.rglob("*")) == before
    assert cli(["compress", str(src), f"{src}-2"]) == 0
    _assert_same_episodes(src, Path(f"{src}-2"))


def test_a_remote_copy_inside_or_around_the_recording_is_refused(tmp_path):
    """For URLs the same holds of their text, trailing slashes aside (an object store takes
    `.` in a key as it is): refused before anything is written; a sibling named alike is a
    copy."""
    fsspec = pytest.importorskip("fsspec")
    fs, root = fsspec.filesystem("memory"), f"/gymrec-test-{os.getpid()}-{tmp_path.name}"
    src = f"memory://{root}/rec"
    try:
        _one_episode(src)
        before = fs.find(root)
        for out, how in (
            (f"{src}/sub", "is inside it"),
            (f"memory://{root}", "holds it"),
            (f"{src}/", "is that same directory"),
        ):
            match = f"apart from the recording {re.escape(src)}, .* {how};"
            with pytest.raises(RecordingError, match=match):
                recode(src, out, compression=None)
        assert fs.find(root) == before
        recode(src, f"{src}-2", compression="zstd")
        _assert_same_episodes(src, f"{src}-2")
    finally:
        if fs.exists(root):
            fs.rm(root, recursive=True)


def test_compress_of_a_recording_still_written_copies_what_it_checked(tmp_path, monkeypatch):
    """A writer adds a batch while compress checks the others: the copy holds the batches it
    checked and copied, and verifies (its manifest listed the new batch, never copied). The
    batch is added from compress's check of a batch (patched: one way to time it)."""
    from gym_recording.tools import recode as recode_module

    src = tmp_path / "src"
    rec = TraceRecording(src)
    for e in range(2):
        rec.add_reset(np.zeros(8), seed=e)
        rec.add_step(0, np.ones(8), 1.0, terminated=True)
        rec.end_episode()
        rec.save_complete()
    check = recode_module.read_batch

    def check_while_written(*args):
        if rec.episode_count == 2:
            rec.add_reset(np.zeros(8), seed=2)
            rec.add_step(0, np.ones(8), 1.0, terminated=True)
            rec.end_episode()
            rec.save_complete()
        return check(*args)

    monkeypatch.setattr(recode_module, "read_batch", check_while_written)
    assert cli(["compress", str(src), str(tmp_path / "z")]) == 0
    rec.close()
    assert cli(["verify", str(tmp_path / "z")]) == 0
    with gym_recording.load(tmp_path / "z") as r:
        assert [ep.seed for ep in r] == [0, 1]


def test_split_episodes_keep_their_parts_when_compressed(tmp_path):
    """An episode split across batches is compressed part by part and joins again."""
    src = tmp_path / "src"
    env = SpaceEnv(OBSERVATION_SPACES["box_image_u8"], min_len=20, max_len=40)
    record(env, src, n_episodes=2, seed=6, batch_bytes=2000, max_steps=40)
    manifest = json.loads(next(src.glob("*.manifest.json")).read_bytes())
    assert any(b.get("continues") for b in manifest["batches"])
    recode(src, tmp_path / "z", compression="zstd")
    _assert_same_episodes(src, tmp_path / "z")
    assert verify(tmp_path / "z").ok


@pytest.mark.parametrize("case", sorted(p.name for p in COMPAT.iterdir() if p.is_dir()))
def test_original_writer_traces_compress_and_decompress(case, tmp_path):
    """Version 1 recordings stay version 1 through compress and decompress, values intact."""
    assert cli(["compress", str(COMPAT / case), str(tmp_path / "z")]) == 0
    assert cli(["decompress", str(tmp_path / "z"), str(tmp_path / "raw")]) == 0
    for d in ("z", "raw"):
        _assert_same_episodes(COMPAT / case, tmp_path / d)
        manifest = next((tmp_path / d).glob("*.manifest.json")).read_bytes()
        assert b"format_version" not in manifest
    assert {p.name for p in (tmp_path / "raw").iterdir()} == {
        p.name for p in (COMPAT / case).iterdir() if p.name.startswith("openaigym.trace.")
    }


def test_a_batch_of_no_array_that_names_no_blob_stays_so(tmp_path):
    """A version 2 batch whose episodes hold no array may name no blob (FORMAT.md §9: its
    ``bytes`` are its JSON's): compress and decompress write none, and count none."""
    src = tmp_path / "src"
    with TraceRecording(src, batch_bytes=1) as rec:
        rec.add_reset("alone")  # (text: no array but its actions' and rewards')
    (manifest,) = src.glob("*.manifest.json")
    (batch,) = src.glob("*.ep*.json")
    doc = json.loads(batch.read_text())
    doc["episodes"][0].update(actions=[], rewards=[])  # (lists: no array at all)
    batch.write_text(json.dumps(doc))
    next(src.glob("*.ep*.bin")).unlink()
    m = json.loads(manifest.read_text())
    del m["batches"][0]["bin"]
    m["batches"][0]["bytes"] = batch.stat().st_size
    manifest.write_text(json.dumps(m))
    assert verify(src).ok
    for compression, out in (("zstd", tmp_path / "z"), (None, tmp_path / "raw")):
        recode(src, out, compression=compression)
        assert verify(out).ok, verify(out).problems
        assert not list(out.glob("*.bin"))
        with gym_recording.load(out) as r:
            assert [ep.observations for ep in r] == [["alone"]]


def test_exports_read_compressed_recordings(tmp_path):
    env = SpaceEnv(OBSERVATION_SPACES["box_rank1_f32"])
    record(env, tmp_path / "raw", n_episodes=3, seed=8)
    recode(tmp_path / "raw", tmp_path / "z", compression="zstd")
    for d in ("raw", "z"):
        assert cli(["export", str(tmp_path / d), "--to", "npz", str(tmp_path / f"{d}.npz")]) == 0
    a, b = np.load(tmp_path / "raw.npz"), np.load(tmp_path / "z.npz")
    assert sorted(a.files) == sorted(b.files)
    for k in a.files:
        if k == "metadata":  # (names the directory exported)
            continue
        assert a[k].dtype == b[k].dtype and a[k].tobytes() == b[k].tobytes(), k


# ------------------------------------------------------------------------------ refusals


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"compression": "gzip"}, "expected compression to be None or one of 'zstd'"),
        ({"compression": "zstd", "compression_level": 0}, "from 1 to 22"),
        ({"compression": "zstd", "compression_level": 23}, "from 1 to 22"),
        ({"compression": "zstd", "compression_level": True}, "from 1 to 22"),
        (
            {"compression": "zstd", "compression_level": 3.0},
            r"an int from 1 to 22, got 3.0 \(a float\)",
        ),
        ({"compression_level": 3}, "needs compression='zstd'"),
        ({"batch_bytes": 0}, "batch_bytes to be a positive int, got 0"),
        ({"batch_bytes": 1e6}, "batch_bytes to be a positive int, got 1000000.0"),
    ],
)
def test_bad_compression_arguments_are_refused(kwargs, match, tmp_path):
    with pytest.raises(ValueError, match=match):
        TraceRecording(tmp_path, **kwargs)
    with pytest.raises(ValueError, match=match):
        TraceRecordingWrapper(gymnasium.make("CartPole-v1"), tmp_path / "w", **kwargs)
    assert not list(tmp_path.iterdir())  # (refused before a directory is made)


def test_numpy_integers_are_taken_for_level_and_batch_bytes(tmp_path):
    with TraceRecording(
        tmp_path, compression="zstd", compression_level=np.int64(9), batch_bytes=np.int32(4000)
    ) as rec:
        rec.add_reset(np.zeros(3))
    assert rec.batch_bytes == 4000 and type(rec.batch_bytes) is int


def test_record_command_compresses(tmp_path, capsys):
    args = ["record", "CartPole-v1", "--episodes", "2", "--dir", str(tmp_path / "r")]
    assert cli([*args, "--compression", "zstd", "--compression-level", "5"]) == 0
    assert any(r.get("codec") == "zstd" for r in _batch_refs(tmp_path / "r"))
    assert cli([*args[:-1], str(tmp_path / "bad"), "--compression", "zstd",
                "--compression-level", "40"]) == 2  # fmt: skip
    assert "from 1 to 22" in capsys.readouterr().err


@pytest.mark.parametrize("n", [0, 1, 100, 3_000_000])
def test_frames_made_piece_by_piece_declare_their_size(n: int) -> None:
    """The codec's FrameStream (record/frames.py compresses rendered frames with it, piece
    by piece, so its frames are never in a file the public API hands over whole) writes
    the content size into the header, as FORMAT.md §6.2 requires; damaged, it is refused."""
    from gym_recording.format.codec import CodecError, FrameStream, decompress

    data = np.random.default_rng(n).integers(0, 3, n, dtype=np.uint8).tobytes()
    stream = FrameStream(3)
    for _ in range(2):  # (one stream makes frame after frame)
        stream.start()
        for i in range(0, n, 999_983):
            stream.add(data[i : i + 999_983])
        frame = stream.finish()
        assert decompress(frame, n, "zstd").tobytes() == data
    with pytest.raises(CodecError):
        decompress(frame[:-1], n, "zstd")
    with pytest.raises(CodecError):
        decompress(frame, n + 1, "zstd")


def test_frames_made_piece_by_piece_at_the_highest_levels_keep_level_19s_window() -> None:
    """Not knowing a frame's size, zstd would give levels 20-22 a 128 MiB window (and ~700 MB
    of tables a stream, one stream per rendering writer): FrameStream keeps level 19's."""
    import zstandard

    from gym_recording.format.codec import FrameStream, decompress

    data = np.random.default_rng(0).integers(0, 3, 300_000, dtype=np.uint8).tobytes()
    for level in (19, 22):
        stream = FrameStream(level)
        stream.start()
        stream.add(data)
        frame = stream.finish()
        assert zstandard.get_frame_parameters(frame).window_size <= 8 * 1024 * 1024
        assert decompress(frame, len(data), "zstd").tobytes() == data


def test_a_compressor_error_is_a_write_error_and_the_batch_is_written_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """zstd failing twice (out of memory, say) is a WriteError, as a failed write is: the
    call that met it records what it brought, and the batch is written at a later flush.
    (It patches the codec's compressor: the one way to make zstd fail on demand.)"""
    from gym_recording.format import codec

    compress, failures = codec.Compressor.compress, [2]  # (the write and its retry)

    def failing(self: Any, data: Any) -> Any:
        if failures[0]:
            failures[0] -= 1
            raise MemoryError("zstd could not allocate")
        return compress(self, data)

    monkeypatch.setattr(codec.Compressor, "compress", failing)
    rng = np.random.default_rng(0)
    expected, met = [], []
    rec = TraceRecording(tmp_path, batch_bytes=1500, compression="zstd")
    for _ in range(30):
        obs = [rng.random(8)]
        for t in range(21):
            try:
                if t == 0:
                    rec.add_reset(obs[0])
                else:
                    obs.append(rng.random(8))
                    rec.add_step(t, obs[-1], 1.0)
            except gym_recording.WriteError as exc:
                met.append(str(exc))
        expected.append(np.stack(obs))
    rec.close()
    assert len(met) == 1 and "could not encode or compress the batch" in met[0] and not failures[0]
    with gym_recording.load(tmp_path) as r:
        got = [ep.observations for ep in r]
    assert len(got) == 30 and all(np.array_equal(a, b) for a, b in zip(got, expected, strict=True))


def test_a_copy_of_a_later_minor_version_keeps_its_label_and_keys(tmp_path):
    """A recording of a later minor version (a per-episode key this reader does not know,
    which it ignores: §4) is copied with that key and that version, not relabelled with
    this writer's, whose readers the key's rules may not hold for."""
    src = tmp_path / "src"
    with TraceRecording(src) as rec:
        rec.add_reset(np.zeros((64, 64), np.uint8), seed=3)
        for t in range(20):
            rec.add_step(0, np.full((64, 64), t, np.uint8), 1.0, terminated=t == 19)
    (batch,) = src.glob("*.ep*.json")
    doc = json.loads(batch.read_bytes())
    doc["episodes"][0]["policy_id"] = "pi-v3"
    batch.write_text(json.dumps(doc))
    (manifest,) = src.glob("*.manifest.json")
    m = json.loads(manifest.read_bytes())
    m["format_version"] = "2.10"
    m["batches"][0]["bytes"] = batch.stat().st_size + batch.with_suffix(".bin").stat().st_size
    manifest.write_text(json.dumps(m))
    for out, compression in (("z", "zstd"), ("raw", None)):
        recode(src, tmp_path / out, compression=compression)
        (copied,) = (tmp_path / out).glob("*.manifest.json")
        assert json.loads(copied.read_bytes())["format_version"] == "2.10"  # (> 2.3: by number)
        (copied,) = (tmp_path / out).glob("*.ep*.json")
        assert json.loads(copied.read_bytes())["episodes"][0]["policy_id"] == "pi-v3"


def test_an_array_too_large_for_the_memory_left_is_a_read_error(tmp_path: Path) -> None:
    """A compressed array's size is what its reference declares (a 70 KB file declared 2 GiB
    of frames): where it cannot be allocated, the reader says so, naming the file and the
    size (NumPy's own MemoryError came out of `info`), and the episodes before it are read."""
    import subprocess
    import sys

    big = np.zeros(40 << 20, np.uint8)  # (an episode of 120 MiB raw, ~12 KB compressed)
    with TraceRecording(tmp_path / "rec", compression="zstd", batch_bytes=1) as rec:
        for _ in range(2):  # (a batch each)
            rec.add_reset(big)
            rec.add_step(0, big, 1.0)
            rec.add_step(0, big, 1.0, terminated=True)
    code = (
        "import re, resource, sys, gym_recording\n"
        "rec = gym_recording.load(sys.argv[1])\n"
        "print(rec[0].length)\n"
        "rec[0].observations[-1, -1]\n"
        "vm = int(re.search(r'VmSize:\\s+(\\d+)', open('/proc/self/status').read())[1]) * 1024\n"
        "resource.setrlimit(resource.RLIMIT_AS, (vm + (64 << 20), resource.RLIM_INFINITY))\n"
        "try:\n"
        "    rec[1]\n"
        "except gym_recording.ReadError as exc:\n"
        "    print(exc)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "rec")], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    first, said = proc.stdout.splitlines()
    assert first == "2"
    assert re.search(r"ep000000001\.json: episodes\[0\]\.observations: not enough memory", said)
    assert "the 125,829,120 bytes its reference declares" in said
