"""LocalStorage.write_atomic and write_files, through atomicwrites and through the C
``write_files``.

Both paths run the same protocol (temporary file, write, fsync, rename, fsync of the directory)
and must leave the same files, the same permission bits, and the same errors. Every test here
runs once per path; the C one is skipped where the extension is not built.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import gym_recording
from gym_recording import _storage
from gym_recording._errors import RecordingError, TraceFormatError
from gym_recording._storage import TEMP_PREFIX, LocalStorage
from gym_recording.recording import TraceRecording

try:
    from gym_recording import _speedups
except ImportError:  # pragma: no cover - built without a compiler
    _speedups = None  # type: ignore[assignment]

HAVE_C = getattr(_speedups, "write_files", None) is not None
requires_c = pytest.mark.skipif(not HAVE_C, reason="the C extension is not built")


@pytest.fixture(params=["c", "atomicwrites"])
def path_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "c":
        if not HAVE_C:
            pytest.skip("the C extension is not built")
        monkeypatch.setattr(_storage, "_speedups", _speedups)
    else:
        monkeypatch.setattr(_storage, "_speedups", None)
    return str(request.param)


@pytest.fixture(params=["c", "c-thread", "atomicwrites"])
def group_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How a group of files is written: ``write_files`` through the C extension or through
    atomicwrites, or ``start_write_files`` (the C extension's own thread) and ``wait``."""
    if request.param != "atomicwrites" and not HAVE_C:
        pytest.skip("the C extension is not built")
    monkeypatch.setattr(
        _storage, "_speedups", _speedups if request.param != "atomicwrites" else None
    )
    return str(request.param)


def _write_group(st: LocalStorage, files: Any, published: list[str], kind: str) -> None:
    if kind == "c-thread":
        pending = st.start_write_files(files)
        assert pending is not None
        pending.wait(published)
    else:
        assert kind != "c" or _storage._speedups is not None
        st.write_files(files, published)


def _temps(d: Path) -> list[str]:
    return [n for n in os.listdir(d) if n.startswith(TEMP_PREFIX)]


@pytest.mark.parametrize(
    "chunks",
    [
        [],
        [b""],
        [b"abc", bytearray(b"de"), memoryview(b"fgh")[1:]],
        [np.arange(10, dtype=np.float32).data, b"", b"x"],
        [bytes([i % 251]) * (i % 7) for i in range(2500)],  # more chunks than IOV_MAX
        [b""] * 1500 + [b"tail"],  # a first writev of only empty chunks
        [os.urandom(3_000_000), os.urandom(5)],
        # 4 MiB or more is streamed, in 2 MiB windows of at most 64 chunks (_speedups.c)
        [os.urandom(5_000_000)],
        [os.urandom(2 << 20), b"", os.urandom(2 << 20), b"z"],  # windows end on chunk ends
        [os.urandom(20_011) for _ in range(250)],  # windows of 64 chunks, then of the rest
        [os.urandom(3_000_001), np.arange(300_000, dtype=np.float64).data, b"", b"tail"],
    ],
    ids=[
        "none",
        "empty",
        "mixed-types",
        "ndarray-buffer",
        "2500-chunks",
        "empty-group",
        "large",
        "streamed",
        "streamed-window-edges",
        "streamed-many-chunks",
        "streamed-mixed",
    ],
)
def test_write_atomic_writes_exactly_the_chunks(
    tmp_path: Path, path_kind: str, chunks: list[Any]
) -> None:
    st = LocalStorage(tmp_path)
    expected = b"".join(bytes(c) for c in chunks)
    assert st.write_atomic("f.bin", chunks) == len(expected)
    assert (tmp_path / "f.bin").read_bytes() == expected
    assert bytes(st.map("f.bin")) == expected
    assert not _temps(tmp_path)


@pytest.mark.parametrize("sync_directory", [True, False])
def test_replaces_an_existing_file_and_sets_normal_permissions(
    tmp_path: Path, path_kind: str, sync_directory: bool
) -> None:
    """``sync_directory=False`` leaves out only the directory's fsync (its effect is traced in
    tests/test_durability.py): the file, its replacement and its permissions are the same."""
    st = LocalStorage(tmp_path)
    st.write_atomic("m.json", [b"old contents, longer"], sync_directory=sync_directory)
    st.write_atomic("m.json", [b"new", b"!"], sync_directory=sync_directory)
    assert (tmp_path / "m.json").read_bytes() == b"new!"
    mode = stat.S_IMODE(os.stat(tmp_path / "m.json").st_mode)
    assert mode == _storage._FILE_MODE  # what open() gives, not mkstemp's 0600
    assert not _temps(tmp_path)
    st.sync()


