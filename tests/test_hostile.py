"""Hostile and damaged recordings are refused with TraceFormatError, and nothing outside is read.

Every folder of ``tests/hostile`` (see its README) must be refused by ``gym_recording.load``
when every episode is read, by ``scan_recorded_traces``, and flagged by ``verify``; the error
names a file of the recording. An audit hook records every file the reader opens or maps, and
none may lie outside the recording's directory. Cases git cannot hold (a FIFO, sparse files of
hundreds of megabytes) are made here from the valid base recording.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces

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


def test_refusing_a_file_that_is_a_directory_leaves_no_descriptor_open() -> None:
    """A batch or blob that is a directory is refused, and its descriptor closed (one leaked
    per refused read, as fdopen refused the directory after it was opened)."""
    fds = Path("/proc/self/fd")
    for case in ("batch-is-directory", "blob-is-directory"):
        before = len(list(fds.iterdir()))
        for _ in range(20):
            with pytest.raises(TraceFormatError):
                list(gym_recording.load(HOSTILE / case))
        assert len(list(fds.iterdir())) <= before, case


def test_a_read_interrupted_as_a_file_is_checked_leaves_no_descriptor_open(
    tmp_path: Path,
) -> None:
    """A Ctrl-C (simulated) at each call the storage makes on a file it opened, before it
    hands it out (its fstat, its check, its file object), as ``load`` reads a recording: the
    descriptor opened is closed."""
    _base(tmp_path)
    fds = Path("/proc/self/fd")
    calls = ("os.fstat(", "S_ISREG(", "os.fdopen(")
    for k in range(1, 4):
        seen = 0

        def tracer(frame: Any, event: str, arg: Any, k: int = k) -> Any:
            code = frame.f_code
            if event != "call" or code.co_name != "_open" or "storage" not in code.co_filename:
                return None
            lines = Path(code.co_filename).read_text().splitlines()

            def line(frame: Any, event: str, arg: Any) -> Any:
                nonlocal seen
                if event == "line" and any(c in lines[frame.f_lineno - 1] for c in calls):
                    seen += 1
                    if seen == k:
                        sys.settrace(None)
                        frame.f_trace = None
                        raise KeyboardInterrupt
                return line

            return line

        before = len(list(fds.iterdir()))
        sys.settrace(tracer)
        try:
            with gym_recording.load(tmp_path) as rec:
                list(rec)
        except KeyboardInterrupt:
            pass
        finally:
            sys.settrace(None)
        assert seen == k
        assert len(list(fds.iterdir())) <= before, f"interrupted at the call {k} of {calls}"


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


# ---------------------------------------------------------------------------- bounded memory

# Each runs in a child process under an address-space limit (RLIMIT_AS): a reader that tried
# to build what the file describes would die with MemoryError there.
_LIMIT = 1536 << 20


def _limited(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    preamble = (
        "import resource, sys\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({_LIMIT}, {_LIMIT}))\n"
        "import gym_recording\n"
        "from gym_recording import TraceFormatError\n"
        "from gym_recording.tools.verify import verify\n"
    )
    return subprocess.run(
        [sys.executable, "-c", preamble + code, *args], capture_output=True, text=True, timeout=300
    )


_READ_ALL = """
d = sys.argv[1]
try:
    for ep in gym_recording.load(d):
        pass
except TraceFormatError as exc:
    print("refused:", exc)
