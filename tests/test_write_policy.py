"""Where a batch is written: in the recording's thread when that is cheap, else in the background.

The choice (``BatchWriter.submit`` in :mod:`gym_recording.record.writer`) changes nothing a
reader sees: the same files, in the same order, with the same errors at the same calls.
"""

from __future__ import annotations

import contextlib
import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import gym_recording
from gym_recording import TraceRecording
from gym_recording._errors import RecordingClosedError, RecordingError, WriteError
from gym_recording.format.names import TEMP_PREFIX
from gym_recording.record import writer as W
from gym_recording.storage.base import ThreadedWrite
from gym_recording.storage.local import LocalStorage

FOREGROUND, BACKGROUND = 1e9, 0.0  # FOREGROUND_WRITE_SHARE values: every write here / away
EITHER_WAY = pytest.mark.parametrize("share", [FOREGROUND, BACKGROUND], ids=["fg", "bg"])


def _episode(rec: TraceRecording, e: int) -> None:
    rec.add_reset(np.full(3, e, np.float32), seed=e)
    for t in range(10):
        rec.add_step(t % 2, np.full(3, t, np.float32), 1.0, terminated=t == 9)


def _record(d: Path, episodes: int = 12) -> TraceRecording:
    rec = TraceRecording(d, batch_bytes=600)  # a batch every few episodes
    for e in range(episodes):
        _episode(rec, e)
    return rec


@pytest.fixture
def where(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record where each batch job ran: 'fg' (run by the recording) or 'bg' (in the background)."""
    seen: list[str] = []
    start, run = W._WriteJob.start, W._WriteJob.run

    def bg(self: Any) -> None:
        seen.append("bg")
        self._bg = True
        start(self)

    def fg_or_bg(self: Any) -> None:
        if not getattr(self, "_bg", False) and not getattr(self, "_ran", False):
            seen.append("fg")  # a job's first run, not a retry, and not after a start
        self._ran = True
        run(self)

    monkeypatch.setattr(W._WriteJob, "start", bg)
    monkeypatch.setattr(W._WriteJob, "run", fg_or_bg)
    return seen


def _episodes(d: Path) -> list[tuple[Any, ...]]:
    def exactly(field: Any) -> Any:  # (per-step values: a list)
        return field.tobytes() if isinstance(field, np.ndarray) else repr(field)

    with gym_recording.load(d) as r:
        return [
            (e.seed, exactly(e.observations), e.actions.tobytes(), e.rewards.tobytes()) for e in r
        ]


def _seeds(d: Path) -> list[Any]:
    return [e[0] for e in _episodes(d)]


def _file_by_file(monkeypatch: pytest.MonkeyPatch, before: Any = None) -> list[str]:
    """Make a batch's files go through ``LocalStorage.write_atomic`` one by one, in the
    foreground and in the background (a Python thread running the same ``write_files``), so
    that a test can stop any one of them: ``before(name)`` is called before each file and may
    raise. Return the names written, in order (each batch's files once, if nothing is
    rewritten)."""
    written: list[str] = []

    def write_files(self: LocalStorage, files: Any, published: list[str]) -> None:
        for name, chunks, sync_directory in files:
            if before is not None:
                before(name)
            self.write_atomic(name, chunks, sync_directory=sync_directory)
            written.append(name)
            published.append(name)

    monkeypatch.setattr(LocalStorage, "write_files", write_files)
    monkeypatch.setattr(
        LocalStorage, "start_write_files", lambda self, files: ThreadedWrite(self, files)
    )
    return written


def _each_file_once(written: list[str], batches: int) -> None:
    """Each batch's blob and JSON were written once, and one manifest per batch."""
    files = [n for n in written if not n.endswith(".manifest.json")]
    assert len(files) == len(set(files)) == 2 * batches
    assert len(written) == 3 * batches


def _fail_writes(monkeypatch: pytest.MonkeyPatch, fails: Any) -> list[str]:
    """Make the write of each file ``fails(name)`` picks raise RecordingError (nothing of it
    published); return the names written."""

    def before(name: str) -> None:
        if fails(name):
            msg = f"could not write {name!r} (simulated); nothing of it was published"
            raise RecordingError(msg)

    return _file_by_file(monkeypatch, before)


def test_cheap_writes_stay_in_the_recording_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: list[str]
) -> None:
    """Writes that cost little next to filling a batch are all run in the recording's thread."""
    monkeypatch.setattr(W, "FOREGROUND_WRITE_SHARE", FOREGROUND)
    _record(tmp_path).close()
    assert len(where) > 3 and set(where) == {"fg"}
    assert _seeds(tmp_path) == list(range(12))


