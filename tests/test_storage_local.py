"""LocalStorage: write_atomic (atomicwrites), and the group write of write_files and
start_write_files, through the C extension's ``start_write`` and through Python.

Both group writes run the same protocol (every temporary file written, every one fsynced, then
each renamed in order, the directory fsynced after those that ask for it) and must leave the
same files, the same permission bits, and the same errors. Every group-write test runs once
per implementation (the C one is skipped where the extension is not built) and once in the
foreground (``write_files``) and once in the background (``start_write_files`` and ``wait``).
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import gym_recording
from gym_recording import _accel
from gym_recording._errors import RecordingError, TraceFormatError
from gym_recording.format.names import TEMP_PREFIX
from gym_recording.record import writer
from gym_recording.record.recording import TraceRecording
from gym_recording.storage import LocalStorage
from gym_recording.storage import local as _local
from gym_recording.storage.base import ThreadedWrite

speedups = _accel.speedups
HAVE_C = getattr(speedups, "start_write", None) is not None
requires_c = pytest.mark.skipif(not HAVE_C, reason="the C extension is not built")
requires_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")


@pytest.fixture(params=["c", "python"])
def impl(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The group write's implementation: the C extension's ``start_write``, or Python."""
    if request.param == "c":
        if not HAVE_C:
            pytest.skip("the C extension is not built")
        monkeypatch.setattr(LocalStorage, "_start_write_c", speedups.start_write)
    else:
        monkeypatch.setattr(LocalStorage, "_start_write_c", None)
    return str(request.param)


@pytest.fixture(params=["foreground", "background"])
def where(request: pytest.FixtureRequest) -> str:
    """Where a group is written: ``write_files``, or ``start_write_files`` and ``wait``."""
    return str(request.param)


def _write_group(st: LocalStorage, files: Any, published: list[str], where: str) -> None:
    if where == "background":
        pending = st.start_write_files(files)
        # Without the C extension, a Python thread; with it, the extension's own thread.
        assert isinstance(pending, ThreadedWrite) == (LocalStorage._start_write_c is None)
        pending.wait(published)
    else:
        st.write_files(files, published)


def _temps(d: Path) -> list[str]:
    return sorted(n for n in os.listdir(d) if n.startswith(TEMP_PREFIX))


def _joined(chunks: list[Any]) -> bytes:
    return b"".join(bytes(memoryview(c).cast("B")) for c in chunks)