report = verify(d)
print("verify ok" if report.ok else "verify flags it")
"""


def _bomb(directory: Path, payload: bytes, key: str = "options") -> None:
    """The base recording with ``payload`` (raw JSON) as episode 0's ``key`` (or beside the
    episodes, for ``key="junk"``), the manifest's sizes matching."""
    rec = make_cases.base()
    batch = rec.json.pop(make_cases.BATCH0)
    if key == "junk":
        batch["junk"] = "BOMB"
    else:
        batch["episodes"][0][key] = "BOMB"
    data = make_cases.dumps(batch).replace(b'"BOMB"', payload, 1)
    rec.raw[make_cases.BATCH0] = data
    rec.json[make_cases.MANIFEST]["batches"][0]["bytes"] = len(data) + len(rec.raw[make_cases.BIN0])
    rec.write(directory)


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS is Linux's")
@pytest.mark.parametrize("key", ["options", "junk"])
def test_a_json_bomb_within_the_size_limit_is_refused_in_bounded_memory(
    tmp_path: Path, key: str
) -> None:
    """100 MB of batch JSON holding 33 M empty lists (4.6 GB once parsed), under a key the
    reader uses or not: refused before it is parsed."""
    n = 33_000_000
    _bomb(tmp_path / "rec", b"[" + b"[]," * n + b"[]]", key)
    got = _limited(_READ_ALL, str(tmp_path / "rec"))
    assert got.returncode == 0, got.stderr[-2000:]
    assert "refused:" in got.stdout and "memory to parse" in got.stdout
    assert "verify flags it" in got.stdout
    assert "MemoryError" not in got.stderr


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS is Linux's")
@pytest.mark.parametrize("compressed", [False, True])
def test_arrays_sharing_bytes_are_refused_before_they_are_copied(
    tmp_path: Path, compressed: bool
) -> None:
    """4097 per-step references to the same 1 MiB of a blob (raw, or one zstd frame):
    stacking them, or decompressing each, would take 4 GiB from a 1.4 MB recording. The
    second reference is refused as it is read."""
    rec = make_cases.base()
    if compressed:
        raw = bytes(1 << 20)
        r = make_cases.zstd_ref(rec, raw=raw, shape=[1 << 18], dtype="float32", rawsize=len(raw))
    else:
        blob = make_cases.Blob(make_cases.BIN0)
        blob.data = bytearray(rec.raw[make_cases.BIN0])
        r = blob.add(np.zeros(1 << 18, np.float32))
        rec.raw[make_cases.BIN0] = bytes(blob.data)
    episode = make_cases.ep(rec)
    episode["observations"] = [dict(r) for _ in range(4097)]
    episode["actions"], episode["rewards"] = [0] * 4096, [0.0] * 4096
    rec.finish_entries()
    rec.write(tmp_path / "rec")
    got = _limited(_READ_ALL, str(tmp_path / "rec"))
    assert got.returncode == 0, got.stderr[-2000:]
    assert "refused:" in got.stdout and "share bytes" in got.stdout
    assert "verify flags it" in got.stdout


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS is Linux's")
@pytest.mark.parametrize(
    ("shape", "problem"),
    [
        ([16384, 16384], "MiB of memory"),
        ([2**31, 2**31], "MiB of memory"),
        ([0, 2**62], "a shape of at most 2**63 - 1 bytes"),  # (numpy: "array is too big")
    ],
)
def test_a_space_bomb_is_refused_by_every_reader(
    tmp_path: Path, shape: list[int], problem: str
) -> None:
    """A manifest declaring a Box that would take gigabytes (scalar bounds: a small file), or
    more than an array can: ``observation_space``, ``verify`` and the command line refuse
    it, naming the manifest."""
    rec = make_cases.base()
    rec.json[make_cases.MANIFEST]["observation_space"] = {
        "type": "Box",
        "shape": shape,
        "dtype": "float32",
        "low": 0,
        "high": 1,
    }
    rec.write(tmp_path / "rec")
    code = """
rec = gym_recording.load(sys.argv[1])
print(len(list(rec)), "episodes read")
try:
    rec.observation_space
except TraceFormatError as exc:
    print("refused:", exc)
print("verify ok" if verify(sys.argv[1]).ok else "verify flags it")
"""
    got = _limited(code, str(tmp_path / "rec"))
    assert got.returncode == 0, got.stderr[-2000:]
    assert "2 episodes read" in got.stdout
    assert "refused:" in got.stdout and make_cases.MANIFEST in got.stdout
    assert "verify flags it" in got.stdout
    assert problem in got.stdout
    for command in ("info", "verify"):
        assert problem in _cli_refuses(command, tmp_path / "rec")