def test_costly_writes_go_to_the_background_with_a_periodic_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: list[str]
) -> None:
    """Costly writes go to the background, every FOREGROUND_PROBE_EVERY-th one to the foreground."""
    monkeypatch.setattr(W, "FOREGROUND_WRITE_SHARE", BACKGROUND)
    monkeypatch.setattr(W, "FOREGROUND_PROBE_EVERY", 3)
    _record(tmp_path, episodes=30).close()
    # The first write is measured here; then three in the background, one here, and so on.
    assert where[:9] == ["fg", "bg", "bg", "bg", "fg", "bg", "bg", "bg", "fg"]
    assert _seeds(tmp_path) == list(range(30))


def test_both_ways_write_the_same_episodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Writing in the foreground or in the background gives the same episodes, byte for byte."""
    monkeypatch.setattr(W, "FOREGROUND_WRITE_SHARE", FOREGROUND)
    _record(tmp_path / "fg").close()
    monkeypatch.setattr(W, "FOREGROUND_WRITE_SHARE", BACKGROUND)
    _record(tmp_path / "bg").close()
    assert _episodes(tmp_path / "fg") == _episodes(tmp_path / "bg")
    assert _seeds(tmp_path / "fg") == list(range(12))


@EITHER_WAY
def test_a_failed_write_is_retried_once_at_the_next_flush_either_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: list[str], share: float
) -> None:
    """One failing write: raised by nothing, retried at the next wait, nothing lost or doubled."""
    monkeypatch.setattr(W, "FOREGROUND_WRITE_SHARE", share)
    calls = {"n": 0}

    def fails(name: str) -> bool:
        calls["n"] += 1
        return calls["n"] == 4  # the second batch's blob, the first time

    written = _fail_writes(monkeypatch, fails)
    rec = _record(tmp_path)
    rec.close()
    assert calls["n"] > 4
    assert where[:2] == ["fg", "bg" if share == BACKGROUND else "fg"]  # the way it failed
    _each_file_once(written, rec.batch_count)
    assert _seeds(tmp_path) == list(range(12))


@EITHER_WAY
def test_a_write_failing_twice_raises_at_the_next_flush_either_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: list[str], share: float
) -> None:
    """A write failing again on its retry raises RecordingError at the flush, shows nothing of
    its batch, and is written by a later flush once writes work again."""
    monkeypatch.setattr(W, "FOREGROUND_WRITE_SHARE", share)
    disk = {"broken": True}
    _fail_writes(
        monkeypatch,
        lambda n: disk["broken"] and n.endswith(".bin") and ".ep000000000." not in n,
    )
    rec = TraceRecording(tmp_path, batch_bytes=600)
    _episode(rec, 0)
    rec.end_episode()
    rec.save_complete()  # the first batch is written (and measured, in the foreground)
    _episode(rec, 1)
    rec.end_episode()
    with pytest.raises(RecordingError, match="simulated"):
        rec.save_complete()
    assert where[:2] == ["fg", "bg" if share == BACKGROUND else "fg"]  # the way it failed
    assert rec._writer.busy  # kept for the next flush
    assert _seeds(tmp_path) == [0]  # nothing of the failed batch is visible
    disk["broken"] = False  # the disk is back
    rec.close()  # the batch that failed is written now
    assert _seeds(tmp_path) == [0, 1]


def _disk(monkeypatch: pytest.MonkeyPatch, *, broken: bool) -> dict[str, bool]:
    """Writes in the recording's thread, each failing (a full disk) while ``["broken"]``."""
    monkeypatch.setattr(W, "FOREGROUND_WRITE_SHARE", FOREGROUND)
    disk = {"broken": broken}

    def full(name: str) -> None:
        if disk["broken"]:
            raise WriteError(f"could not write {name!r} (simulated): No space left on device")

    _file_by_file(monkeypatch, full)
    return disk


