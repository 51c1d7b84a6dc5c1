"""Crash safety: SIGKILL at random moments and inside flushes, failing writes, failing envs.

The recorder runs in a subprocess (``tests/crash_harness.py``) and is deterministic, so every
episode a manifest lists can be compared, to the byte, with the episode the parent regenerates.
After every trial: each listed episode reads completely and exactly, in order, none twice and
none skipped; leftover temporary files are ignored by readers, reported by ``verify`` and
removed by its cleaning once old enough. ``benchmarks/stress_crash.py`` runs many more trials.
"""

from __future__ import annotations

import os
import random
import shutil
import sys
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest

import gym_recording
from gym_recording import RecordingError, TraceRecording
from gym_recording.format.names import TEMP_PREFIX, batch_names
from gym_recording.wrappers import TraceRecordingWrapper

sys.path.insert(0, str(Path(__file__).resolve().parent))
import crash_harness as ch

RANDOM_TRIALS = 20
BATCH_SIZES = [3_000, 8_000, 20_000, 60_000, 200_000]


def _visible(directory: Path) -> dict[str, int]:
    return {n: os.path.getsize(directory / n) for n in os.listdir(directory)}


def test_sigkill_at_random_moments(tmp_path):
    """20 recorders killed at random times: what their manifests list is complete and exact."""
    totals = {"trials": 0, "episodes": 0, "batches": 0, "temp_files": 0, "killed": 0}
    for k in range(RANDOM_TRIALS):
        rnd = random.Random(1000 + k)
        d = tmp_path / f"t{k}"
        d.mkdir()
        trial = ch.run_child(
            "run", d, k, rnd.choice(BATCH_SIZES), 100_000, kill_after=rnd.uniform(0.0, 0.35)
        )
        assert trial.killed and trial.returncode == -9, trial.output
        found = ch.check_recording(d, k)
        totals["trials"] += 1
        totals["killed"] += trial.killed
        totals["episodes"] += found.episodes
        totals["batches"] += found.batches
        totals["temp_files"] += found.temp_files
        shutil.rmtree(d)
    print(f"random SIGKILL: {totals}")
    assert totals["episodes"] > 0 and totals["batches"] > 0


def _temps_left(n: int, phase: str) -> int:
    """Temporary files left by a kill at ``phase`` of the ``n``-th file written.

    A batch's three files (blob, batch JSON, manifest) are written as a group: all three
    temporary files are created and written, then fsynced, then renamed in order. A file's
    temporary file is left from its creation to its rename; so are those of the group's other
    files created before it and not yet renamed.
    """
    k = n % 3  # its place in the group
    return {"open": k, "write": k + 1, "sync": 3, "commit": 3 - k, "renamed": 2 - k}[phase]


@pytest.mark.parametrize("phase", ch.PHASES)
def test_sigkill_inside_a_flush(tmp_path, phase):
    """Killed at each phase of an atomic write of the 1st, 3rd and 8th file (a blob, the first
    manifest, a batch JSON): nothing half-written is visible, the temporary files are ignored."""
    for n in (0, 2, 7):
        d = tmp_path / f"w{n}"
        d.mkdir()
        trial = ch.run_child("die", d, 50 + n, 8_000, n, phase, 1_000)
        assert trial.returncode == -9, trial.output
        found = ch.check_recording(d, 50 + n)
        assert found.temp_files == _temps_left(n, phase), (n, phase)
        if n == 2 and phase == "renamed":
            assert found.batches == 1  # the first manifest made it


def test_clean_exit_keeps_every_episode(tmp_path):
    """Without a kill, all episodes are there (the reference point of the trials above)."""
    trial = ch.run_child("run", tmp_path, 3, 8_000, 12)
    assert trial.returncode == 0, trial.output
    assert ch.check_recording(tmp_path, 3).episodes == 12


# ---------------------------------------------------------------------------- write failures