CHUNKS = pytest.mark.parametrize(
    "chunks",
    [
        [],
        [b""],
        [b"abc", bytearray(b"de"), memoryview(b"fgh")[1:]],
        [np.arange(10, dtype=np.float32).data, b"", b"x"],
        [bytes([i % 251]) * (i % 7) for i in range(2500)],  # more chunks than IOV_MAX
        [b""] * 1500 + [b"tail"],  # a first writev of only empty chunks
        [os.urandom(3_000_000), os.urandom(5)],
        # 4 MiB or more is streamed by the C write, in 2 MiB windows of at most 64 chunks
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


@CHUNKS
def test_write_atomic_writes_exactly_the_chunks(tmp_path: Path, chunks: list[Any]) -> None:
    """write_atomic writes exactly the chunks' bytes, returns their size, and leaves no temp."""
    st = LocalStorage(tmp_path)
    expected = _joined(chunks)
    assert st.write_atomic("f.bin", chunks) == len(expected)
    assert (tmp_path / "f.bin").read_bytes() == expected
    assert bytes(st.map("f.bin")) == expected
    assert not _temps(tmp_path)


@CHUNKS
def test_write_files_writes_exactly_the_chunks(
    tmp_path: Path, impl: str, where: str, chunks: list[Any]
) -> None:
    """The group write writes exactly the chunks' bytes, publishes the file, leaves no temp."""
    st = LocalStorage(tmp_path)
    published: list[str] = []
    _write_group(st, [("f.bin", chunks, True), ("g.bin", [b"next"], False)], published, where)
    assert published == ["f.bin", "g.bin"]
    assert (tmp_path / "f.bin").read_bytes() == _joined(chunks)
    assert bytes(st.map("f.bin")) == _joined(chunks)
    assert (tmp_path / "g.bin").read_bytes() == b"next"
    assert not _temps(tmp_path)


def _open_mode() -> int:
    """The bits open() gives a new file now: 0666 without the umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def test_files_follow_the_umask_of_when_they_are_written(tmp_path: Path, impl: str) -> None:
    """A umask set after import (a program that wants private files) is followed by every
    write: single files, group writes, and exports (which rename a temporary file)."""
    from gym_recording.tools.export import export

    old = os.umask(0o077)
    try:
        rec = TraceRecording(tmp_path / "r")
        rec.add_reset(np.zeros(2))
        rec.close()
        export(tmp_path / "r", to="npz", out=tmp_path / "x.npz")
        LocalStorage(tmp_path / "r").write_atomic("m.json", [b"{}"])
        names = [*os.listdir(tmp_path / "r")]
        modes = {stat.S_IMODE(os.stat(tmp_path / "r" / n).st_mode) for n in names}
        modes.add(stat.S_IMODE(os.stat(tmp_path / "x.npz").st_mode))
        assert modes == {0o600}, names
    finally:
        os.umask(old)


@pytest.mark.parametrize("sync_directory", [True, False])
def test_write_atomic_replaces_an_existing_file_and_sets_normal_permissions(
    tmp_path: Path, sync_directory: bool
) -> None:
    """write_atomic replaces a file, with the bits open() gives (0666 & ~umask, not 0600)."""
    # sync_directory=False leaves out only the directory's fsync (its effect is traced in
    # tests/test_durability.py): the file, its replacement and its permissions are the same.
    st = LocalStorage(tmp_path)
    st.write_atomic("m.json", [b"old contents, longer"], sync_directory=sync_directory)
    st.write_atomic("m.json", [b"new", b"!"], sync_directory=sync_directory)
    assert (tmp_path / "m.json").read_bytes() == b"new!"
    mode = stat.S_IMODE(os.stat(tmp_path / "m.json").st_mode)
    assert mode == _open_mode()
    assert not _temps(tmp_path)
    st.sync()


@pytest.mark.parametrize("sync_directory", [True, False])
def test_write_files_replaces_an_existing_file_and_sets_normal_permissions(
    tmp_path: Path, impl: str, where: str, sync_directory: bool
) -> None:
    """The group write replaces a file, with the bits open() gives (0666 & ~umask)."""
    st = LocalStorage(tmp_path)
    published: list[str] = []
    _write_group(st, [("m.json", [b"old contents, longer"], sync_directory)], published, where)
    os.chmod(tmp_path / "m.json", 0o600)  # the replacement's bits are its own
    _write_group(st, [("m.json", [b"new", b"!"], sync_directory)], published, where)
    assert published == ["m.json", "m.json"]
    assert (tmp_path / "m.json").read_bytes() == b"new!"
    mode = stat.S_IMODE(os.stat(tmp_path / "m.json").st_mode)
    assert mode == _open_mode()
    assert not _temps(tmp_path)
    st.sync()


def _record(d: Path) -> None:
    rec = TraceRecording(d, batch_bytes=2_000)
    for e in range(7):
        rec.add_reset(np.full(5, e, np.float32), seed=e)
        for t in range(20):
            rec.add_step(t % 3, np.full(5, t, np.float32), float(t), terminated=t == 19)
    rec.close()


@requires_c
def test_both_implementations_write_the_same_recording(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recording written through C or Python, foreground or background, has the same files."""
    dirs = []
    for kind in ("c", "python"):
        monkeypatch.setattr(
            LocalStorage, "_start_write_c", speedups.start_write if kind == "c" else None
        )
        for share in (float("inf"), 0.0):  # every batch in the foreground; all but the first
            monkeypatch.setattr(writer, "FOREGROUND_WRITE_SHARE", share)
            dirs.append(tmp_path / f"{kind}-{share}")
            _record(dirs[-1])
    # The same files, up to the writer id in their names (the blobs byte for byte).
    first, *others = dirs
    names = sorted(os.listdir(first))
    assert len(names) > 3
    assert not _temps(first)
    for other in others:
        other_names = sorted(os.listdir(other))
        assert len(other_names) == len(names)
        for a, b in zip(names, other_names, strict=True):
            assert a.rsplit(".", 2)[1:] == b.rsplit(".", 2)[1:]
            if a.endswith(".bin"):
                assert (first / a).read_bytes() == (other / b).read_bytes()
        with gym_recording.load(first) as x, gym_recording.load(other) as y:
            assert len(x) == len(y) == 7
            for p, q in zip(x, y, strict=True):
                assert p.observations.tobytes() == q.observations.tobytes()
                assert p.actions.tobytes() == q.actions.tobytes()
                assert p.rewards.tobytes() == q.rewards.tobytes()


def test_write_atomic_onto_a_non_empty_directory_fails_and_leaves_no_temporary(
    tmp_path: Path,
) -> None:
    """A rename onto a non-empty directory is a RecordingError; no temp, the directory intact."""
    st = LocalStorage(tmp_path)
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "inside").write_bytes(b"x")
    with pytest.raises(RecordingError, match=r"'.*taken'.*nothing of it was published") as info:
        st.write_atomic("taken", [b"data"])
    assert isinstance(info.value.__cause__, OSError)
    assert not _temps(tmp_path)
    assert (tmp_path / "taken" / "inside").read_bytes() == b"x"


def test_write_atomic_into_a_missing_directory_is_a_recording_error(tmp_path: Path) -> None:
    """write_atomic into a directory removed since the storage was made: a RecordingError."""
    st = LocalStorage(tmp_path / "d")
    (tmp_path / "d").rmdir()
    with pytest.raises(RecordingError, match="No such file or directory"):
        st.write_atomic("f.bin", [b"x"])


def test_write_files_into_a_missing_directory_is_a_recording_error(
    tmp_path: Path, impl: str, where: str
) -> None:
    """The group write into a removed directory: a RecordingError naming the first file."""
    st = LocalStorage(tmp_path / "d")
    (tmp_path / "d").rmdir()
    published: list[str] = []
    with pytest.raises(RecordingError, match=r"'.*b\.bin' \(No such file or directory\)"):
        _write_group(st, _group(), published, where)
    assert published == []
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("squatter", ["file", "symlink"])
@pytest.mark.parametrize("taken_at", [0, 1], ids=["first-name", "second-name"])
def test_whatever_holds_a_temporary_name_is_left_alone(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    impl: str,
    where: str,
    squatter: str,
    taken_at: int,
) -> None:
    """O_EXCL and O_NOFOLLOW: a file (or symbolic link) under a temporary name is neither
    overwritten nor followed; other names are taken and the files are all written."""
    tokens = iter(f"{c}" * 12 for c in "abcdefghij")
    asked: list[int] = []

    def token_hex(n: int) -> str:
        asked.append(n)
        return next(tokens)

    monkeypatch.setattr(_local.secrets, "token_hex", token_hex)
    taken = tmp_path / f"{TEMP_PREFIX}{'ab'[taken_at] * 12}"  # the first or second file's
    outside = tmp_path / "outside"
    if squatter == "file":
        taken.write_bytes(b"someone else's")
    else:
        taken.symlink_to(outside)
    files, published = _group(), []  # type: ignore[var-annotated]
    _write_group(LocalStorage(tmp_path), files, published, where)
    assert published == ["b.bin", "b.json", "m.manifest.json"]
    for name, chunks, _ in files:
        assert (tmp_path / name).read_bytes() == _joined(chunks)
    assert _temps(tmp_path) == [taken.name]
    assert set(asked) == {6} and len(asked) > len(files)  # new names were taken
    if squatter == "file":
        assert taken.read_bytes() == b"someone else's"
    else:
        assert taken.is_symlink()
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

    monkeypatch.setattr(_local.os, "fstat", shrunk)
    assert st.read_bytes("f.json", 5000) == b"x" * 1000
    assert st.read_bytes("f.json", 1000) == b"x" * 1000
    with pytest.raises(TraceFormatError, match="more than the limit of 999 bytes"):
        st.read_bytes("f.json", 999)


def test_sync_of_a_vanished_directory_is_a_recording_error(tmp_path: Path) -> None:
    """sync() of a directory removed since the storage was made: a RecordingError."""
    st = LocalStorage(tmp_path / "d")
    (tmp_path / "d").rmdir()
    with pytest.raises(RecordingError, match="could not sync the directory"):
        st.sync()


def _group(n: int = 3) -> list[tuple[str, list[Any], bool]]:
    """A batch's files: a blob, a batch JSON (the directory synced after it), a manifest."""
    files: list[tuple[str, list[Any], bool]] = [
        ("b.bin", [os.urandom(100_000), np.arange(7, dtype=np.float64).data], False),
        ("b.json", [b'{"episodes":', b"[]}"], True),
        ("m.manifest.json", [b"{}"], False),
    ]
    return files[:n]


def test_write_files_publishes_every_file_in_order(tmp_path: Path, impl: str, where: str) -> None:
    """Every file of a group is written, with normal bits, and published in the group's order."""
    st = LocalStorage(tmp_path)
    (tmp_path / "m.manifest.json").write_bytes(b"the old manifest")
    files, published = _group(), []  # type: ignore[var-annotated]
    _write_group(st, files, published, where)
    assert published == ["b.bin", "b.json", "m.manifest.json"]
    for name, chunks, _ in files:
        assert (tmp_path / name).read_bytes() == _joined(chunks)
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == _open_mode()
    assert not _temps(tmp_path)
    _write_group(st, _group(1), published, where)  # one file alone
    assert published == ["b.bin", "b.json", "m.manifest.json", "b.bin"]


@pytest.mark.parametrize("at", [0, 1, 2])
def test_write_files_stops_at_the_file_that_fails(
    tmp_path: Path, impl: str, where: str, at: int
) -> None:
    """The files before the failing one are published (and listed), the failing one and those
    after it are not, and no temporary file is left; the error names the failing file."""
    st = LocalStorage(tmp_path)
    files = _group()
    taken = tmp_path / files[at][0]
    taken.mkdir()
    (taken / "inside").write_bytes(b"x")  # a non-empty directory: the rename fails
    published: list[str] = []
    failing = re.escape(files[at][0])
    with pytest.raises(
        RecordingError, match=rf"'.*/{failing}'.*nothing of it was published"
    ) as info:
        _write_group(st, files, published, where)
    assert isinstance(info.value.__cause__, OSError)
    assert published == [name for name, _, _ in files[:at]]
    for name, chunks, _ in files[:at]:
        assert (tmp_path / name).read_bytes() == _joined(chunks)
    for name, _, _ in files[at + 1 :]:
        assert not (tmp_path / name).exists()
    assert not _temps(tmp_path)
    assert (taken / "inside").read_bytes() == b"x"
    (taken / "inside").unlink()
    taken.rmdir()
    _write_group(st, files[at:], published, where)  # the rest, as a retry writes it
    assert published == [name for name, _, _ in files]


def test_write_files_checks_names_before_writing(tmp_path: Path, impl: str, where: str) -> None:
    """A name that is not plain is refused before any file of the group is written."""
    published: list[str] = []
    with pytest.raises(TraceFormatError, match="plain file name"):
        _write_group(
            LocalStorage(tmp_path),
            [("ok", [b"x"], False), ("../x", [b"y"], False)],
            published,
            where,
        )
    assert published == []
    assert os.listdir(tmp_path) == []
    assert not (tmp_path.parent / "x").exists()


@requires_c
def test_start_write_rejects_what_it_cannot_write(tmp_path: Path) -> None:
    """The C start_write refuses bad arguments (TypeError/ValueError) before creating a file."""
    t = TEMP_PREFIX + "x"
    bad: list[tuple[Any, type[Exception]]] = [
        ([(t, "f", [b"a", 3], False)], TypeError),  # a chunk that is not a buffer
        ([(t, "f", 3, False)], TypeError),  # chunks not a sequence
        ([(t, "f", [b"a"])], TypeError),  # a file of three items, not four
        ([(t, "f", [b"a"], False, 0)], TypeError),  # or of five
        ([[t, "f", [b"a"], False]], TypeError),  # a file that is not a tuple
        ([(t, 3, [b"a"], False)], TypeError),  # a name that is not a path
        ([(t, "f\0", [b"a"], False)], ValueError),  # a name with a NUL byte
        (3, TypeError),  # files not a sequence
        ([], ValueError),  # no files
        ([(t + str(i), str(i), [b"a"], False) for i in range(65)], ValueError),  # too many
    ]
    for files, error in bad:
        with pytest.raises(error):
            speedups.start_write(str(tmp_path), files, 0o644)
    with pytest.raises(ValueError, match="1 to 64 files"):
        speedups.start_write(str(tmp_path), [], 0o644)
    with pytest.raises(TypeError):
        speedups.start_write(str(tmp_path), [(t, "f", [b"a"], False)], "0o644")  # mode
    with pytest.raises(TypeError):
        speedups.start_write(str(tmp_path), [(t, "f", [b"a"], False)])  # two arguments
    assert os.listdir(tmp_path) == []  # nothing was created before the arguments were checked
    task = speedups.start_write(str(tmp_path), [(t, "f", [b"a"], True)], 0o644)
    with pytest.raises(TypeError, match="must be a list"):
        task.wait(())
    published: list[str] = []
    assert task.wait(published) == 1
    assert published == ["f"]
    with pytest.raises(ValueError, match="waited for already"):
        task.wait([])
    assert os.listdir(tmp_path) == ["f"]
    assert stat.S_IMODE(os.stat(tmp_path / "f").st_mode) == 0o644 & ~_local._UMASK


def test_start_write_files_runs_on_the_extension_s_thread_or_else_a_python_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, impl: str
) -> None:
    """With C, start_write_files starts the extension's write and no Python thread (nor
    write_files); without it, a ThreadedWrite, whose Python thread runs write_files."""
    calls: list[str] = []
    real = LocalStorage.write_files

    def write_files(self: LocalStorage, files: Any, published: list[str]) -> None:
        calls.append("write_files")
        real(self, files, published)

    monkeypatch.setattr(LocalStorage, "write_files", write_files)
    if impl == "c":
        real_c = speedups.start_write

        def start_write(*args: Any) -> Any:
            calls.append("start_write")
            return real_c(*args)

        monkeypatch.setattr(LocalStorage, "_start_write_c", staticmethod(start_write))
    pending = LocalStorage(tmp_path).start_write_files(_group())
    published: list[str] = []
    pending.wait(published)
    assert published == ["b.bin", "b.json", "m.manifest.json"]
    if impl == "c":
        assert not isinstance(pending, ThreadedWrite)
        assert calls == ["start_write"]
    else:
        assert isinstance(pending, ThreadedWrite)
        assert calls == ["write_files"]