@pytest.mark.parametrize("kind", ["arrays", "text", "infos"])
def test_while_writes_fail_a_full_batch_backs_off_as_any(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """A batch its values fill (text observations, large infos) is tried again once the
    buffered steps have doubled, as a batch of arrays is: not at every step (which raised a
    WriteError at every step while the disk was full)."""
    disk = _disk(monkeypatch, broken=True)
    rec = TraceRecording(tmp_path, batch_bytes=20_000, record_infos=kind == "infos")

    def obs(t: int) -> Any:
        return f"{t:05d}" + "x" * 1000 if kind == "text" else np.full(250, t, np.float64)

    raised = 0
    rec.add_reset(obs(0))
    for t in range(1, 301):
        try:
            rec.add_step(0, obs(t), 1.0, info={"text": "y" * 2000} if kind == "infos" else None)
        except WriteError:
            raised += 1
    assert 1 <= raised <= 8, raised  # (about log2 of the steps: one a doubling)
    disk["broken"] = False
    rec.close()
    with gym_recording.load(tmp_path) as r:
        assert [ep.length for ep in r] == [300]


def test_resets_alone_are_written_again_once_the_disk_is_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Zero-step episodes of text, and the disk full for a while: the batch is tried again
    as the buffered rows double, and once the disk is back batches are of about batch_bytes
    again (resets never counted toward the retry, so every later one piled into one batch)."""
    disk = _disk(monkeypatch, broken=False)
    raised = 0
    with TraceRecording(tmp_path, batch_bytes=200_000) as rec:
        for e in range(400):
            disk["broken"] = 40 <= e < 70
            try:
                rec.add_reset(f"{e:04d}" + "x" * 10_000)
            except WriteError:
                raised += 1
    assert 1 <= raised <= 4, raised
    (manifest,) = tmp_path.glob("*.manifest.json")
    sizes = [b["bytes"] for b in json.loads(manifest.read_text())["batches"]]
    assert len(sizes) >= 30 and max(sizes[-10:]) <= 1.25 * 200_000, sizes
    with gym_recording.load(tmp_path) as r:
        assert [ep.observations[0][:4] for ep in r] == [f"{e:04d}" for e in range(400)]


@pytest.mark.parametrize(
    "kind", ["arrays", "infos", "text", "images-zstd", "frames", "frames-zstd"]
)
def test_what_piled_up_while_the_disk_was_full_is_written_as_batches_of_the_usual_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """Once the disk is back, the episodes buffered meanwhile are written as the batches
    they would have been (all went as one batch, past what readers accept after a long
    outage: 4,194,304 info values, 1 GiB of JSON)."""
    keys = [f"k{i}" for i in range(16)]
    image = kind == "images-zstd"
    zstd = {"compression": "zstd"} if kind.endswith("zstd") else {}

    def obs(e: int, t: int) -> Any:
        if kind == "text":  # (per-step values)
            return f"{e}:{t}:" + "x" * 200
        return np.full(
            (24, 24, 3) if image else 4, (e + t) % 256, np.uint8 if image else np.float32
        )

    def frame(e: int, t: int) -> np.ndarray | None:
        return np.full((8, 8, 3), (e + t) % 256, np.uint8) if kind.startswith("frames") else None

    def run(d: Path, outage: range) -> tuple[int, list[int]]:
        disk, raised = _disk(monkeypatch, broken=False), 0

        def call(f: Any, *args: Any, **kw: Any) -> None:
            nonlocal raised
            try:
                f(*args, **kw)
            except WriteError:  # (what it brought is recorded)
                raised += 1

        with TraceRecording(d, batch_bytes=100_000, record_infos=kind == "infos", **zstd) as rec:
            for e in range(300):
                # (compressed batches are written on a thread, which may try the first only
                # as the outage ends, and then write it: the disk is back once it was said)
                disk["broken"] = e in outage or (bool(outage) and outage.start <= e and not raised)
                call(rec.add_reset, obs(e, 0), seed=e, render_frame=frame(e, 0))
                for t in range(1, 21):
                    info = {k: float(t) for k in keys} if kind == "infos" else None
                    call(rec.add_step, t % 2, obs(e, t), 1.0, t == 20, False, info, frame(e, t))
        return raised, [b["steps"] for b in rec.batches]

    _, usual = run(tmp_path / "usual", range(0))
    raised, steps = run(tmp_path / "outage", range(25, 225))
    assert 1 <= raised <= 8, raised  # (tried again as the buffered rows double)
    assert len(steps) > 3 and max(steps) <= max(usual) + 20, (usual, steps)
    assert len(steps) <= 3 * len(usual) + 2, (usual, steps)  # (not one batch an episode)
    assert _episodes(tmp_path / "outage") == _episodes(tmp_path / "usual")
    if kind.startswith("frames"):
        with gym_recording.load(tmp_path / "outage") as r:
            for e, ep in enumerate(r):
                assert ep.render_frames is not None
                assert ep.render_frames[:, 0, 0, 0].tolist() == [(e + t) % 256 for t in range(21)]


def test_while_the_disk_is_full_an_episode_just_begun_is_no_part_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tiny batches of infos and compressed frames, the disk full for a while: a batch its
    values fill as an episode begins ends before it (a part of no step was cut, and its
    compressed frames no longer matched their part: the close raised RecordingError)."""

    def run(d: Path, outage: range) -> list[Any]:
        disk = _disk(monkeypatch, broken=False)
        with TraceRecording(d, batch_bytes=300, record_infos=True, compression="zstd") as rec:
            for e in range(60):
                disk["broken"] = e in outage
                frame = [np.full((8, 8, 3), (e + t) % 256, np.uint8) for t in range(40)]
                with contextlib.suppress(WriteError):  # (what it brought is recorded)
                    obs = {"a": np.full(3, e, np.float32), "b": e}
                    rec.add_reset(obs, seed=e, info={"k": e}, render_frame=frame[0])
                for t in range(1, 4 + (e * 7) % 30):
                    with contextlib.suppress(WriteError):
                        obs = {"a": np.full(3, t, np.float32), "b": t}
                        rec.add_step(0, obs, 1.0, False, False, {"k": t}, frame[t])
        with gym_recording.load(d) as r:
            return [(ep.length, ep.render_frames.tobytes(), ep.infos) for ep in r]

    assert run(tmp_path / "outage", range(10, 50)) == run(tmp_path / "usual", range(0))


def test_a_long_episode_recorded_while_the_disk_is_full_is_written_in_parts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One episode longer than a batch, its writes failing meanwhile: once the disk is back
    it is written in parts of a batch's size (it went as one part, past what readers accept
    after a long outage)."""
    keys = [f"k{i}" for i in range(64)]

    def run(d: Path, outage: range) -> list[int]:
        disk = _disk(monkeypatch, broken=False)
        with TraceRecording(d, batch_bytes=100_000, record_infos=True) as rec:
            rec.add_reset(np.zeros(2, np.float32), seed=0)
            for t in range(3000):
                disk["broken"] = t in outage
                with contextlib.suppress(WriteError):  # (the step is recorded)
                    rec.add_step(0, np.full(2, t, np.float32), 1.0, info={k: t for k in keys})
        return [b["steps"] for b in rec.batches]

    usual = run(tmp_path / "usual", range(0))
    steps = run(tmp_path / "outage", range(100, 2900))
    assert len(steps) > 3 and max(steps) <= max(usual) + 1, (usual, steps)
    with gym_recording.load(tmp_path / "outage") as r:
        (ep,) = r
        assert ep.observations[:, 0].tolist() == [0.0, *range(3000)]
        assert [info["k63"] for info in ep.infos[1:]] == list(range(3000))


def test_an_episode_begun_after_a_write_failed_between_episodes_is_cut_into_parts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that fails with no episode open (save_complete() between episodes): the next
    episode, longer than a batch, still goes in parts of a batch's size (it grew as one part
    until the retry, with the outage's length)."""

    def run(d: Path, outage: bool) -> tuple[list[int], list[Any]]:
        disk = _disk(monkeypatch, broken=outage)
        with TraceRecording(d, batch_bytes=2000) as rec:
            for e, n in enumerate([30] * 40 + [3000, 30]):
                if n == 3000:
                    with contextlib.suppress(WriteError):
                        rec.save_complete()
                with contextlib.suppress(WriteError):
                    rec.add_reset(np.zeros(4, np.float32), seed=e)
                for t in range(1, n + 1):
                    with contextlib.suppress(WriteError):
                        rec.add_step(0, np.full(4, t, np.float32), 1.0, t == n, False)
            disk["broken"] = False
        return [b["steps"] for b in rec.batches], _episodes(d)

    usual, usual_episodes = run(tmp_path / "usual", False)
    steps, episodes = run(tmp_path / "outage", True)
    assert episodes == usual_episodes
    assert max(steps) <= max(usual), (usual, steps)


