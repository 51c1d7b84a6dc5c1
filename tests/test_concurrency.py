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
import sys
import threading
import time
from pathlib import Path
from typing import Any

import gym_recording
from gym_recording.format.names import TEMP_PREFIX
from gym_recording.tools.verify import verify
from gym_recording.wrappers import TraceRecordingWrapper

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
    import numpy as np

    from gym_recording import RecordingClosedError, TraceRecording

    for trial in range(30):
        directory = tmp_path / str(trial)
        rec = TraceRecording(directory, batch_bytes=2_000)
        met: list[BaseException] = []
        ended = [0]

        def record(
            rec: TraceRecording = rec, met: list[BaseException] = met, ended: list[int] = ended
        ) -> None:
            obs = np.zeros(3, np.float32)
            try:
                while True:
                    rec.add_reset(obs)
                    for t in range(20):
                        rec.add_step(t, obs + t, 1.0, terminated=t == 19)
                    rec.end_episode()
                    ended[0] += 1
            except RecordingClosedError:
                pass
            except BaseException as exc:
                met.append(exc)

        thread = threading.Thread(target=record)
        switch = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)  # (the threads take turns between any two bytecodes)
        try:
            thread.start()
            time.sleep(0.002 * (trial % 10))
            rec.close()
            thread.join()
        finally:
            sys.setswitchinterval(switch)
        assert met == [], trial
        assert verify(directory).ok
        with gym_recording.load(directory) as r:
            episodes = list(r)
        assert ended[0] <= len(episodes) <= ended[0] + 1
        for ep in episodes[: ended[0]]:
            assert ep.length == 20 and ep.terminated
            assert ep.observations[1:].tolist() == [[float(t)] * 3 for t in range(20)]