@requires_c
def test_a_write_task_dropped_unwaited_still_finishes_its_write(tmp_path: Path) -> None:
    """A C task (or the storage's pending write) dropped unwaited joins its thread first:
    the file is written whole, and the chunks' buffers are released only then."""
    data = bytearray(os.urandom(6_000_000))
    task = speedups.start_write(str(tmp_path), [(TEMP_PREFIX + "x", "f", [data], True)], 0o644)
    del task
    assert (tmp_path / "f").read_bytes() == data
    data.extend(b"x")  # no buffer of it is still exported
    st = LocalStorage(tmp_path)
    pending = st.start_write_files([("g", [data], True)])
    del pending
    assert (tmp_path / "g").read_bytes() == data
    data.extend(b"y")
    assert not _temps(tmp_path)


@requires_fork
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_temporary_names_differ_and_change_in_a_forked_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, impl: str, where: str
) -> None:
    """Each temporary file gets a new random name, and a forked child's differ from its
    parent's (two processes writing into one directory do not collide)."""
    tokens: list[str] = []
    real = _local.secrets.token_hex

    def token_hex(n: int) -> str:
        tokens.append(real(n))
        return tokens[-1]

    monkeypatch.setattr(_local.secrets, "token_hex", token_hex)
    st = LocalStorage(tmp_path)
    for i in range(100):
        _write_group(st, [(f"f{i}", [b"x"], False), (f"g{i}", [b""], False)], [], where)
    assert len(tokens) == len(set(tokens)) == 200
    assert all(re.fullmatch(r"[0-9a-f]{12}", t) for t in tokens)
    assert not _temps(tmp_path)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its write's names, to the parent (and never back into pytest)
        try:
            tokens.clear()
            _write_group(st, [("child", [b"c"], True)], [], where)
            os.write(w, ",".join(tokens).encode())
        finally:
            os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    child = os.read(r, 1000).decode().split(",")
    os.close(r)
    before = set(tokens)
    _write_group(st, [("parent", [b"p"], True)], [], where)
    assert len(child) == 1 and re.fullmatch(r"[0-9a-f]{12}", child[0])
    assert child[0] not in set(tokens)  # neither the parent's names before nor its next
    assert len(tokens) == len(before) + 1
    assert (tmp_path / "child").read_bytes() == b"c"
    assert (tmp_path / "parent").read_bytes() == b"p"