def _interrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[TraceRecording, list[str]]:
    """Record 12 episodes with a KeyboardInterrupt inside the second batch's write (in the
    recording's thread, after its blob was published), go on as a user would, and close."""
    monkeypatch.setattr(W, "FOREGROUND_WRITE_SHARE", FOREGROUND)
    calls = {"n": 0}

    def interrupt(name: str) -> None:
        calls["n"] += 1
        if calls["n"] == 5:  # the second batch's JSON: its blob is published
            raise KeyboardInterrupt

    written = _file_by_file(monkeypatch, interrupt)
    rec = TraceRecording(tmp_path, batch_bytes=600)
    seen = 0
    with pytest.raises(KeyboardInterrupt):  # at once: not kept for later like an error
        for e in range(12):
            rec.add_reset(np.full(3, e, np.float32), seed=e)
            seen = e
            for t in range(10):
                rec.add_step(t % 2, np.full(3, t, np.float32), 1.0, terminated=t == 9)
    assert calls["n"] == 5
    # The user goes on (or just closes): the next flush or close finishes the batch.
    for e in range(seen + 1, 12):
        _episode(rec, e)
    rec.close()
    return rec, written


def test_ctrl_c_during_a_foreground_write_propagates_and_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A KeyboardInterrupt in a foreground write propagates; no episode lost, no file rewritten."""
    rec, written = _interrupted(tmp_path, monkeypatch)
    _each_file_once(written, rec.batch_count)  # the interrupted batch's blob was not rewritten
    assert sorted(set(_seeds(tmp_path))) == list(range(12))


def test_ctrl_c_during_a_foreground_write_writes_no_episode_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a KeyboardInterrupt in a foreground write, every episode reads back exactly once."""
    _interrupted(tmp_path, monkeypatch)
    assert _seeds(tmp_path) == list(range(12))


