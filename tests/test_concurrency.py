"""Many writers, one directory: 8 processes, and 8 threads with separate wrappers.

While the writers record (small batches, so that manifests change all the time), a reader loads
the directory again and again and reads every episode it lists. It must never fail, and what
it sees of each writer must be a prefix of that writer's episodes, exact to the byte: only
complete batches. At the end nothing is lost and nothing collides: one manifest per writer,
every episode there once.
"""

from __future__ import annotations

import functools
import os
import pickle
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

import gym_recording
from gym_recording import RecordingClosedError, RecordingError, TraceRecording
from gym_recording.format.names import TEMP_PREFIX
from gym_recording.tools.verify import verify
from gym_recording.wrappers import TraceRecordingVectorWrapper, TraceRecordingWrapper

sys.path.insert(0, str(Path(__file__).resolve().parent))
import crash_harness as ch

WRITERS = 8
EPISODES = 10
BATCH_BYTES = 8_000


@functools.cache
def _expected(trial_seed: int, i: int) -> ch.Expected:
    return ch.expected_episode(trial_seed, i)


def _check_snapshot(directory: Path, seeds: set[int]) -> int:
    """Read everything; each writer's episodes are the first ones of its sequence, exact."""
    with gym_recording.load(directory) as rec:
        writer_seed = {m.writer: m.metadata["trial_seed"] for m in rec.writers}
        assert set(writer_seed.values()) <= seeds
        assert len(writer_seed) == len(rec.writers)  # no two manifests of one writer
        count: dict[str, int] = {}
        for ep in rec:
            ts = writer_seed[ep.writer]
            k = count.get(ep.writer, 0)
            count[ep.writer] = k + 1
            assert ep.seed == ch.episode_seed(ts, k), (ep.writer, k, ep.seed)
            ch.assert_episode(ep, _expected(ts, k))
        return len(rec)


def _read_while(directory: Path, seeds: set[int], busy: Any) -> tuple[int, int]:
    """Load and read the directory until ``busy()`` is false; return (loads, max episodes)."""
    loads, most = 0, 0
    while busy():
        most = max(most, _check_snapshot(directory, seeds))
        loads += 1
    return loads, most


def _check_final(directory: Path, seeds: set[int]) -> None:
    assert _check_snapshot(directory, seeds) == len(seeds) * EPISODES
    with gym_recording.load(directory) as rec:
        assert sorted(m.metadata["trial_seed"] for m in rec.writers) == sorted(seeds)
    names = os.listdir(directory)
    assert not [n for n in names if n.startswith(TEMP_PREFIX)]
    assert sum(n.endswith(".manifest.json") for n in names) == len(seeds)
    report = verify(directory)
    assert report.ok, report.lines()
    assert report.episodes == len(seeds) * EPISODES


def test_eight_processes_and_a_reader(tmp_path):
    """8 recorder processes write into one directory while a reader reads it in a loop."""
    seeds = set(range(100, 100 + WRITERS))
    args = [str(BATCH_BYTES), str(EPISODES)]
    procs = [
        ch.subprocess.Popen(
            [sys.executable, ch.HARNESS, "child", "run", str(tmp_path), str(s), *args],
            stdout=ch.subprocess.DEVNULL,
            stderr=ch.subprocess.PIPE,
            text=True,
        )
        for s in sorted(seeds)
    ]
    try:
        loads, most = _read_while(tmp_path, seeds, lambda: any(p.poll() is None for p in procs))
    finally:
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
    print(f"8 processes: {loads} loads while writing, up to {most} episodes seen")
    assert loads >= 1
    _check_final(tmp_path, seeds)


def test_eight_threads_with_separate_wrappers(tmp_path):
    """8 threads, each with its own wrapper, write into one directory while a reader reads."""
    seeds = set(range(200, 200 + WRITERS))
    errors: list[BaseException] = []

    def record(ts: int) -> None:
        try:
            env = TraceRecordingWrapper(
                ch.CrashEnv(),
                tmp_path,
                batch_bytes=BATCH_BYTES,
                record_infos=True,
                metadata={"trial_seed": ts},
            )
            with env:
                for i in range(EPISODES):
                    rng = ch.episode_actions(ts, i)
                    env.reset(seed=ch.episode_seed(ts, i))
                    done = False
                    while not done:
                        _, _, terminated, truncated, _ = env.step(int(rng.integers(0, 4)))
                        done = terminated or truncated
                    time.sleep(0.001)  # let the others and the reader interleave
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=record, args=(s,)) for s in sorted(seeds)]
    for t in threads:
        t.start()
    try:
        loads, most = _read_while(tmp_path, seeds, lambda: any(t.is_alive() for t in threads))
    finally:
        for t in threads:
            t.join()
    assert not errors, errors
    print(f"8 threads: {loads} loads while writing, up to {most} episodes seen")
    _check_final(tmp_path, seeds)