def _cli_refuses(command: str, directory: Path) -> str:
    """``gym-recording command directory`` exits 1 without a traceback; its output."""
    cli = subprocess.run(
        [sys.executable, "-m", "gym_recording", command, str(directory)],
        capture_output=True,
        text=True,
    )
    assert cli.returncode == 1, (command, cli.stdout, cli.stderr)
    assert "Traceback" not in cli.stderr
    return cli.stdout + cli.stderr


def test_odd_text_in_a_manifest_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    """An env id of a lone surrogate (a JSON escape UTF-8 cannot hold) is refused cleanly."""
    rec = make_cases.base()
    rec.json[make_cases.MANIFEST]["env_id"] = "SURROGATE"
    data = make_cases.dumps(rec.json.pop(make_cases.MANIFEST))
    rec.raw[make_cases.MANIFEST] = data.replace(b"SURROGATE", b"\\ud800")
    rec.write(tmp_path / "rec")
    for command in ("info", "verify"):
        assert make_cases.MANIFEST in _cli_refuses(command, tmp_path / "rec")


def test_verify_reports_each_of_many_problems(tmp_path: Path) -> None:
    """40,000 manifest entries whose batches are missing: 40,000 problems, each reported once
    (the report keeps them in a set: this took 11 s when it scanned a list)."""
    n = 40_000
    prefix = make_cases.PREFIX
    entries = [
        {"first": i, "len": 1, "fn": f"{prefix}.ep{i:09d}.json", "bin": f"{prefix}.ep{i:09d}.bin"}
        for i in range(n)
    ]
    manifest = make_cases._manifest(entries)
    (tmp_path / make_cases.MANIFEST).write_bytes(make_cases.dumps(manifest))
    report = verify(tmp_path)
    assert not report.ok
    assert len(report.problems) == n


def test_mmap_false_survives_a_blob_cut_under_its_arrays(tmp_path: Path) -> None:
    """Read without mapping, arrays stay valid when another program truncates the blob (a
    mapped array would kill the process with SIGBUS)."""
    _base(tmp_path)
    with gym_recording.load(tmp_path, mmap=False) as rec:
        eps = list(rec)
    want = [ep.observations.tolist() for ep in eps]
    with open(tmp_path / make_cases.BIN0, "r+b") as f:
        f.truncate(0)
    assert [ep.observations.tolist() for ep in eps] == want


def _first_batch(d: Path) -> Path:
    return next(p for p in d.glob("*.ep*.json"))


def test_rules_of_format_md_a_reader_must_hold(tmp_path: Path) -> None:
    """Breaking each is a TraceFormatError naming it, from load() and verify: a non-empty
    array's npyoff not a multiple of 8 (§6.1; it was read, misaligned), a version 2 manifest
    without format "gym-recording" (§3), and a Dict observation whose leaves hold different
    numbers of steps (said so, not "got None observations")."""
    space = spaces.Dict({"a": spaces.Box(0, 1, (2,)), "t": spaces.Discrete(3)})

    def misaligned(d: Path) -> None:
        batch = _first_batch(d)
        doc = json.loads(batch.read_text())
        doc["episodes"][0]["rewards"]["npyoff"] += 4  # (the last array: within the blob,
        batch.write_text(json.dumps(doc))  # once it is 8 bytes longer, and apart)
        with open(batch.with_suffix(".bin"), "ab") as blob:
            blob.write(bytes(8))

    def no_format(d: Path) -> None:
        manifest = next(d.glob("*.manifest.json"))
        doc = json.loads(manifest.read_text())
        del doc["format"]
        manifest.write_text(json.dumps(doc))

    def leaves_disagree(d: Path) -> None:
        batch = _first_batch(d)
        doc = json.loads(batch.read_text())
        leaf = doc["episodes"][0]["observations"]["fields"]["t"]
        leaf["shape"][0] -= 1
        leaf["size"] -= np.dtype(leaf["dtype"]).itemsize
        batch.write_text(json.dumps(doc))

    cases: dict[str, Callable[[Path], None]] = {
        "npyoff 4 of a non-empty array is not a multiple of 8": misaligned,
        'expected format "gym-recording" beside format_version 2.3, got no format': no_format,
        "expected the leaves of observations to hold one number of steps": leaves_disagree,
    }
    for k, (says, damage) in enumerate(cases.items()):
        d = tmp_path / str(k)
        with gym_recording.TraceRecording(d, observation_space=space) as rec:
            rec.add_reset({"a": np.zeros(2, np.float32), "t": 0})
            rec.add_step(0, {"a": np.ones(2, np.float32), "t": 1}, 1.0, terminated=True)
        damage(d)
        manifest = next(d.glob("*.manifest.json"))  # (the batch's bytes as they are now)
        doc = json.loads(manifest.read_text())
        batch = _first_batch(d)
        doc["batches"][0]["bytes"] = sum(
            p.stat().st_size for p in (batch, batch.with_suffix(".bin"))
        )
        manifest.write_text(json.dumps(doc))
        match = re.escape(says).replace("4", r"\d+")
        with pytest.raises(TraceFormatError, match=match), gym_recording.load(d) as r:
            list(r)
        report = verify(d)
        assert not report.ok and says.split(" of ")[0] in str(report.problems), says