@pytest.mark.skipif(LocalStorage._start_write_c is None, reason="needs the C extension")
@EITHER_WAY
@pytest.mark.parametrize("failing", [".bin", ".json"], ids=["blob", "batch-json"])
def test_a_group_failing_midway_is_finished_at_the_next_flush(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, share: float, failing: str
) -> None:
    """A C group write failing at one file keeps those before it; the next flush writes the rest."""
    # The C group write (``_speedups.start_write``, behind both ``LocalStorage.write_files``
    # and ``start_write_files``) fails once at one file of the second batch (its rename: the
    # name is taken by a non-empty directory): the files before it stay published, only the
    # rest are written at the next flush, and every episode reads back once.
    monkeypatch.setattr(W, "FOREGROUND_WRITE_SHARE", share)
    real_start = LocalStorage._start_write_c
    real_write_files = LocalStorage.write_files
    state = {"batches": 0, "failed": 0, "in_write_files": 0}
    calls: list[list[str]] = []  # the names each group write was given
    failed: dict[str, Any] = {}  # the failing write: its names, the one that failed, published

    def write_files(self: LocalStorage, files: Any, published: list[str]) -> None:
        state["in_write_files"] += 1
        try:
            real_write_files(self, files, published)
        finally:
            state["in_write_files"] -= 1

    def squat(directory: str, files: Any) -> Any:
        """Before a write: if it is the one to fail, the failure set up, and what undoes it."""
        calls.append([n for _, n, _, _ in files])
        if len(files) == 3:
            state["batches"] += 1
        if state["batches"] != 2 or state["failed"]:
            return None
        state["failed"] = 1
        name = next(n for _, n, _, _ in files if n.endswith(failing) and "manifest" not in n)
        via = "write_files" if state["in_write_files"] else "start_write_files"
        failed.update(names=calls[-1], name=name, via=via)
        path = Path(directory) / name
        path.mkdir()
        (path / "x").write_bytes(b"")  # a non-empty directory: the rename fails

        def undo() -> None:
            (path / "x").unlink()
            path.rmdir()

        return undo

    class Task:
        def __init__(self, task: Any, undo: Any) -> None:
            self.task, self.undo = task, undo

        def wait(self, published: list[str]) -> Any:
            try:
                return self.task.wait(published)
            finally:
                if self.undo is not None:
                    failed["published"] = list(published)
                    self.undo()

    def start_write(directory: str, files: Any, mode: int) -> Task:
        undo = squat(directory, files)
        return Task(real_start(directory, files, mode), undo)

    monkeypatch.setattr(LocalStorage, "_start_write_c", staticmethod(start_write))
    monkeypatch.setattr(LocalStorage, "write_files", write_files)
    rec = _record(tmp_path)
    rec.close()
    assert state["failed"] == 1
    assert failed["via"] == ("write_files" if share == FOREGROUND else "start_write_files")
    names, at = failed["names"], failed["names"].index(failed["name"])
    assert failed["published"] == names[:at]  # the files before it stayed published
    assert calls[calls.index(names) + 1] == names[at:]  # the next flush wrote only the rest
    assert _seeds(tmp_path) == list(range(12))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(TEMP_PREFIX)]