def test_a_recording_closed_while_another_thread_records_to_it(tmp_path: Path) -> None:
    """A thread records episodes while another closes the recording (as exit closes one a
    daemon thread still records to): the recording thread meets a closed recording, nothing
    else; the close writes every episode ended before it, whole."""
    for trial in range(30):
        directory = tmp_path / str(trial)
        rec = TraceRecording(directory, batch_bytes=2_000)
        ended = [0]

        def record(rec: TraceRecording = rec, ended: list[int] = ended) -> None:
            obs = np.zeros(3, np.float32)
            while True:
                rec.add_reset(obs)
                for t in range(20):
                    rec.add_step(t, obs + t, 1.0, terminated=t == 19)
                rec.end_episode()
                ended[0] += 1

        assert _race(record, rec.close, 0.002 * (trial % 10)) == [], trial
        assert verify(directory).ok
        with gym_recording.load(directory) as r:
            episodes = list(r)
        assert ended[0] <= len(episodes) <= ended[0] + 1
        for ep in episodes[: ended[0]]:
            assert ep.length == 20 and ep.terminated
            assert ep.observations[1:].tolist() == [[float(t)] * 3 for t in range(20)]


# ------------------------------------------------------------------ a close racing a step
# A close, or an episode's end, in one thread while another steps (a watchdog, a checkpoint
# thread, exit closing what a daemon thread records): the call waits for a step in flight,
# and a step begun during the call waits for it, so that every step that returns normally is
# written, whole, in its episode. Each trial lets the threads take turns between any two
# bytecodes; each race failed in some of these trials before (steps lost with no error,
# batches unreadable, a crash in zstd).


