"""The order of a recording's fsyncs and renames, seen at the system-call level (strace).

FORMAT.md §2: the blob and the batch JSON are synced to disk, renamed, and their renames made
durable (one fsync of the directory) before the manifest that names them is renamed into
place; the manifest's own rename is made durable by the next batch's directory fsync, or at
``save_complete``/``close``. Both write paths (the C ``write_files`` and atomicwrites) are
traced. Needs ``strace`` (CI installs it); a killed process's view of the files is tested by
tests/test_crash.py.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gym_recording import _cext
from gym_recording._storage import TEMP_PREFIX

RECORD = """
import sys
import numpy as np
from gym_recording.recording import TraceRecording

rec = TraceRecording(sys.argv[1], batch_bytes=2000)
for e in range(12):
    rec.add_reset(np.full(4, e, np.float32), seed=e)
    for t in range(20):
        rec.add_step(t % 2, np.full(4, t, np.float32), 1.0, terminated=t == 19)
rec.end_episode()
rec.save_complete()  # the last batch, and the directory synced
rec.save_complete()  # nothing new: no write, no sync
rec.close()  # likewise
"""

# fsync(3</path/to/file>) = 0 ; renameat(AT_FDCWD</x>, "/d/a", AT_FDCWD</x>, "/d/b") = 0
_SYNC = re.compile(r"^(?:\d+ +)?f(?:data)?sync\(\d+<(?P<path>[^>]*)>\) += 0")
_RENAME = re.compile(r"^(?:\d+ +)?rename(?:at2?)?\((?P<args>.*)\) += 0")
_STR = re.compile(r'"((?:[^"\\]|\\.)*)"')


def _strace(
    tmp_path: Path, pure_python: bool, script: str, d: Path, *strace_args: str
) -> tuple[str, str]:
    """Run ``script`` (with ``d`` as its argument) in a child under strace, on the C write path
    or the atomicwrites one; its standard output and strace's log."""
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace is not installed (apt-get install strace)")
    if not pure_python and getattr(_cext.speedups, "write_files", None) is None:
        pytest.skip("gym_recording._speedups is not built (or GYM_RECORDING_PURE_PYTHON is set)")
    log = tmp_path / "strace.log"
    env = dict(os.environ)
    env.pop("GYM_RECORDING_PURE_PYTHON", None)
    if pure_python:
        env["GYM_RECORDING_PURE_PYTHON"] = "1"
    cmd = [strace, "-f", "-qq", "-y", *strace_args, "-o", str(log)]
    cmd += [sys.executable, "-c", script, str(d)]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    if run.returncode != 0 and "ptrace" in run.stderr:
        pytest.skip(f"strace cannot trace here: {run.stderr.strip()[:200]}")
    assert run.returncode == 0, run.stderr
    return run.stdout, log.read_text()


# Where the batches are written: by the thread recording, or (each after the first) in the
# background, on the C path on the extension's own thread (_speedups.start_write_files); the
# child prints how many writes went to such a thread.
WHERE = """
import atexit
import gym_recording.recording as R
from gym_recording._storage import LocalStorage

R.FOREGROUND_WRITE_SHARE = {}
started = []
real_start = LocalStorage.start_write_files


def start_write_files(self, files):
    pending = real_start(self, files)
    started.append(pending is not None)
    return pending


LocalStorage.start_write_files = start_write_files
atexit.register(lambda: print("C THREADS", sum(started)))
"""


def _trace(
    tmp_path: Path, pure_python: bool, background: bool = False
) -> tuple[Path, list[tuple[str, str]], set[str]]:
    """Record in a child process under strace; its fsyncs and renames in the recording dir,
    and the threads (other than the main one) that renamed files."""
    d = tmp_path / "traces"
    traced = "trace=fsync,fdatasync,rename,renameat,renameat2"
    script = WHERE.format(0.0 if background else 1e9) + RECORD
    out, log = _strace(tmp_path, pure_python, script, d, "-e", traced)
    c_threads = int(out.split("C THREADS")[1])
    assert c_threads >= 2 if background and not pure_python else c_threads == 0, out
    events: list[tuple[str, str]] = []
    lines = log.splitlines()
    main = lines[0].split()[0] if lines else ""
    renamers: set[str] = set()
    for line in lines:
        if m := _SYNC.match(line):
            path = m["path"]
            if path == str(d):
                events.append(("dirsync", ""))
            elif os.path.dirname(path) == str(d):
                events.append(("filesync", os.path.basename(path)))
        elif m := _RENAME.match(line):
            names = [os.path.basename(s) for s in _STR.findall(m["args"])]
            if len(names) == 2 and names[0].startswith(TEMP_PREFIX):
                events.append(("rename", f"{names[0]} {names[1]}"))
                if line.split()[0] != main:
                    renamers.add(line.split()[0])
    return d, events, renamers