def test_close_without_waiting_writes_the_last_batch_in_the_background(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: list[str]
) -> None:
    """close(wait=False) writes the last batch away, however cheap, refuses new episodes, and
    the next close() waits for it: the same episodes as a plain close."""
    monkeypatch.setattr(W, "FOREGROUND_WRITE_SHARE", FOREGROUND)
    rec = _record(tmp_path / "a")
    before = len(where)
    rec.close(wait=False)
    assert where[before:] == ["bg"] and rec.closed
    with pytest.raises(RecordingClosedError):
        rec.add_reset(np.zeros(3, np.float32))
    rec.close(wait=False)  # (again: nothing more to start)
    rec.close()
    rec.close()
    _record(tmp_path / "b").close()
    assert _episodes(tmp_path / "a") == _episodes(tmp_path / "b")
    assert _seeds(tmp_path / "a") == list(range(12))


def test_close_without_waiting_raises_the_last_write_error_at_the_next_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A last batch whose background write fails (and fails again on its retry) raises at the
    close() that waits for it; the batches before it stay readable, and the batch stays
    buffered: each close() tries again, and writes it once the disk is back."""
    disk = {"broken": False}
    _fail_writes(monkeypatch, lambda n: disk["broken"] and n.endswith(".bin"))
    rec = _record(tmp_path)
    rec.end_episode()
    rec.save_complete()
    _episode(rec, 12)
    disk["broken"] = True
    rec.close(wait=False)
    with pytest.raises(RecordingError, match="simulated"):
        rec.close()
    assert rec.closed
    with pytest.raises(RecordingError, match="simulated"):
        rec.close()
    assert _seeds(tmp_path) == list(range(12))  # (not episode 12)
    disk["broken"] = False
    rec.close()
    assert _seeds(tmp_path) == list(range(13))
    rec.close()  # (all written: nothing more to do)


def test_a_write_whose_thread_cannot_start_is_done_in_the_recording_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When no thread can start (a process at its limit), a batch encoded on the writer's
    thread (infos make it so) is written in the recording's instead (found in review: the next
    wait raised "cannot join thread before it is started")."""
    start = threading.Thread.start

    def refused(self: threading.Thread) -> None:
        if self.name == "gym-recording-writer":
            raise RuntimeError("can't start new thread")
        start(self)

    monkeypatch.setattr(threading.Thread, "start", refused)
    with TraceRecording(tmp_path, batch_bytes=2_000, record_infos=True) as rec:
        for e in range(6):
            rec.add_reset(np.zeros(3, np.float32), info={"e": e})
            for t in range(20):
                rec.add_step(t % 2, np.full(3, t, np.float32), 1.0, info={"t": t, "s": "x"})
            rec.end_episode()
        assert rec.batch_count > 1
    with gym_recording.load(tmp_path) as got:
        episodes = list(got)
    assert [ep.infos[0] for ep in episodes] == [{"e": e} for e in range(6)]
    assert all(ep.infos[1:] == [{"t": t, "s": "x"} for t in range(20)] for ep in episodes)
