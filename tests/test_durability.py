"""The order of a recording's fsyncs and renames, seen at the system-call level (strace).

FORMAT.md §2: the blob and the batch JSON are synced to disk, renamed, and their renames made
durable (one fsync of the directory) before the manifest that names them is renamed into
place; the manifest's own rename is made durable by the next batch's directory fsync, or at
``save_complete``/``close``. Both implementations of LocalStorage's group write are traced:
the C extension's ``start_write`` (every batch written on a thread of the extension's, which
``strace -f`` shows as other threads, whether the recording waits for it or not) and the
Python one (in the recording's thread, or a Python thread in the background). Needs
``strace`` (CI installs it); a killed process's view of the files is tested by
tests/test_crash.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gym_recording import _accel
from gym_recording.format.names import TEMP_PREFIX

RECORD = """
import sys
import numpy as np
from gym_recording import TraceRecording

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
    """Run ``script`` (with ``d`` as its argument) in a child under strace, with the C
    extension or without it (GYM_RECORDING_PURE_PYTHON); its standard output and strace's
    log."""
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace is not installed (apt-get install strace)")
    if not pure_python and getattr(_accel.speedups, "start_write", None) is None:
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


# Where the batches are written, as the child sees it: the writer's rule (FOREGROUND_WRITE_SHARE
# and FOREGROUND_PROBE_EVERY) set; each group written in the main thread (write_files) or
# started in the background (start_write_files, and what kind of write it returned); each C
# write started (start_write); and the threads that ran Python's write_files. Printed at exit
# as JSON.
WHERE = """
import atexit, json, os, threading
from gym_recording.record import writer
from gym_recording.storage import LocalStorage

writer.FOREGROUND_WRITE_SHARE = float({share!r})
writer.FOREGROUND_PROBE_EVERY = {probe}
seen = {{"pid": os.getpid(), "foreground": 0, "background": [], "c_writes": 0, "py_threads": []}}
real_write = LocalStorage.write_files
real_start = LocalStorage.start_write_files
real_c = LocalStorage._start_write_c


def write_files(self, files, published):
    if threading.current_thread() is threading.main_thread():
        seen["foreground"] += 1
    seen["py_threads"].append(threading.get_native_id())
    return real_write(self, files, published)


def start_write_files(self, files):
    pending = real_start(self, files)
    seen["background"].append(type(pending).__name__)
    return pending


def start_write_c(directory, files, mode):
    seen["c_writes"] += 1
    return real_c(directory, files, mode)


LocalStorage.write_files = write_files
LocalStorage.start_write_files = start_write_files
if real_c is not None:
    LocalStorage._start_write_c = staticmethod(start_write_c)
atexit.register(lambda: print("WHERE", json.dumps(seen)))
"""

#: The writer's rule for each case: ``(FOREGROUND_WRITE_SHARE, FOREGROUND_PROBE_EVERY)``.
RULES = {
    "foreground": (float("inf"), 32),  # every batch written in the recording's thread
    "background": (0.0, 10_000),  # all but the first (whose cost is not known yet)
    "alternating": (0.0, 2),  # two in the background, then one in the foreground to measure
}


def _trace(
    tmp_path: Path, pure_python: bool, rule: str
) -> tuple[Path, list[tuple[str, str]], dict, set[str], int]:
    """Record in a child process under strace: the recording dir; its fsyncs and renames in
    it; where the child says its batches went; the threads that renamed files; and how many
    renames the main thread made."""
    d = tmp_path / "traces"
    traced = "trace=fsync,fdatasync,rename,renameat,renameat2"
    share, probe = RULES[rule]
    script = WHERE.format(share=str(share), probe=probe) + RECORD
    out, log = _strace(tmp_path, pure_python, script, d, "-e", traced)
    seen = json.loads(out.split("WHERE", 1)[1])
    main = str(seen["pid"])
    events: list[tuple[str, str]] = []
    renamers: set[str] = set()
    main_renames = 0
    for line in log.splitlines():
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
                tid = line.split()[0]
                renamers.add(tid)
                main_renames += tid == main
    return d, events, seen, renamers - {main}, main_renames