@requires_c
def test_both_paths_write_the_same_recording(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:

    def record(d: Path) -> None:
        rec = TraceRecording(d, batch_bytes=2_000)
        for e in range(7):
            rec.add_reset(np.full(5, e, np.float32), seed=e)
            for t in range(20):
                rec.add_step(t % 3, np.full(5, t, np.float32), float(t), terminated=t == 19)
        rec.close()

    monkeypatch.setattr(_storage, "_speedups", _speedups)
    record(tmp_path / "c")
    monkeypatch.setattr(_storage, "_speedups", None)
    record(tmp_path / "py")
    # The same files, up to the writer id in their names (the blobs byte for byte).
    c_names, py_names = sorted(os.listdir(tmp_path / "c")), sorted(os.listdir(tmp_path / "py"))
    assert len(c_names) == len(py_names) > 3
    for a, b in zip(c_names, py_names, strict=True):
        assert a.rsplit(".", 2)[1:] == b.rsplit(".", 2)[1:]
        if a.endswith(".bin"):
            assert (tmp_path / "c" / a).read_bytes() == (tmp_path / "py" / b).read_bytes()
    with gym_recording.load(tmp_path / "c") as a, gym_recording.load(tmp_path / "py") as b:
        assert len(a) == len(b) == 7
        for x, y in zip(a, b, strict=True):
            assert x.observations.tobytes() == y.observations.tobytes()
            assert x.actions.tobytes() == y.actions.tobytes()
            assert x.rewards.tobytes() == y.rewards.tobytes()


def test_rename_onto_a_non_empty_directory_fails_and_leaves_no_temporary(
    tmp_path: Path, path_kind: str
) -> None:
    st = LocalStorage(tmp_path)
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "inside").write_bytes(b"x")
    with pytest.raises(RecordingError, match=r"'.*taken'.*nothing of it was published") as info:
        st.write_atomic("taken", [b"data"])
    assert isinstance(info.value.__cause__, OSError)
    assert not _temps(tmp_path)
    assert (tmp_path / "taken" / "inside").read_bytes() == b"x"


def test_missing_directory_is_a_recording_error(tmp_path: Path, path_kind: str) -> None:
    st = LocalStorage(tmp_path / "d")
    (tmp_path / "d").rmdir()
    with pytest.raises(RecordingError, match="No such file or directory"):
        st.write_atomic("f.bin", [b"x"])


@requires_c
@pytest.mark.parametrize("squatter", ["file", "symlink"])
def test_whatever_holds_the_temporary_name_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, squatter: str
) -> None:
    """O_EXCL and O_NOFOLLOW: a file (or a symbolic link) already under the temporary name is
    neither overwritten nor followed; another name is used."""
    monkeypatch.setattr(_storage, "_speedups", _speedups)
    names = iter(["aaaaaaaaaaaa", "bbbbbbbbbbbb"])
    monkeypatch.setattr(_storage, "_temp_name", lambda: TEMP_PREFIX + next(names))
    taken = tmp_path / f"{TEMP_PREFIX}aaaaaaaaaaaa"
    outside = tmp_path / "outside"
    if squatter == "file":
        taken.write_bytes(b"someone else's")
    else:
        taken.symlink_to(outside)
    LocalStorage(tmp_path).write_atomic("f.bin", [b"mine"])
    assert (tmp_path / "f.bin").read_bytes() == b"mine"
    assert _temps(tmp_path) == [taken.name]
    if squatter == "file":
        assert taken.read_bytes() == b"someone else's"
    else:
        assert not outside.exists()


def test_read_bytes_reads_a_file_that_grew_since_fstat_within_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """read_bytes reads what fstat reports plus a byte; a file that grew goes on being read,
    and one that grew past the limit is refused (never read whole into memory)."""
    (tmp_path / "f.json").write_bytes(b"x" * 1000)
    st = LocalStorage(tmp_path)
    real_fstat = os.fstat

    def shrunk(fd: int) -> os.stat_result:  # fstat as it was when the file held 10 bytes
        r = real_fstat(fd)
        return os.stat_result((r.st_mode, *r[1:6], 10, *r[7:]))

    monkeypatch.setattr(_storage.os, "fstat", shrunk)
    assert st.read_bytes("f.json", 5000) == b"x" * 1000
    assert st.read_bytes("f.json", 1000) == b"x" * 1000
    with pytest.raises(TraceFormatError, match="more than the limit of 999 bytes"):
        st.read_bytes("f.json", 999)