@pytest.mark.parametrize(
    ("pure_python", "background"),
    [(False, False), (False, True), (True, False), (True, True)],
    ids=["c-write-files", "c-write-thread", "atomicwrites", "atomicwrites-thread"],
)
def test_each_batch_is_durable_before_its_manifest_and_the_last_manifest_at_close(
    tmp_path: Path, pure_python: bool, background: bool
) -> None:
    d, events, renamers = _trace(tmp_path, pure_python, background)
    # In the background, batches are renamed by threads other than the main one (on the C
    # path one started per batch by start_write_files; else a Python thread per batch).
    assert len(renamers) >= (2 if background else 0), renamers
    assert background or not renamers
    renames = [e[1].split() for e in events if e[0] == "rename"]
    manifests = [dst for _, dst in renames if dst.endswith(".manifest.json")]
    batches = [dst for _, dst in renames if dst.endswith(".json") and dst not in manifests]
    assert len(batches) >= 3, events  # several batches were written
    assert len(manifests) == len(batches)  # one manifest update per batch
    assert sorted(os.listdir(d)) == sorted({dst for _, dst in renames})  # no leftovers

    synced: set[str] = set()  # temporary files fsynced so far
    pending: list[str] = []  # renames not yet made durable by a directory fsync
    for kind, arg in events:
        if kind == "filesync":
            synced.add(arg)
        elif kind == "dirsync":
            pending.clear()
        else:
            tmp, dst = arg.split()
            assert tmp in synced, f"{dst} was renamed before its data was fsynced"
            if dst.endswith(".manifest.json"):
                assert pending == [], f"{dst} names files whose renames are not durable: {pending}"
            pending.append(dst)
    assert pending == [], "save_complete() returned with renames not made durable"
    # One directory fsync per batch (after its JSON), and one by the first save_complete: not
    # one per file, and none when nothing new was written.
    assert sum(kind == "dirsync" for kind, _ in events) == len(batches) + 1
    assert events[-1] == ("dirsync", "")


FAIL_DIRECTORY_SYNC = """
import os, sys
from gym_recording._errors import RecordingError
from gym_recording._storage import LocalStorage

d = sys.argv[1]
published = []
try:
    LocalStorage(d).write_files(
        [("b.bin", [b"blob"], False), ("b.json", [b"{}"], True), ("m.json", [b"[]"], False)],
        published,
    )
except RecordingError as exc:
    print("ERROR", exc)
print("PUBLISHED", published)
print("FILES", sorted(os.listdir(d)))
"""


@pytest.mark.parametrize(
    ("pure_python", "nth_fsync"),
    # The C path fsyncs the three files, then the directory after b.json's rename; the
    # atomicwrites path fsyncs b.bin, b.json, then the directory.
    [(False, 4), (True, 3)],
    ids=["c-write-files", "atomicwrites"],
)
def test_a_failed_directory_fsync_is_told_apart_from_a_failed_write(
    tmp_path: Path, pure_python: bool, nth_fsync: int
) -> None:
    """The directory's fsync after a rename fails (EIO, injected by strace): the error says
    the file is visible but not durable, it is not counted as published, and the files after
    it are not written."""
    d = tmp_path / "traces"
    d.mkdir()
    inject = f"inject=fsync:error=EIO:when={nth_fsync}"
    out, log = _strace(
        tmp_path, pure_python, FAIL_DIRECTORY_SYNC, d, "-e", "trace=fsync", "-e", inject
    )
    injected = [line for line in log.splitlines() if "INJECTED" in line]
    assert len(injected) == 1 and f"<{d}>" in injected[0], injected  # the directory's fsync
    assert f"ERROR '{d / 'b.json'}' was renamed into place, but the fsync of its directory" in out
    assert "(Input/output error): the file is visible, but may not survive a power loss" in out
    assert "PUBLISHED ['b.bin']" in out
    assert "FILES ['b.bin', 'b.json']" in out  # no m.json, and no temporary file left