def test_a_manifest_version_or_name_of_another_kind_is_said_as_it_is(tmp_path: Path) -> None:
    """A format_version that is a JSON number was said as the string the message asked for
    ("got '2.3'"), and a missing format as the string 'none'; a lone surrogate's escape, which
    §2 lets readers refuse, as "input data was truncated"."""
    for k, (doc, says) in enumerate(
        (
            ({"format": "gym-recording", "format_version": 2.3}, 'like "2.0", got 2.3'),
            ({"format": "none", "format_version": "2.3"}, 'got "none"'),
            ({"format": None, "format_version": "2.3"}, "got null"),
        )
    ):
        (tmp_path / str(k)).mkdir()
        manifest = tmp_path / str(k) / "openaigym.trace.w1.manifest.json"
        manifest.write_text(json.dumps({"batches": [], **doc}))
        with pytest.raises(TraceFormatError, match=re.escape(says)):
            gym_recording.load(tmp_path / str(k))
    d = tmp_path / "surrogate"
    with gym_recording.TraceRecording(d) as rec:
        rec.add_reset(np.zeros(1), options={"name": "x"})
        rec.add_step(0, np.ones(1), 1.0, terminated=True)
    batch = _first_batch(d)
    batch.write_text(batch.read_text().replace('"x"', '"\\ud800"'))
    with pytest.raises(TraceFormatError, match=r"it holds \\ud800, the \\u escape of a lone"):
        gym_recording.load(d)[0]


@pytest.mark.parametrize(
    ("dtype", "value", "ok"),
    [
        ("int8", True, False),
        ("int64", 2.0, False),
        ("bool", 1, False),
        ("float64", True, False),
        ("uint8", 3, True),
        ("float32", 2, True),
        ("bool", False, True),
    ],
)
def test_a_scalar_takes_values_of_its_dtypes_kind_alone(
    tmp_path: Path, dtype: str, value: Any, ok: bool
) -> None:
    """§6's scalar value is of the dtype's kind, as a jsonarray's elements are (§9: true is no
    int, 1 no bool, 2.0 no int64): another kind was read as NumPy casts it."""
    with gym_recording.TraceRecording(tmp_path) as rec:
        rec.add_reset(np.zeros(1), options={"s": np.dtype(dtype).type(0)})
        rec.add_step(0, np.ones(1), 1.0, terminated=True)
    batch = _first_batch(tmp_path)
    doc = json.loads(batch.read_text())
    doc["episodes"][0]["options"]["s"]["value"] = value
    batch.write_text(json.dumps(doc))
    manifest = next(tmp_path.glob("*.manifest.json"))
    meta = json.loads(manifest.read_text())
    meta["batches"][0]["bytes"] = sum(p.stat().st_size for p in (batch, batch.with_suffix(".bin")))
    manifest.write_text(json.dumps(meta))
    if ok:
        got = gym_recording.load(tmp_path)[0].options["s"]
        assert got.dtype == np.dtype(dtype) and got == value
        return
    with pytest.raises(TraceFormatError, match=f"for a {dtype} scalar, got"):
        gym_recording.load(tmp_path)[0]
