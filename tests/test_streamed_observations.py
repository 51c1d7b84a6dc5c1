"""A compressed recording compresses its image observations as they come (each episode's
part one zstd frame, made by a worker thread of zstd's), where a raw one keeps a batch of
them until it is written. Either way the episodes read back the same: across episodes cut
into parts, a step refused after its observation was stored, observations that stop
fitting the layout, vector envs, and envs that reuse their observation's buffer."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import gym_recording
from gym_recording import RecordingError, TraceRecording, TraceRecordingVectorWrapper

SHAPE = (64, 64, 3)  # 12 KiB a frame: a compressed batch splits an episode at 6,826 rows


def frame(t: int, shape: tuple[int, ...] = SHAPE, out: np.ndarray | None = None) -> np.ndarray:
    f = np.zeros(shape, np.uint8) if out is None else out
    f[...] = 0
    f[0, 0, 0], f[-1, -1, 2] = t % 251, t // 251
    f[t % shape[0], :, 1] = 7  # (a moving line, so that consecutive frames differ)
    return f


def episodes(d: Path) -> list[Any]:
    assert gym_recording.verify(d).ok
    with gym_recording.load(d) as rec:
        return list(rec)


def assert_same(a: list[Any], b: list[Any]) -> None:
    """The episodes of ``a`` and ``b`` are equal to the byte and the dtype."""
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        for field in ("observations", "actions", "rewards"):
            u, v = getattr(x, field), getattr(y, field)
            if isinstance(u, np.ndarray):
                assert isinstance(v, np.ndarray) and u.dtype == v.dtype and u.shape == v.shape
                assert u.tobytes() == v.tobytes()
            else:
                assert len(u) == len(v)
                for p, q in zip(u, v, strict=True):
                    np.testing.assert_array_equal(p, q, strict=True)
        assert (x.terminated, x.truncated, x.seed, x.infos) == (
            y.terminated,
            y.truncated,
            y.seed,
            y.infos,
        )


def record(d: Path, compression: str | None, plan: list[Any], **kwargs: Any) -> None:
    """Replay ``plan`` into a TraceRecording: ``("reset", obs)``, ``("step", obs)``, or
    ``("bad", obs)`` (a step whose info is refused); one buffer for every observation, as
    an env that reuses it."""
    rec = TraceRecording(d, compression=compression, **kwargs)
    buf: dict[tuple[int, ...], np.ndarray] = {}
    for t, (kind, shape) in enumerate(plan):
        if shape is None:
            obs: Any = f"text {t}"
        else:
            obs = frame(t, shape, buf.setdefault(shape, np.empty(shape, np.uint8)))
        if kind == "reset":
            rec.add_reset(obs, seed=t)
        elif kind == "step":
            rec.add_step(t & 1, obs, float(t), info={"t": t})
        else:
            bad = {"when": np.array(["2020-01-01"], dtype="datetime64[D]")}
            with pytest.raises(RecordingError, match="info"):
                rec.add_step(t & 1, obs, float(t), info=bad)
    rec.close()


def test_streamed_observations_read_back_as_raw_ones(tmp_path: Path) -> None:
    plan: list[Any] = []
    for steps in (3, 0, 1, 7_000, 5):  # (7,000 rows: that episode is written in two parts)
        plan.append(("reset", SHAPE))
        plan += [("step", SHAPE)] * steps
    plan += [("step", SHAPE), ("bad", SHAPE), ("reset", SHAPE), ("step", SHAPE)]
    raw, packed = tmp_path / "raw", tmp_path / "zstd"
    record(raw, None, plan, record_infos=True)
    record(packed, "zstd", plan, record_infos=True)
    got = episodes(packed)
    assert [ep.length for ep in got] == [3, 0, 1, 7_000, 6, 1]  # (cut before the bad step)
    assert_same(episodes(raw), got)
    long = got[3].observations
    assert [int(long[t, 0, 0, 0]) for t in (0, 6_999, 7_000)] == [
        (7 + t) % 251 for t in (0, 6_999, 7_000)
    ]
    assert any(b'"continues":true' in f.read_bytes() for f in packed.glob("*.json"))
    raw_bytes = sum(f.stat().st_size for f in raw.iterdir())
    assert sum(f.stat().st_size for f in packed.iterdir()) * 50 < raw_bytes


def test_observations_that_stop_fitting_are_read_back_from_the_stream(tmp_path: Path) -> None:
    """A smaller observation mid-episode, then a text one: the field goes per step, taking
    every buffered row back from the zstd frames (finished ones, and the one begun)."""
    plan: list[Any] = [("reset", SHAPE), *[("step", SHAPE)] * 4, ("reset", SHAPE)]
    plan += [("step", SHAPE)] * 3 + [("step", (8, 8, 3)), ("step", None), ("step", SHAPE)]
    raw, packed = tmp_path / "raw", tmp_path / "zstd"
    record(raw, None, plan)
    record(packed, "zstd", plan)
    got = episodes(packed)
    assert [ep.length for ep in got] == [4, 6]
    assert_same(episodes(raw), got)
    assert got[1].observations[5] == "text 10"


def test_streamed_observations_are_the_same_with_the_stream_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """record/frames.py's STREAM off (the reason this test reaches into the record layer)
    compresses the observations with their batch: the same episodes."""
    from gym_recording.record import frames

    plan: list[Any] = [("reset", SHAPE), *[("step", SHAPE)] * 30, ("reset", SHAPE), ("step", SHAPE)]
    record(tmp_path / "on", "zstd", plan)
    monkeypatch.setattr(frames, "STREAM", False)
    record(tmp_path / "off", "zstd", plan)
    assert_same(episodes(tmp_path / "off"), episodes(tmp_path / "on"))


class _Images(gym.Env[np.ndarray, int]):
    """Image observations in one buffer it reuses; episodes of 1, 4, 2, 9, ... steps."""

    observation_space = gym.spaces.Box(0, 255, SHAPE, np.uint8)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, offset: int = 0) -> None:
        self._buf = np.zeros(SHAPE, np.uint8)
        self._t, self._left, self._episode = offset * 1000, 0, offset

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self._episode += 1
        self._left = (1, 4, 2, 9)[self._episode % 4]
        self._t += 1
        return frame(self._t, out=self._buf), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        self._t += 1
        self._left -= 1
        return frame(self._t, out=self._buf), float(action), self._left == 0, False, {}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_vector_env_streams_each_sub_envs_observations(tmp_path: Path, mode: str) -> None:
    def run(d: Path, compression: str | None) -> None:
        fns = [lambda i=i: _Images(i) for i in range(3)]
        venv: Any = (
            gym.vector.SyncVectorEnv(fns) if mode == "sync" else gym.vector.AsyncVectorEnv(fns)
        )
        with TraceRecordingVectorWrapper(venv, d, compression=compression) as env:
            env.reset(seed=0)
            for i in range(60):
                env.step(np.full(3, i & 1))

    run(tmp_path / "raw", None)
    run(tmp_path / "zstd", "zstd")
    got = episodes(tmp_path / "zstd")
    assert len(got) > 20
    assert_same(episodes(tmp_path / "raw"), got)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_frees_a_stream_with_workers_without_hanging() -> None:
    """A child forked while a stream's zstd workers run has none of them: freeing their
    context there would wait for them forever. The child closes and drops the stream and
    exits; the parent's stream goes on. (A stream is made directly, in the format layer:
    nothing public frees one in a child, which leaves the recording to its parent.)"""
    import gc
    import time

    from gym_recording.format.codec import FrameStream, decompress

    stream = FrameStream(3, threads=1)
    stream.start()
    rows = [frame(t).tobytes() for t in range(40)]
    for r in rows[:20]:
        stream.add(r)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        stream.close()
        del stream
        gc.collect()
        os._exit(0)
    deadline = time.monotonic() + 30
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung freeing the stream")
        time.sleep(0.05)
    assert os.waitstatus_to_exitcode(status) == 0
    for r in rows[20:]:
        stream.add(r)
    data = b"".join(rows)
    assert decompress(stream.finish(), len(data), "zstd").tobytes() == data


@pytest.mark.parametrize("keep", [True, False])
def test_a_part_begun_at_a_row_compressed_already_reads_it_back(keep: bool) -> None:
    """A stream holds back the last row it was given only where the recording says a part
    may begin with it (``settle(keep=True)``): where the next step may cut the episode.
    Where the room shrinks between steps all the same (a ``save_complete()`` that sizes
    the batches anew), a part begins at a row compressed already: the row is read back
    from its part, and both parts hold it. (The stream is driven directly, in the record
    layer: public calls get there only through the batch sizes' history.)"""
    from gym_recording.format.codec import Compressor, decompress
    from gym_recording.record.frames import StreamedFrames

    stream = StreamedFrames(np.dtype(np.uint8), SHAPE, Compressor(3))
    buf = np.empty(SHAPE, np.uint8)
    for t in range(5):
        assert stream.put(frame(t, out=buf))  # (one buffer, rewritten: as an env reuses it)
        stream.settle(keep and t == 4)
    stream.begin_part(4)  # row 4 ends the first part and begins the second
    for t in range(5, 8):
        assert stream.put(frame(t, out=buf))
        stream.settle(False)
    taken = stream.take(0, 8)
    stream.release(8)  # (the batch handed to its write: the last part finished)
    for start, stop in ((0, 5), (4, 8)):
        part = taken[start:stop]
        rows = decompress(part.frame(), part.nbytes, "zstd").reshape(-1, *SHAPE)
        assert [frame(t).tobytes() for t in range(start, stop)] == [r.tobytes() for r in rows]
    stream.close()


@pytest.mark.parametrize("taken", [False, True], ids=["before-zstd-takes-it", "after"])
def test_an_interrupt_in_the_compressor_leaves_each_step_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, taken: bool
) -> None:
    """Ctrl-C while a step's observation is handed to zstd: at the end of the step, or at
    the start of the next (a row held back while the batch is full: infos fill the small
    batches); before zstd takes the row, or after (Python raises the interrupt once zstd's
    call returns). The step is kept whole or not at all, the recording goes on, and each
    kept step's action, observation and reward stay together. (The codec's FrameStream
    raises the interrupt: the reason this test reaches into the format layer.)"""
    from gym_recording.format import codec

    add = codec.FrameStream.add

    def interrupting(n: int) -> Any:
        """FrameStream.add, but for its n-th call, which is interrupted."""
        calls = [0]

        def interrupted(self: Any, data: Any) -> None:
            calls[0] += 1
            if calls[0] == n and taken:
                add(self, data)
            if calls[0] == n:
                raise KeyboardInterrupt
            add(self, data)

        return interrupted

    for n in range(1, 40):
        monkeypatch.setattr(codec.FrameStream, "add", interrupting(n))
        d = tmp_path / str(n)
        rec = TraceRecording(d, compression="zstd", batch_bytes=3000, record_infos=True)
        obs = np.zeros(SHAPE, np.uint8)  # (one buffer, drawn again every step)
        t = 0
        for _ in range(10):  # (episodes of 3 steps: batches end between them)
            obs[...] = t = t + 1
            try:
                rec.add_reset(obs)
            except KeyboardInterrupt:
                if not rec.in_episode:  # (interrupted before it began: begin it again)
                    rec.add_reset(obs)
            for k in range(3):
                obs[...] = t = t + 1
                with contextlib.suppress(KeyboardInterrupt):
                    rec.add_step(t, obs, float(t), k == 2, info={"pad": "x" * 400})
        rec.close()
        monkeypatch.setattr(codec.FrameStream, "add", add)
        got = episodes(d)
        assert len(got) == 10
        for ep in got:
            marks = ep.observations[:, 0, 0, 0].tolist()
            assert marks[1:] == ep.actions.tolist() == ep.rewards.tolist()
            assert marks == sorted(set(marks))
        assert sum(ep.length for ep in got) >= 29