def test_sync_of_a_vanished_directory_is_a_recording_error(tmp_path: Path) -> None:
    st = LocalStorage(tmp_path / "d")
    (tmp_path / "d").rmdir()
    with pytest.raises(RecordingError, match="could not sync the directory"):
        st.sync()


def _group(n: int = 3) -> list[tuple[str, list[Any], bool]]:
    """A batch's files: a blob, a batch JSON (the directory synced after it), a manifest."""
    return [
        ("b.bin", [os.urandom(100_000), np.arange(7, dtype=np.float64).data], False),
        ("b.json", [b'{"episodes":', b"[]}"], True),
        ("m.manifest.json", [b"{}"], False),
    ][:n]


def _joined(chunks: list[Any]) -> bytes:
    return b"".join(bytes(memoryview(c).cast("B")) for c in chunks)


def test_write_files_publishes_every_file_in_order(tmp_path: Path, group_kind: str) -> None:
    st = LocalStorage(tmp_path)
    (tmp_path / "m.manifest.json").write_bytes(b"the old manifest")
    files, published = _group(), []  # type: ignore[var-annotated]
    _write_group(st, files, published, group_kind)
    assert published == ["b.bin", "b.json", "m.manifest.json"]
    for name, chunks, _ in files:
        assert (tmp_path / name).read_bytes() == _joined(chunks)
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == _storage._FILE_MODE
    assert not _temps(tmp_path)
    _write_group(st, _group(1), published, group_kind)  # one file alone
    assert published == ["b.bin", "b.json", "m.manifest.json", "b.bin"]


@pytest.mark.parametrize("at", [0, 1, 2])
def test_write_files_stops_at_the_file_that_fails(tmp_path: Path, group_kind: str, at: int) -> None:
    """The files before the failing one are published (and listed), the failing one and those
    after it are not, and no temporary file is left; the error names the failing file."""
    st = LocalStorage(tmp_path)
    files = _group()
    taken = tmp_path / files[at][0]
    taken.mkdir()
    (taken / "inside").write_bytes(b"x")  # a non-empty directory: the rename fails
    published: list[str] = []
    with pytest.raises(RecordingError, match=rf"'.*{files[at][0]}'.*nothing of it was published"):
        _write_group(st, files, published, group_kind)
    assert published == [name for name, _, _ in files[:at]]
    for name, chunks, _ in files[:at]:
        assert (tmp_path / name).read_bytes() == _joined(chunks)
    for name, _, _ in files[at + 1 :]:
        assert not (tmp_path / name).exists()
    assert not _temps(tmp_path)
    (taken / "inside").unlink()
    taken.rmdir()
    _write_group(st, files[at:], published, group_kind)  # the rest, as a retry writes it
    assert published == [name for name, _, _ in files]


@requires_c
@pytest.mark.parametrize("kind", ["c", "c-thread"])
def test_write_files_takes_other_temporary_names_when_one_is_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    monkeypatch.setattr(_storage, "_speedups", _speedups)
    names = iter(["a" * 12, "b" * 12, "c" * 12, "d" * 12, "e" * 12, "f" * 12])
    monkeypatch.setattr(_storage, "_temp_name", lambda: TEMP_PREFIX + next(names))
    taken = tmp_path / f"{TEMP_PREFIX}{'b' * 12}"  # the second file's first name
    taken.write_bytes(b"someone else's")
    files, published = _group(), []  # type: ignore[var-annotated]
    _write_group(LocalStorage(tmp_path), files, published, kind)
    assert published == ["b.bin", "b.json", "m.manifest.json"]
    for name, chunks, _ in files:
        assert (tmp_path / name).read_bytes() == _joined(chunks)
    assert _temps(tmp_path) == [taken.name]
    assert taken.read_bytes() == b"someone else's"


def test_write_files_checks_names_before_writing(tmp_path: Path, group_kind: str) -> None:
    published: list[str] = []
    with pytest.raises(TraceFormatError, match="plain file name"):
        _write_group(
            LocalStorage(tmp_path),
            [("ok", [b"x"], False), ("../x", [b"y"], False)],
            published,
            group_kind,
        )
    assert published == []
    assert not (tmp_path / "ok").exists()
    assert not _temps(tmp_path)