def _check_failed_write(
    directory: Path, trial: ch.Trial, seed: int, reason: str, *, temps_possible: bool = False
) -> ch.Trial:
    """The error names the file and the reason; every visible file is one that was written
    whole; no temporary file is left (unless the failure took away the right to delete it);
    what was committed reads back exactly."""
    assert trial.report is not None, trial.output
    assert trial.report["error"] == "WriteError", trial.report
    message = trial.report["message"]
    assert reason in message
    assert "openaigym.trace." in message and ("manifest.json" in message or ".ep" in message)
    written = trial.report["written"]
    for name, size in _visible(directory).items():
        if name.startswith(TEMP_PREFIX):
            assert temps_possible, name
            continue
        assert written.get(name) == size, f"{name} is {size} bytes, {written.get(name)} written"
    return ch.check_recording(directory, seed)


@pytest.mark.parametrize(
    ("batch_bytes", "limit", "after"),
    [(20_000, 10_000, 4), (20_000, 26_000, -1), (3_000, 40_000, -1)],
    ids=["blob-after-4-episodes", "first-blob", "manifest"],
)
def test_file_size_limit(tmp_path, batch_bytes, limit, after):
    """RLIMIT_FSIZE (SIGXFSZ ignored): the EFBIG reaches the caller naming the file."""
    trial = ch.run_child("fsize", tmp_path, 6, batch_bytes, limit, after)
    found = _check_failed_write(tmp_path, trial, 6, "File too large")
    if after >= 0 or batch_bytes == 3_000:
        assert found.episodes >= 1
    if batch_bytes == 3_000:  # (batches of 8 steps or so, under the limit: the manifest)
        assert trial.report is not None and "manifest.json" in trial.report["message"]


def test_read_only_directory(tmp_path):
    """A directory that becomes read-only (root drops to nobody): permission denied reaches
    the caller naming the file, and the episodes written before stay readable."""
    if os.geteuid() != 0:
        pytest.skip("needs root to drop privileges")
    trial = ch.run_child("readonly", tmp_path, 7, 5_000, 3)
    # A write in flight when the right is lost leaves its temporary file: the rollback cannot
    # delete it either. Readers ignore it; verify reports it.
    found = _check_failed_write(tmp_path, trial, 7, "Permission denied", temps_possible=True)
    assert trial.report is not None and trial.report["cause"] == "PermissionError"
    assert found.episodes >= 1


def test_disk_full(tmp_path):
    """A full disk (a 300 KB tmpfs in a private mount namespace): ENOSPC names the file."""
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("mount") is None:
        pytest.skip("needs root, unshare and mount")
    d = tmp_path / "rec"
    d.mkdir()
    prefix = ["unshare", "-m", "--propagation", "private"]
    trial = ch.run_child("enospc", d, 8, 8_000, "300k", prefix=prefix)
    if trial.report is None or "skipped" in trial.report:
        pytest.skip(f"cannot mount a tmpfs here: {trial.report or trial.output[-300:]}")
    copy = Path(str(d) + ".copy")
    found = _check_failed_write(copy, trial, 8, "No space left on device")
    assert found.episodes >= 1


def test_rename_onto_a_directory_fails_cleanly(tmp_path):
    """The final name of the next blob is taken by a directory: rename fails, the error names
    the file, nothing half-written appears, and earlier batches stay readable."""
    rec = TraceRecording(tmp_path, batch_bytes=200)
    for e in range(3):
        rec.add_reset(np.zeros(3), seed=e)
        rec.add_step(1, np.ones(3), 1.0, terminated=True)
    rec.save_complete()
    with gym_recording.load(tmp_path) as r:
        committed = len(r)
        last = r.writers[0].batches[-1]
    assert committed >= 1
    blob = batch_names(rec.file_prefix, last.first + last.len)[1]
    (tmp_path / blob).mkdir()
    with pytest.raises(RecordingError) as info:
        rec.add_reset(np.zeros(3), seed=9)
        rec.add_step(1, np.ones(3), 1.0, terminated=True)
        rec.save_complete()
    assert blob in str(info.value)
    with pytest.raises(RecordingError):
        rec.close()  # the retry at close fails the same way
    assert not [n for n in os.listdir(tmp_path) if n.startswith(TEMP_PREFIX)]
    with gym_recording.load(tmp_path) as r:
        assert len(r) == committed
        assert [ep.seed for ep in r] == list(range(committed))
    (tmp_path / blob).rmdir()  # (the way is clear: close() again writes what is left)
    rec.close()
    with gym_recording.load(tmp_path) as r:
        assert [ep.seed for ep in r] == [*range(3), 9]


# ---------------------------------------------------------------------------- failing envs