class _Counting(gymnasium.Env[np.ndarray, int]):
    """Observes the steps since its reset; terminates at ``length``; infos if asked."""

    observation_space = spaces.Box(-1e9, 1e9, (3,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, length: int = 3, info: dict[str, Any] | None = None) -> None:
        self.length, self.info, self.t = length, info, 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        self.t = 0
        return np.zeros(3, np.float32), {}

    def step(self, action: int) -> Any:
        self.t += 1
        obs = np.full(3, self.t, np.float32)
        return obs, 1.0, self.t >= self.length, False, dict(self.info or {})


def _race(work: Callable[[], None], other: Callable[[], None], pause: float) -> list[BaseException]:
    """Run ``work`` in a thread, and ``other`` here ``pause`` s later (the threads taking turns
    between any two bytecodes); what ``work`` raised but a closed recording."""
    met: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except RecordingClosedError:
            pass
        except BaseException as exc:
            met.append(exc)

    thread = threading.Thread(target=run)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        thread.start()
        time.sleep(pause)
        other()
        thread.join()
    finally:
        sys.setswitchinterval(switch)
    return met


@pytest.mark.parametrize("infos", [False, True], ids=["flags", "infos"])
def test_a_close_racing_the_wrappers_steps_keeps_every_step_it_returned(
    tmp_path: Path, infos: bool
) -> None:
    """The wrapper's steps (the C step recorder, whose flags and infos call Python) against
    the recording's close in another thread."""
    for trial in range(24):
        env = TraceRecordingWrapper(
            _Counting(50 if infos else 3, {"s": "x"} if infos else None),
            tmp_path / str(trial),
            record_infos=infos,
        )
        stepped: list[int] = []  # the steps returned normally, per episode

        def work(env: Any = env, stepped: list[int] = stepped) -> None:
            while True:
                env.reset()
                stepped.append(0)
                terminated = False
                while not terminated:
                    terminated = env.step(0)[2]
                    stepped[-1] += 1

        assert _race(work, env.recording.close, 0.0005 * (trial % 8)) == [], trial
        with gym_recording.load(tmp_path / str(trial)) as r:
            written = [(ep.length, ep.terminated) for ep in r]
        assert [n for n, _ in written] == stepped, (trial, written, stepped)
        assert [t for _, t in written] == [n == env.env.length for n in stepped]
        if infos:
            with gym_recording.load(tmp_path / str(trial)) as r:
                assert all(len(ep.infos) == ep.length + 1 for ep in r)


def test_a_close_racing_compressed_image_steps(tmp_path: Path) -> None:
    """add_step's observations streamed into zstd as close finishes the stream in another
    thread (it crashed, hung, or refused the batch)."""
    for trial in range(16):
        rec = TraceRecording(tmp_path / str(trial), compression="zstd", batch_bytes=200_000)
        stepped: list[int] = []  # (the steps returned, once the reset was)

        def work(rec: TraceRecording = rec, stepped: list[int] = stepped) -> None:
            image = np.zeros((84, 84, 3), np.uint8)
            rec.add_reset(image)
            stepped.append(0)
            for t in range(1, 10**9):
                image[t % 84] = t % 251
                rec.add_step(0, image, 1.0)
                stepped[0] += 1

        assert _race(work, rec.close, 0.0005 * (trial % 8)) == [], trial
        with gym_recording.load(tmp_path / str(trial)) as r:
            lengths = [ep.length for ep in r]
        assert lengths == stepped, trial


def test_episodes_ended_by_another_thread_keep_their_steps(tmp_path: Path) -> None:
    """end_episode and add_reset in a second thread while the first steps: each step that
    returns is written in one episode, in order, none left out."""
    rec = TraceRecording(tmp_path, batch_bytes=4_000)
    rec.add_reset(np.zeros(3, np.float32))
    returned = [0]
    refused = [0]
    done = threading.Event()

    def work() -> None:
        for t in range(1, 20_000):
            try:
                rec.add_step(t, np.full(3, t, np.float32), 1.0)
            except RecordingError:  # (no episode open just then)
                refused[0] += 1
                continue
            returned[0] += 1
        done.set()

    def other() -> None:
        k = 0
        while not done.is_set():
            k += 1
            if k % 2:
                rec.end_episode()
            else:
                rec.add_reset(np.full(3, -k, np.float32))
        rec.close()

    assert _race(work, other, 0.0) == []
    with gym_recording.load(tmp_path) as r:
        episodes = list(r)
    assert sum(ep.length for ep in episodes) == returned[0]
    actions = np.concatenate([ep.actions for ep in episodes])
    assert (np.diff(actions) > 0).all()  # (each step once, in order)
    for ep in episodes:  # (each step's observation with its action, after the reset's)
        assert ep.observations[0, 0] <= 0
        assert ep.observations[1:, 0].tolist() == ep.actions.astype(np.float32).tolist()


def test_a_vector_wrapper_closed_while_another_thread_steps_it(tmp_path: Path) -> None:
    """Its steps held in columns, handed to the recordings by a close in another thread."""
    for trial in range(16):
        envs = gymnasium.vector.SyncVectorEnv([lambda: _Counting(5)] * 2)
        venv = TraceRecordingVectorWrapper(envs, tmp_path / str(trial))
        venv.reset()
        stepped = [0]

        def work(venv: Any = venv, stepped: list[int] = stepped) -> None:
            while True:
                venv.step(np.array([1, 1]))
                stepped[0] += 1

        assert _race(work, venv.close, 0.0005 * (trial % 8)) == [], trial
        with gym_recording.load(tmp_path / str(trial)) as r:
            per_env: dict[str, int] = {}
            for ep in r:
                per_env[ep.writer] = per_env.get(ep.writer, 0) + ep.length
                assert ep.observations[:, 0].tolist() == list(range(ep.length + 1))
        # (each sub-env resets after 5 steps: one step in 6 starts an episode)
        assert sorted(per_env.values()) == [stepped[0] - stepped[0] // 6] * 2, (trial, per_env)


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_one_recording_read_from_many_threads(tmp_path: Path, compression: str | None) -> None:
    """Threads of a data loader reading one Recording at random (rec[i]) and in order: every
    episode as a single thread reads it, and the recording still reads whole afterwards (its
    cache of decoded batches raised KeyError under threads, and stayed broken)."""
    rng = np.random.default_rng(0)
    with TraceRecording(tmp_path, batch_bytes=2000, compression=compression) as w:
        for _ in range(40):
            w.add_reset(rng.standard_normal(8))
            for t in range(30):
                w.add_step(0, rng.standard_normal(8), 1.0, terminated=t == 29)
    with gym_recording.load(tmp_path) as rec:
        expected = [ep.observations.tobytes() for ep in rec]
    for attempt in range(5):
        rec = gym_recording.load(tmp_path)
        failures: list[str] = []

        def read(seed: int, rec: Any = rec, failures: list[str] = failures) -> None:
            pick = np.random.default_rng(seed)
            try:
                for _ in range(200):
                    i = int(pick.integers(len(rec)))
                    if rec[i].observations.tobytes() != expected[i]:
                        failures.append(f"episode {i} differs")
                if [ep.observations.tobytes() for ep in rec] != expected:
                    failures.append("an iteration differs")
            except Exception as exc:
                failures.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=read, args=(attempt * 10 + k,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert failures == []
        assert [ep.observations.tobytes() for ep in rec] == expected
    again = pickle.loads(pickle.dumps(rec))  # (to a spawned worker: its lock is its own)
    assert [ep.observations.tobytes() for ep in again] == expected