def _wait_for_child(pid: int) -> None:
    for _ in range(200):  # up to 10 s
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the forked child hung")


def _forked_verdict(wait: Any, drop: Any) -> bytes:
    """Fork; in the child, ``wait()`` (which must raise that the write is the parent's), then
    ``drop()`` (which must not join); the child's verdict."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its verdict to the parent (and never back into pytest)
        verdict = b"no error"
        try:
            try:
                wait()
            except RuntimeError as exc:
                verdict = b"forked" if "forked" in str(exc) else str(exc).encode()
            drop()  # must not join a thread this process does not have
            os.write(w, verdict)
        finally:
            os._exit(0)
    os.close(w)
    _wait_for_child(pid)
    verdict = os.read(r, 200)
    os.close(r)
    return verdict


@requires_c
@requires_fork
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_process_forked_during_a_write_cannot_wait_for_it_and_does_not_hang(
    tmp_path: Path,
) -> None:
    """The C write's thread is not in a forked child: waiting there raises at once, dropping
    the task there does not join it, and the parent's wait is unaffected."""
    data = os.urandom(8_000_000)
    tasks = [speedups.start_write(str(tmp_path), [(TEMP_PREFIX + "x", "f", [data], True)], 0o644)]
    assert _forked_verdict(lambda: tasks[0].wait([]), tasks.clear) == b"forked"
    published: list[str] = []
    assert tasks[0].wait(published) == len(data)
    assert published == ["f"]
    assert (tmp_path / "f").read_bytes() == data
    # The same through the storage (its pending write is the C task's).
    pendings = [LocalStorage(tmp_path).start_write_files([("g", [data], True)])]
    assert _forked_verdict(lambda: pendings[0].wait([]), pendings.clear) == b"forked"
    pendings[0].wait(published)
    assert published == ["f", "g"]
    assert (tmp_path / "g").read_bytes() == data
    assert not _temps(tmp_path)


