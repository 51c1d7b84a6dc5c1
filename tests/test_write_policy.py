"""Where a batch is written: in the recording's thread when that is cheap, else in the background.

The choice changes nothing a reader sees: the same files, in the same order, with the same
errors at the same calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import gym_recording
from gym_recording import _storage
from gym_recording import recording as R
from gym_recording._errors import RecordingError
from gym_recording._storage import LocalStorage, write_in_turn


def _record(d: Path, episodes: int = 12) -> R.TraceRecording:
    rec = R.TraceRecording(d, batch_bytes=600)  # a batch every few episodes
    for e in range(episodes):
        rec.add_reset(np.full(3, e, np.float32), seed=e)
        for t in range(10):
            rec.add_step(t % 2, np.full(3, t, np.float32), 1.0, terminated=t == 9)
    return rec


@pytest.fixture
def where(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record where each batch job ran: 'fg' (run by the recording) or 'bg' (a thread)."""
    seen: list[str] = []
    start, run = R._WriteJob.start, R._WriteJob.run

    def bg(self: Any) -> None:
        seen.append("bg")
        self._bg = True
        start(self)

    def fg_or_bg(self: Any) -> None:
        if not getattr(self, "_bg", False) and not getattr(self, "_ran", False):
            seen.append("fg")
        self._ran = True
        run(self)

    monkeypatch.setattr(R._WriteJob, "start", bg)
    monkeypatch.setattr(R._WriteJob, "run", fg_or_bg)
    return seen


def _episodes(d: Path) -> list[tuple[Any, ...]]:
    with gym_recording.load(d) as r:
        return [
            (e.seed, e.observations.tobytes(), e.actions.tobytes(), e.rewards.tobytes()) for e in r
        ]


def _file_by_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make a batch's files go through ``LocalStorage.write_atomic`` one by one (not as one
    group through the C ``write_files``), so that a test can stop any one of them."""
    monkeypatch.setattr(LocalStorage, "write_files", write_in_turn)


def _fail_writes(monkeypatch: pytest.MonkeyPatch, fails: Any) -> Any:
    """Make ``LocalStorage.write_atomic`` raise for the names ``fails(name)`` picks (each file
    written on its own); return the real one."""
    _file_by_file(monkeypatch)
    real = LocalStorage.write_atomic

    def write_atomic(self: Any, name: str, chunks: Any, **kw: Any) -> int:
        if fails(name):
            msg = f"could not write {name!r} (simulated); nothing of it was published"
            raise RecordingError(msg)
        return real(self, name, chunks, **kw)

    monkeypatch.setattr(LocalStorage, "write_atomic", write_atomic)
    return real


def test_cheap_writes_stay_in_the_recording_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: list[str]
) -> None:
    monkeypatch.setattr(R, "FOREGROUND_WRITE_SHARE", 1e9)
    _record(tmp_path).close()
    assert len(where) > 3 and set(where) == {"fg"}
    assert [e[0] for e in _episodes(tmp_path)] == list(range(12))


def test_costly_writes_go_to_the_background_with_a_periodic_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: list[str]
) -> None:
    monkeypatch.setattr(R, "FOREGROUND_WRITE_SHARE", 0.0)
    monkeypatch.setattr(R, "FOREGROUND_PROBE_EVERY", 3)
    _record(tmp_path, episodes=30).close()
    # The first write is measured here; then three in the background, one here, and so on.
    assert where[:9] == ["fg", "bg", "bg", "bg", "fg", "bg", "bg", "bg", "fg"]


def test_both_ways_write_the_same_episodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(R, "FOREGROUND_WRITE_SHARE", 1e9)
    _record(tmp_path / "fg").close()
    monkeypatch.setattr(R, "FOREGROUND_WRITE_SHARE", 0.0)
    _record(tmp_path / "bg").close()
    assert _episodes(tmp_path / "fg") == _episodes(tmp_path / "bg")


@pytest.mark.parametrize("share", [1e9, 0.0], ids=["foreground", "background"])
def test_a_failed_write_is_retried_once_at_the_next_flush_either_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, share: float
) -> None:
    """One failing write: raised by nothing, retried at the next wait, nothing lost."""
    monkeypatch.setattr(R, "FOREGROUND_WRITE_SHARE", share)
    calls = {"n": 0}

    def fails(name: str) -> bool:
        calls["n"] += 1
        return calls["n"] == 4  # the second batch's blob, the first time

    _fail_writes(monkeypatch, fails)
    rec = _record(tmp_path)
    rec.close()
    assert calls["n"] > 4
    assert [e[0] for e in _episodes(tmp_path)] == list(range(12))


@pytest.mark.parametrize("share", [1e9, 0.0], ids=["foreground", "background"])
def test_a_write_failing_twice_raises_at_the_next_flush_either_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, share: float
) -> None:
    monkeypatch.setattr(R, "FOREGROUND_WRITE_SHARE", share)
    real = _fail_writes(monkeypatch, lambda n: n.endswith(".bin") and ".ep000000000." not in n)
    rec = R.TraceRecording(tmp_path, batch_bytes=600)
    rec.add_reset(np.zeros(3, np.float32))
    for t in range(10):
        rec.add_step(0, np.zeros(3, np.float32), 1.0, terminated=t == 9)
    rec.end_episode()
    rec.save_complete()  # the first batch is written
    rec.add_reset(np.zeros(3, np.float32))
    for t in range(10):
        rec.add_step(0, np.zeros(3, np.float32), 1.0, terminated=t == 9)
    rec.end_episode()
    with pytest.raises(RecordingError, match="simulated"):
        rec.save_complete()
    with gym_recording.load(tmp_path) as r:
        assert len(r) == 1
    monkeypatch.setattr(LocalStorage, "write_atomic", real)  # the disk is back
    rec.close()  # the batch that failed is written now
    with gym_recording.load(tmp_path) as r:
        assert len(r) == 2


def test_ctrl_c_during_a_foreground_write_propagates_and_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A KeyboardInterrupt inside a write done in the recording's thread reaches the caller at
    once (it is not kept for later like an error); the batch is written by the next flush,
    once, and every episode reads back."""
    monkeypatch.setattr(R, "FOREGROUND_WRITE_SHARE", 1e9)
    real = LocalStorage.write_atomic
    calls = {"n": 0}

    def interrupted(self: Any, name: str, chunks: Any, **kw: Any) -> int:
        calls["n"] += 1
        if calls["n"] == 5:  # inside the second batch's write
            raise KeyboardInterrupt
        return real(self, name, chunks, **kw)

    _file_by_file(monkeypatch)
    monkeypatch.setattr(LocalStorage, "write_atomic", interrupted)
    rec = R.TraceRecording(tmp_path, batch_bytes=600)
    seen = 0
    with pytest.raises(KeyboardInterrupt):
        for e in range(12):
            rec.add_reset(np.full(3, e, np.float32), seed=e)
            seen = e
            for t in range(10):
                rec.add_step(t % 2, np.full(3, t, np.float32), 1.0, terminated=t == 9)
    # The user goes on (or just closes): nothing is lost, nothing is written twice.
    for e in range(seen + 1, 12):
        rec.add_reset(np.full(3, e, np.float32), seed=e)
        for t in range(10):
            rec.add_step(t % 2, np.full(3, t, np.float32), 1.0, terminated=t == 9)
    rec.close()
    seeds = [e[0] for e in _episodes(tmp_path)]
    assert seeds == list(range(12))