class _Raising(ch.CrashEnv):
    """CrashEnv that remembers the exception object it raised."""

    raised: BaseException | None = None

    def step(self, action):  # type: ignore[no-untyped-def]
        try:
            return super().step(action)
        except RuntimeError as exc:
            self.raised = exc
            raise


def _play(env: TraceRecordingWrapper, episodes: int) -> None:
    for i in range(episodes):
        rng = ch.episode_actions(0, i)
        env.reset(seed=ch.episode_seed(0, i))
        done = False
        while not done:
            _, _, terminated, truncated, _ = env.step(int(rng.integers(0, 4)))
            done = terminated or truncated


def test_env_raising_in_step_propagates_and_keeps_the_cut_episode(tmp_path):
    """The env's own exception object reaches the caller; the episodes before it are kept,
    and so is the cut one, flagged neither terminated nor truncated."""
    raise_at = (ch.episode_seed(0, 2), 3)
    inner = _Raising(raise_at)
    env = TraceRecordingWrapper(inner, tmp_path, batch_bytes=50_000, record_infos=True)
    with pytest.raises(RuntimeError) as info:
        _play(env, 4)
    assert inner.raised is not None and info.value is inner.raised  # unchanged
    env.close()
    with gym_recording.load(tmp_path) as rec:
        assert len(rec) == 3
        for i in range(2):
            ch.assert_episode(rec[i], ch.expected_episode(0, i))
        ch.assert_episode(rec[2], ch.expected_episode(0, 2, raise_at), cut=True)
        assert rec[2].length == 3


def test_env_raising_in_reset_propagates_and_keeps_earlier_episodes(tmp_path):
    """An env whose reset raises: the exception propagates, finished episodes are kept."""

    class BadReset(ch.CrashEnv):
        resets = 0

        def reset(self, *, seed=None, options=None):  # type: ignore[no-untyped-def]
            BadReset.resets += 1
            if BadReset.resets == 3:
                raise ValueError("reset failed")
            return super().reset(seed=seed, options=options)

    env = TraceRecordingWrapper(BadReset(), tmp_path, record_infos=True)
    with pytest.raises(ValueError, match="reset failed"):
        _play(env, 4)
    env.step(0)  # after a failed reset nothing is recorded, and the recorder does not object
    env.close()
    with gym_recording.load(tmp_path) as rec:
        assert len(rec) == 2
        for i in range(2):
            ch.assert_episode(rec[i], ch.expected_episode(0, i))


def test_uncaught_env_exception_in_a_process_keeps_the_cut_episode(tmp_path):
    """A script that dies of an env exception still writes its episodes (exit handlers),
    with the cut one flagged neither terminated nor truncated."""
    trial = ch.run_child("raise", tmp_path, 0, 50_000, 2, 3)
    assert trial.returncode == 1
    assert "RuntimeError: env failure at step 3" in trial.output
    raise_at = (ch.episode_seed(0, 2), 3)
    with gym_recording.load(tmp_path) as rec:
        assert len(rec) == 3
        for i in range(2):
            ch.assert_episode(rec[i], ch.expected_episode(0, i))
        ch.assert_episode(rec[2], ch.expected_episode(0, 2, raise_at), cut=True)


# ------------------------------------------------------------------ Ctrl-C (KeyboardInterrupt)
# SIGINT's KeyboardInterrupt is raised where the main thread waits: in the join of a batch's
# write. These tests raise it there, in the record layer's writer and in the local storage's
# C write (the reason they reach into private modules), then close() as the exit handler
# does; found by a fuzzer that sent SIGINT to a recording process at random moments.


def test_ctrl_c_while_an_episode_is_cut_into_parts_keeps_the_recording_readable(
    tmp_path, monkeypatch
):
    """Interrupted as it waits for the previous batch's write, before it cuts a long
    episode: the episode is not cut, and close() writes it whole (before, both of its parts
    went into one batch, which made every batch of the recording unreadable)."""
    from gym_recording.record.writer import BatchWriter

    wait, armed = BatchWriter.wait, [False]

    def interrupted(self):
        if armed[0] and self._job is not None:
            armed[0] = False
            raise KeyboardInterrupt
        return wait(self)

    monkeypatch.setattr(BatchWriter, "wait", interrupted)
    rec = TraceRecording(tmp_path, batch_bytes=3000, record_infos=True)
    rec.add_reset(np.zeros(8), seed=1, info={})
    with pytest.raises(KeyboardInterrupt):
        for t in range(1, 400):
            armed[0] = armed[0] or t == 200
            rec.add_step(t, np.full(8, t, float), 1.0, info={"t": t})
    rec.close()
    assert gym_recording.verify(tmp_path).ok
    with gym_recording.load(tmp_path) as r:
        (ep,) = list(r)
    assert ep.length == t - 1 and ep.actions.tolist() == list(range(1, t))