_TOO_LARGE = """
import resource, signal, sys
from gym_recording import RecordingError
from gym_recording.storage.local import LocalStorage

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (5_000, resource.RLIM_INFINITY))
files = [("b.bin", [b"x" * 100], False), ("b.json", [b"{}"], True)]
files.append(("m.json", [b"y" * 9_000], False))
try:
    LocalStorage(sys.argv[1]).write_files(files, [])
except RecordingError as exc:
    print(exc)
"""


@pytest.mark.parametrize("pure", [False, True], ids=["c", "python"])
def test_a_write_that_fails_names_the_file_it_failed_on(tmp_path: Path, pure: bool) -> None:
    """A group's third file outgrows RLIMIT_FSIZE while it is written, before any rename:
    the error names that file, not the group's first."""
    if not HAVE_C and not pure:
        pytest.skip("the C extension is not built")
    env = {**os.environ, "GYM_RECORDING_PURE_PYTHON": "1" if pure else ""}
    run = subprocess.run(
        [sys.executable, "-c", _TOO_LARGE, str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    assert "m.json' (File too large)" in run.stdout, run.stdout
    assert sorted(os.listdir(tmp_path)) == []


def test_a_directory_that_cannot_be_made_is_named_with_why_and_what_to_do(tmp_path: Path) -> None:
    """A recording directory makedirs refuses (a name too long here; a parent one may not
    write to, a read-only disk) says why in words and what to do; it said OSError's repr
    ("[Errno 36] File name too long: '...'") and nothing more."""
    where = tmp_path / ("x" * 300)
    with pytest.raises(RecordingError) as got:
        gym_recording.TraceRecording(where)
    assert str(got.value) == (
        f"cannot create the recording directory {str(where)!r}: File name too long; give a "
        "directory you may write to"
    )