@pytest.mark.skipif(
    getattr(_storage._speedups, "write_files", None) is None, reason="needs the C extension"
)
@pytest.mark.parametrize("share", [1e9, 0.0], ids=["foreground", "background"])
@pytest.mark.parametrize("failing", [".bin", ".json"], ids=["blob", "batch-json"])
def test_a_group_failing_midway_is_finished_at_the_next_flush(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, share: float, failing: str
) -> None:
    """The C group write fails once at one file of the second batch (its rename: the name is
    taken by a directory): the files before it stay published, the rest are written at the
    next flush, and every episode reads back once. In the background the write runs on the
    extension's own thread (``start_write_files``), in the foreground in ``write_files``."""
    monkeypatch.setattr(R, "FOREGROUND_WRITE_SHARE", share)
    real, real_start = _storage._speedups.write_files, _storage._speedups.start_write_files
    state = {"batches": 0, "failed": 0}
    calls: list[list[str]] = []  # the names each call was given
    failed: dict[str, Any] = {}  # the failing call: its names, the one that failed, published

    def squat(directory: str, files: Any, via: str) -> Any:
        """Before a write: if it is the one to fail, the failure set up, and what undoes it."""
        calls.append([n for _, n, _, _ in files])
        if len(files) == 3:
            state["batches"] += 1
        if state["batches"] != 2 or state["failed"]:
            return None
        state["failed"] = 1
        name = next(n for _, n, _, _ in files if n.endswith(failing) and "manifest" not in n)
        failed.update(names=calls[-1], name=name, via=via)
        path = Path(directory) / name
        path.mkdir()
        (path / "x").write_bytes(b"")  # a non-empty directory: the rename fails

        def undo() -> None:
            (path / "x").unlink()
            path.rmdir()

        return undo

    def write_files(directory: str, files: Any, mode: int, published: list[str]) -> int:
        undo = squat(directory, files, "write_files")
        if undo is not None:
            failed["published"] = published
        try:
            return int(real(directory, files, mode, published))
        finally:
            if undo is not None:
                undo()

    class Task:
        def __init__(self, task: Any, undo: Any) -> None:
            self.task, self.undo = task, undo

        def wait(self, published: list[str]) -> int:
            if self.undo is not None:
                failed["published"] = published
            try:
                return int(self.task.wait(published))
            finally:
                if self.undo is not None:
                    self.undo()

    def start_write_files(directory: str, files: Any, mode: int) -> Task:
        undo = squat(directory, files, "start_write_files")
        return Task(real_start(directory, files, mode), undo)

    monkeypatch.setattr(_storage._speedups, "write_files", write_files)
    monkeypatch.setattr(_storage._speedups, "start_write_files", start_write_files)
    rec = _record(tmp_path)
    rec.close()
    assert state["failed"] == 1
    assert failed["via"] == ("write_files" if share else "start_write_files")
    names, at = failed["names"], failed["names"].index(failed["name"])
    assert failed["published"] == names[:at]  # the files before it stayed published
    assert calls[calls.index(names) + 1] == names[at:]  # the next flush wrote only the rest
    assert [e[0] for e in _episodes(tmp_path)] == list(range(12))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(_storage.TEMP_PREFIX)]