def test_ctrl_c_as_the_c_write_returns_loses_no_batch(tmp_path, monkeypatch):
    """Interrupted as the C write thread's wait returns (the files published): close() at
    exit waits for it again and writes the rest (before: ValueError, the buffer lost)."""
    from gym_recording.storage import local

    if local.LocalStorage._start_write_c is None:
        pytest.skip("gym_recording._speedups is not built")
    start, armed = local._CWrite._start, [False]

    class Task:
        def __init__(self, task):
            self.task = task

        def wait(self, done):
            result = self.task.wait(done)
            if armed[0]:
                armed[0] = False
                raise KeyboardInterrupt
            return result

    def started(self):
        start(self)
        self._task = Task(self._task)

    monkeypatch.setattr(local._CWrite, "_start", started)
    rec = TraceRecording(tmp_path, batch_bytes=2000)
    with pytest.raises(KeyboardInterrupt):
        for e in range(40):
            armed[0] = armed[0] or e == 20
            rec.add_reset(np.zeros(8), seed=e)
            for t in range(1, 11):
                rec.add_step(t, np.full(8, t, float), 1.0, terminated=t == 10)
    rec.close()
    assert gym_recording.verify(tmp_path).ok
    with gym_recording.load(tmp_path) as r:
        assert [ep.seed for ep in r] == list(range(e + 1))


class _Counting(gymnasium.Env[np.ndarray, int]):
    """Observations [episode, step]; an episode ends at its 9th step."""

    observation_space = gymnasium.spaces.Box(0, 1e9, (2,), np.float64)
    action_space = gymnasium.spaces.Discrete(2)
    episode, t = -1, 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        self.episode, self.t = self.episode + 1, 0
        return np.array([self.episode, 0.0]), {}

    def step(self, action: int) -> Any:
        self.t += 1
        return np.array([self.episode, self.t], np.float64), 1.0, self.t == 9, False, {}


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_a_failed_write_records_the_step_and_loses_nothing(tmp_path, compression):
    """A batch that cannot be written (a directory at its blob's name) raises a WriteError
    from the step or reset that met it, once that step or reset is recorded; the env has
    stepped or reset, and its episode goes on. The write is tried again once twice as many
    steps are kept (not at every step). Once the way is clear, the next try writes the
    batch: every episode is whole, none is missing."""
    env = TraceRecordingWrapper(_Counting(), tmp_path, batch_bytes=2_000, compression=compression)
    failures, blob = 0, None

    def call(method: Any, *args: Any) -> None:
        nonlocal failures
        try:
            method(*args)
        except gym_recording.WriteError as exc:
            assert "Is a directory" in str(exc)
            failures += 1

    call(env.reset)
    for t in range(3_000):
        if t == 1_000:
            rec = env.recording
            last = rec.batches[-1]
            blob = tmp_path / batch_names(rec.file_prefix, last["first"] + last["len"])[1]
            blob.mkdir()
        if t == 2_000:
            blob.rmdir()
        call(env.step, 0)
        if env.unwrapped.t == 9:  # (the episode ended, whether or not the step raised)
            call(env.reset)
    env.close()
    # (tried again once twice as many steps are kept: not at each step, rewriting the batch)
    assert 0 < failures <= 12, failures
    with gym_recording.load(tmp_path) as rec:
        eps = list(rec)
    assert [int(ep.observations[0, 0]) for ep in eps] == list(range(len(eps)))
    for ep in eps:
        np.testing.assert_array_equal(ep.observations[:, 0], ep.observations[0, 0])
        np.testing.assert_array_equal(ep.observations[:, 1], np.arange(ep.length + 1))
    assert sum(ep.length for ep in eps) == 3_000