@pytest.mark.parametrize("rule", list(RULES))
@pytest.mark.parametrize("pure_python", [False, True], ids=["c", "python"])
def test_each_batch_is_durable_before_its_manifest_and_the_last_manifest_at_close(
    tmp_path: Path, pure_python: bool, rule: str
) -> None:
    """Each batch's blob and JSON are fsynced, renamed and their renames made durable before
    its manifest is renamed; the last manifest's rename is durable when save_complete returns;
    and the batches were written where the writer's rule and the implementation say."""
    d, events, seen, renamers, main_renames = _trace(tmp_path, pure_python, rule)
    renames = [e[1].split() for e in events if e[0] == "rename"]
    manifests = [dst for _, dst in renames if dst.endswith(".manifest.json")]
    batches = [dst for _, dst in renames if dst.endswith(".json") and dst not in manifests]
    assert len(batches) >= 3, events  # several batches were written
    assert len(manifests) == len(batches)  # one manifest update per batch
    assert sorted(os.listdir(d)) == sorted({dst for _, dst in renames})  # no leftovers
    # Each batch's files are renamed in FORMAT.md's order: blob, batch JSON, manifest.
    kinds = [
        "manifest" if dst.endswith(".manifest.json") else dst.rsplit(".", 1)[1]
        for _, dst in renames
    ]
    assert kinds == ["bin", "json", "manifest"] * len(batches), kinds

    # Where the batches were written: in the foreground (write_files in the main thread) or
    # in the background (start_write_files), as the rule says.
    background, foreground = seen["background"], seen["foreground"]
    assert foreground + len(background) == len(batches), seen
    if rule == "foreground":
        assert background == [], seen
    elif rule == "background":
        assert foreground == 1, seen  # the first, which measures what a write costs
    else:
        assert foreground >= 2 and len(background) >= 2, seen
    if pure_python:
        # The Python group write: in the main thread, or in a Python thread of its own.
        assert seen["c_writes"] == 0, seen
        assert set(background) <= {"ThreadedWrite"}, seen
        assert main_renames == 3 * foreground
        assert len(renamers) >= min(len(background), 2), renamers
        assert renamers <= {str(t) for t in seen["py_threads"]}, (renamers, seen)
    else:
        # Every batch on a thread of the C extension's (never the main thread, nor a Python
        # thread): the foreground waits for it at once, the background at the next batch.
        assert seen["c_writes"] == len(batches), seen
        assert set(background) <= {"_CWrite"}, seen
        assert main_renames == 0
        assert len(renamers) >= 2, renamers
        assert not renamers & {str(t) for t in seen["py_threads"]}, (renamers, seen)

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
from gym_recording.storage import LocalStorage

d = sys.argv[1]
files = [("b.bin", [b"blob"], False), ("b.json", [b"{{}}"], True), ("m.json", [b"[]"], False)]
published = []
try:
    if {background}:
        LocalStorage(d).start_write_files(files).wait(published)
    else:
        LocalStorage(d).write_files(files, published)
except RecordingError as exc:
    print("ERROR", exc)
print("PUBLISHED", published)
print("FILES", sorted(os.listdir(d)))
"""


@pytest.mark.parametrize("background", [False, True], ids=["foreground", "background"])
@pytest.mark.parametrize("pure_python", [False, True], ids=["c", "python"])
def test_a_failed_directory_fsync_is_told_apart_from_a_failed_write(
    tmp_path: Path, pure_python: bool, background: bool
) -> None:
    """The directory's fsync after a rename fails (EIO, injected by strace): the error says
    the file is visible but not durable, it is not counted as published, and the files after
    it are not written."""
    d = tmp_path / "traces"
    d.mkdir()
    # Both implementations fsync the three files, then the directory after b.json's rename.
    inject = "inject=fsync:error=EIO:when=4"
    script = FAIL_DIRECTORY_SYNC.format(background=background)
    out, log = _strace(tmp_path, pure_python, script, d, "-e", "trace=fsync", "-e", inject)
    injected = [line for line in log.splitlines() if "INJECTED" in line]
    assert len(injected) == 1 and f"<{d}>" in injected[0], injected  # the directory's fsync
    assert f"ERROR '{d / 'b.json'}' was renamed into place, but the fsync of its directory" in out
    assert "(Input/output error): the file is visible, but may not survive a power loss" in out
    assert "PUBLISHED ['b.bin']" in out
    assert "FILES ['b.bin', 'b.json']" in out  # no m.json, and no temporary file left