@requires_c
def test_c_write_files_rejects_what_it_cannot_write(tmp_path: Path) -> None:
    bad: list[tuple[Any, type[Exception]]] = [
        ([(TEMP_PREFIX + "x", "f", [b"a", 3], False)], TypeError),  # not a buffer
        ([(TEMP_PREFIX + "x", "f", 3, False)], TypeError),  # chunks not a sequence
        ([(TEMP_PREFIX + "x", "f", [b"a"])], TypeError),  # not four items
        ([], ValueError),  # no files
        ([(TEMP_PREFIX + str(i), str(i), [b"a"], False) for i in range(65)], ValueError),
    ]
    for files, error in bad:
        with pytest.raises(error):
            _speedups.write_files(str(tmp_path), files, 0o644, [])
    with pytest.raises(TypeError):
        _speedups.write_files(str(tmp_path), [], 0o644, ())  # published is not a list
    assert os.listdir(tmp_path) == []  # nothing was created before the arguments were checked


@requires_c
def test_start_write_files_rejects_what_write_files_rejects(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        _speedups.start_write_files(
            str(tmp_path), [(TEMP_PREFIX + "x", "f", [b"a", 3], False)], 0o644
        )
    with pytest.raises(ValueError, match="1 to 64 files"):
        _speedups.start_write_files(str(tmp_path), [], 0o644)
    assert os.listdir(tmp_path) == []
    task = _speedups.start_write_files(
        str(tmp_path), [(TEMP_PREFIX + "x", "f", [b"a"], True)], 0o644
    )
    with pytest.raises(TypeError, match="must be a list"):
        task.wait(())
    published: list[str] = []
    assert task.wait(published) == 1
    assert published == ["f"]
    with pytest.raises(ValueError, match="waited for already"):
        task.wait([])


@requires_c
def test_a_write_task_dropped_unwaited_still_finishes_its_write(tmp_path: Path) -> None:
    """Its chunks are held until its thread ends: dropping the task joins it first."""
    data = bytearray(os.urandom(6_000_000))
    task = _speedups.start_write_files(
        str(tmp_path), [(TEMP_PREFIX + "x", "f", [data], True)], 0o644
    )
    del task
    assert (tmp_path / "f").read_bytes() == data
    data.extend(b"x")  # no buffer of it is still exported


@requires_c
def test_start_write_files_is_not_used_where_write_files_is_overridden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A subclass (or a test) that replaces write_files gets its own write_files called."""
    monkeypatch.setattr(_storage, "_speedups", _speedups)

    class Counting(LocalStorage):
        def write_files(self, files: Any, published: list[str]) -> None:
            super().write_files(files, published)

    assert Counting(tmp_path).start_write_files(_group()) is None
    assert LocalStorage(tmp_path).start_write_files([]) is None
    monkeypatch.setattr(_storage, "_speedups", None)
    assert LocalStorage(tmp_path).start_write_files(_group()) is None
    assert os.listdir(tmp_path) == []


def test_temporary_names_differ_and_change_in_a_forked_child() -> None:
    names = {_storage._temp_name() for _ in range(1000)}
    assert len(names) == 1000
    assert all(n.startswith(TEMP_PREFIX) and len(n) == len(TEMP_PREFIX) + 12 for n in names)
    if not hasattr(os, "fork"):
        pytest.skip("no fork here")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next name, to the parent (and never back into pytest)
        try:
            os.write(w, _storage._temp_name().encode())
        finally:
            os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    child = os.read(r, 100).decode()
    os.close(r)
    assert child != _storage._temp_name()


@requires_c
@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_process_forked_during_a_write_cannot_wait_for_it_and_does_not_hang(
    tmp_path: Path,
) -> None:
    """The writing thread is not in a forked child: waiting there raises at once, dropping
    the task there does not join it, and the parent's wait is unaffected."""
    data = os.urandom(8_000_000)
    task = _speedups.start_write_files(
        str(tmp_path), [(TEMP_PREFIX + "x", "f", [data], True)], 0o644
    )
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its verdict to the parent (and never back into pytest)
        verdict = b"no error"
        try:
            try:
                task.wait([])
            except RuntimeError as exc:
                verdict = b"forked" if "forked" in str(exc) else str(exc).encode()
            del task  # must not join a thread this process does not have
            os.write(w, verdict)
        finally:
            os._exit(0)
    os.close(w)
    for _ in range(200):  # up to 10 s
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the forked child hung")
    verdict = os.read(r, 200)
    os.close(r)
    assert verdict == b"forked"
    published: list[str] = []
    assert task.wait(published) == len(data)
    assert published == ["f"]
    assert (tmp_path / "f").read_bytes() == data
