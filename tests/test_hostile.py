"""Hostile and damaged recordings are refused with TraceFormatError, and nothing outside is read.

Every folder of ``tests/hostile`` (see its README) must be refused by ``gym_recording.load``
when every episode is read, by ``scan_recorded_traces``, and flagged by ``verify``; the error
names a file of the recording. An audit hook records every file the reader opens or maps, and
none may lie outside the recording's directory. Cases git cannot hold (a FIFO, sparse files of
hundreds of megabytes) are made here from the valid base recording.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import gym_recording
from gym_recording import TraceFormatError, scan_recorded_traces
from gym_recording.format.limits import MAX_BATCH_JSON_BYTES, MAX_MANIFEST_BYTES
from gym_recording.tools.verify import verify

HOSTILE = Path(__file__).resolve().parent / "hostile"
sys.path.insert(0, str(HOSTILE))
import make_cases  # noqa: E402

CASES = sorted(
    p.name for p in HOSTILE.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))
)

# ---------------------------------------------------------------------------- audit of opens

_opened: list[str] | None = None
_opened_lock = threading.Lock()


def _audit(event: str, args: tuple[object, ...]) -> None:
    if _opened is None or event != "open":
        return
    path = args[0]
    if isinstance(path, (str, bytes, os.PathLike)):
        with _opened_lock:
            if _opened is not None:
                _opened.append(os.fsdecode(path))


sys.addaudithook(_audit)


@contextmanager
def opened_files() -> Iterator[list[str]]:
    """Collect the paths opened (``open``/``os.open``) inside the block."""
    global _opened
    seen: list[str] = []
    _opened = seen
    try:
        yield seen
    finally:
        _opened = None


def assert_inside(paths: list[str], directory: Path) -> None:
    """Every path opened names an entry of ``directory`` (opened without following links)."""
    root = os.path.abspath(directory)
    for p in paths:
        if p.endswith(".py") or "site-packages" in p or p.startswith(sys.prefix):
            continue  # a lazy import of the library itself
        path = os.path.normpath(os.path.join(root, p))
        assert path == root or os.path.dirname(path) == root, f"opened {p!r} outside {root}"


# ---------------------------------------------------------------------------- the three readers


def read_everything(directory: Path) -> int:
    with gym_recording.load(directory) as rec:
        n = 0
        for ep in rec:
            assert ep.length >= 0
            n += 1
        return n


def assert_refused(directory: Path) -> None:
    """load() and scan_recorded_traces raise TraceFormatError naming a file of ``directory``,
    read nothing outside it, and verify flags it."""
    root = os.path.abspath(directory)
    with opened_files() as seen, pytest.raises(TraceFormatError) as info:
        read_everything(directory)
    assert_inside(seen, directory)
    where = info.value.path
    assert where is not None
    assert root in (os.path.abspath(where), os.path.dirname(os.path.abspath(where))), where
    assert where in str(info.value)

    with opened_files() as seen, pytest.raises(TraceFormatError):
        scan_recorded_traces(directory, lambda o, a, r: None)
    assert_inside(seen, directory)

    with opened_files() as seen:
        report = verify(directory)
    assert_inside(seen, directory)
    assert not report.ok, report.lines()
    for path in report.problems:
        assert os.path.abspath(path).startswith(root), path


def test_the_base_recording_is_valid(tmp_path):
    """The recording every case starts from reads, scans and verifies cleanly."""
    for name, data in make_cases.base_files().items():
        (tmp_path / name).write_bytes(data)
    assert read_everything(tmp_path) == 2
    scan_recorded_traces(tmp_path, lambda o, a, r: None)
    assert verify(tmp_path).ok
    split = tmp_path / "split"
    make_cases.base_split().write(split)
    assert read_everything(split) == 2
    assert verify(split).ok, verify(split).lines()
    assert read_everything(HOSTILE / "_outside") == 2


@pytest.mark.parametrize("case", CASES)
def test_hostile_case_is_refused(case):
    """Each hand-made hostile recording is refused by load, scan and verify."""
    assert_refused(HOSTILE / case)


def test_readme_describes_every_case():
    """The README has one line per case folder, and make_cases.py knows them all."""
    readme = (HOSTILE / "README.md").read_text()
    listed = {line.split("`")[1] for line in readme.splitlines() if line.startswith("- `")}
    assert listed == set(CASES) == set(make_cases.CASES)
    assert len(CASES) >= 100


def test_committed_cases_match_their_recipe(tmp_path):
    """make_cases.py reproduces the committed folders byte for byte."""
    make_cases.build_all(tmp_path)
    for case in [*CASES, "_outside"]:
        mine, theirs = HOSTILE / case, tmp_path / case
        names = sorted(os.listdir(theirs))
        assert sorted(os.listdir(mine)) == names, case
        for name in names:
            a, b = mine / name, theirs / name
            if b.is_symlink():
                assert os.readlink(a) == os.readlink(b)
            elif b.is_dir():
                assert a.is_dir()
            else:
                assert a.read_bytes() == b.read_bytes(), f"{case}/{name}"


# ---------------------------------------------------------------------------- made at test time


def _base(directory: Path) -> None:
    directory.mkdir(exist_ok=True)
    for name, data in make_cases.base_files().items():
        (directory / name).write_bytes(data)


def test_fifo_blob_does_not_hang(tmp_path):
    """A FIFO where the blob should be is refused at once (opening it must not block)."""
    _base(tmp_path)
    os.unlink(tmp_path / make_cases.BIN0)
    os.mkfifo(tmp_path / make_cases.BIN0)
    assert_refused(tmp_path)


def test_fifo_manifest_does_not_hang(tmp_path):
    """A FIFO named like a manifest is refused at once."""
    _base(tmp_path)
    os.mkfifo(tmp_path / "openaigym.trace.7.7.manifest.json")
    assert_refused(tmp_path)


def test_huge_manifest_is_refused_unread(tmp_path):
    """A manifest larger than the limit is refused before it is read (a sparse file here)."""
    _base(tmp_path)
    with open(tmp_path / make_cases.MANIFEST, "r+b") as f:
        f.truncate(MAX_MANIFEST_BYTES + 1)
    assert_refused(tmp_path)


def test_huge_batch_is_refused_unread(tmp_path):
    """A batch JSON larger than the limit is refused before it is read (a sparse file here)."""
    _base(tmp_path)
    with open(tmp_path / make_cases.BATCH0, "r+b") as f:
        f.truncate(MAX_BATCH_JSON_BYTES + 1)
    assert_refused(tmp_path)


def test_symlink_to_dev_zero_is_not_mapped(tmp_path):
    """A blob that is a symbolic link to /dev/zero is refused, never mapped."""
    _base(tmp_path)
    os.unlink(tmp_path / make_cases.BIN0)
    os.symlink("/dev/zero", tmp_path / make_cases.BIN0)
    assert_refused(tmp_path)


def test_symlink_inside_is_refused_too(tmp_path):
    """Readers never follow symbolic links, even ones that stay inside the directory."""
    _base(tmp_path)
    os.rename(tmp_path / make_cases.BATCH0, tmp_path / "real.json")
    os.symlink("real.json", tmp_path / make_cases.BATCH0)
    assert_refused(tmp_path)


def test_hostile_directory_symlinked_in_is_refused(tmp_path):
    """A subdirectory named like the batch, holding the batch, is not entered."""
    _base(tmp_path)
    data = (tmp_path / make_cases.BATCH0).read_bytes()
    os.unlink(tmp_path / make_cases.BATCH0)
    (tmp_path / make_cases.BATCH0).mkdir()
    (tmp_path / make_cases.BATCH0 / make_cases.BATCH0).write_bytes(data)
    assert_refused(tmp_path)
