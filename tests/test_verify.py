"""``gym-recording verify DIR [--clean]`` through the real entry points, and its report.

The command runs as users run it: ``python -m gym_recording verify DIR`` in a subprocess (and
the ``gym-recording`` console script when it is installed). It prints one line per problem,
each starting with the file at fault, and exits 0 on a sound recording, 1 on any problem.
Leftover temporary files are reported; ``--clean`` removes only old regular files with the
temporary prefix directly in DIR.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import gym_recording
from gym_recording import TraceRecording
from gym_recording.tools.verify import CLEAN_MIN_AGE, remove_temp_files, verify

HOSTILE = Path(__file__).resolve().parent / "hostile"


def run_verify(*args: str | os.PathLike[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gym_recording", "verify", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def make_recording(directory: Path, episodes: int = 6, batch_bytes: int = 600) -> Path:
    """A recording with several batches and an episode split across batches."""
    with TraceRecording(directory, batch_bytes=batch_bytes, record_infos=True) as rec:
        for e in range(episodes):
            rec.add_reset({"img": np.full((8, 8), e, np.uint8), "v": np.zeros(2)}, seed=e, info={})
            for s in range(3 + 5 * (e % 3)):
                obs = {"img": np.full((8, 8), s, np.uint8), "v": np.array([s, e], float)}
                rec.add_step(s % 2, obs, 0.5, terminated=s == 2 + 5 * (e % 3), info={"s": s})
    return directory


def _age(path: Path, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t), follow_symlinks=False)


def test_sound_recording_exits_0(tmp_path):
    """A sound recording: exit 0, and a summary naming what was checked."""
    make_recording(tmp_path)
    out = run_verify(tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    last = out.stdout.strip().splitlines()[-1]
    assert last.startswith(f"{tmp_path}: OK")
    assert "1 manifest(s)" in last and "6 episode(s) read" in last


def test_report_counts(tmp_path):
    """The report counts manifests, batches, episode objects, arrays and steps."""
    make_recording(tmp_path)
    report = verify(tmp_path)
    assert report.ok and not report.temp_files
    assert report.manifests == 1 and report.episodes == 6
    assert report.batches >= 3  # small batches: several, with split episodes
    assert report.episode_objects > report.episodes
    # Per episode object: image + vector observations, actions, rewards; and its info
    # columns, if it has any.
    objects = [
        o
        for p in tmp_path.glob("openaigym.trace.*.ep*.json")
        for o in json.loads(p.read_bytes())["episodes"]
    ]
    columns = sum(len(o["info_columns"]["columns"]) for o in objects if "info_columns" in o)
    assert report.arrays == 4 * report.episode_objects + columns
    assert report.steps == sum(3 + 5 * (e % 3) for e in range(6))


def test_names_that_only_look_like_trace_files_are_not_read(tmp_path):
    """A manifest's copy named with a trailing newline is no manifest (FORMAT.md §1): its
    episodes are not read twice, by ``load`` or by ``verify``."""
    import gym_recording

    make_recording(tmp_path)
    (manifest,) = tmp_path.glob("*.manifest.json")
    shutil.copy(manifest, f"{manifest}\n")
    batch = next(tmp_path.glob("*.ep*.json"))
    shutil.copy(batch, f"{batch}\n")
    assert len(gym_recording.load(tmp_path)) == 6
    report = verify(tmp_path)
    assert report.ok and report.manifests == 1 and report.episodes == 6
    assert not any("\n" in note for notes in report.notes.values() for note in notes)


def test_help_exits_0():
    """--help works through the module entry point and documents --clean."""
    out = subprocess.run(
        [sys.executable, "-m", "gym_recording", "verify", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0
    assert "DIR" in out.stdout and "--clean" in out.stdout


def test_console_script(tmp_path):
    """The installed ``gym-recording`` script runs the same command."""
    exe = os.path.join(os.path.dirname(sys.executable), "gym-recording")
    if not os.path.exists(exe):
        pytest.skip("the gym-recording console script is not installed")
    make_recording(tmp_path)
    ok = subprocess.run([exe, "verify", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = subprocess.run(
        [exe, "verify", str(HOSTILE / "dtype-object")], capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 1


@pytest.mark.parametrize(
    "case", ["fn-dotdot", "dtype-object", "shape-wraps-64bit", "json-deep-batch"]
)
def test_hostile_recordings_exit_1(case):
    """Hostile recordings: exit 1, and every problem line names a file of the recording."""
    out = run_verify(HOSTILE / case)
    assert out.returncode == 1, out.stdout
    lines = out.stdout.strip().splitlines()
    assert len(lines) >= 2
    for line in lines[:-1]:
        assert line.startswith(str(HOSTILE / case)), line
    assert "problem(s)" in lines[-1]


def test_every_damaged_file_is_named(tmp_path):
    """Problems in several files are all reported, one line each, naming each file."""
    make_recording(tmp_path)
    batches = sorted(p for p in tmp_path.iterdir() if p.name.endswith(".json") and ".ep" in p.name)
    blobs = sorted(p for p in tmp_path.iterdir() if p.name.endswith(".bin"))
    assert len(batches) >= 3
    batches[0].write_bytes(batches[0].read_bytes()[:-10])  # cut JSON
    with open(blobs[-1], "r+b") as f:  # a cut blob
        f.truncate(os.path.getsize(blobs[-1]) - 3)
    out = run_verify(tmp_path)
    assert out.returncode == 1
    named = {line.split(": ", 1)[0] for line in out.stdout.strip().splitlines()[:-1]}
    assert str(batches[0]) in named
    assert str(batches[-1]) in named or str(blobs[-1]) in named


def test_missing_directory_exits_1(tmp_path):
    """A directory that does not exist is a problem, said plainly, in one line (no summary
    counting it as a file with a problem)."""
    out = run_verify(tmp_path / "nope")
    assert out.returncode == 1
    assert "does not exist" in out.stdout and len(out.stdout.splitlines()) == 1


def test_leftover_temp_files_are_reported_and_cleaned_safely(tmp_path):
    """Temporary files are reported without failing the recording; --clean removes only old
    regular files with the prefix directly in DIR: not young ones (a live writer may own
    them), not symlinks, not directories, not files in subdirectories."""
    make_recording(tmp_path)
    outside = tmp_path.parent / "precious.txt"
    outside.write_text("keep me")
    old = tmp_path / ".gymrec-tmp-old1"
    old.write_bytes(b"partial")
    young = tmp_path / ".gymrec-tmp-young"
    young.write_bytes(b"being written")
    link = tmp_path / ".gymrec-tmp-link"
    link.symlink_to(outside)
    sub = tmp_path / ".gymrec-tmp-dir"
    sub.mkdir()
    (sub / ".gymrec-tmp-inner").write_bytes(b"x")
    for p in (old, link, sub, sub / ".gymrec-tmp-inner"):
        _age(p, CLEAN_MIN_AGE + 600)

    report = verify(tmp_path)
    assert report.ok
    assert set(report.temp_files) == {p.name for p in (old, young)}
    for p in (link, sub):  # (what --clean leaves is not said to be removed by it)
        assert "--clean leaves it" in report.notes[str(p)][0]

    out = run_verify(tmp_path)
    assert out.returncode == 0
    assert f"{old}: leftover temporary file" in out.stdout
    assert f"{old}: leftover temporary file of an interrupted write, last modified" in out.stdout
    # (a young one may be a running writer's: not said to be left by an interrupted write)
    said = rf"{re.escape(str(young))}: temporary file, last modified \d+ s ago: a running writer's"
    assert re.search(said, out.stdout), out.stdout  # (its age: however long the run took)
    assert "--clean removes it once 60 s old" in out.stdout
    assert old.exists()

    out = run_verify(tmp_path, "--clean")
    assert out.returncode == 0, out.stdout
    assert f"{old}: removed" in out.stdout
    assert not old.exists()
    assert young.exists() and link.is_symlink() and sub.is_dir()
    assert (sub / ".gymrec-tmp-inner").exists() and outside.read_text() == "keep me"
    assert "a writer may still use it" in out.stdout

    _age(young, CLEAN_MIN_AGE + 1)
    removed, kept = remove_temp_files(tmp_path)
    assert removed == [young.name]
    assert all(why == "not a regular file" for _, why in kept)
    assert verify(tmp_path).ok


def test_clean_takes_a_file_url_as_its_path(tmp_path):
    """``verify file:///DIR --clean`` ages and removes old temporary files as for DIR (it
    took the URL for a path: every file was 0 s old, and its removal failed)."""
    make_recording(tmp_path)
    old = tmp_path / ".gymrec-tmp-old1"
    old.write_bytes(b"partial")
    _age(old, CLEAN_MIN_AGE + 600)
    url = tmp_path.as_uri()
    assert verify(url).temp_ages[0] >= CLEAN_MIN_AGE + 600
    out = run_verify(url, "--clean")
    assert out.returncode == 0, out.stdout + out.stderr
    assert not old.exists()


def test_unlisted_batch_files_are_noted_not_failed(tmp_path):
    """Batch files no manifest lists (a flush cut before its manifest) are noted only."""
    make_recording(tmp_path)
    batch = next(p for p in tmp_path.iterdir() if p.name.endswith("ep000000000.json"))
    orphan = tmp_path / batch.name.replace("ep000000000", "ep000999999")
    shutil.copy(batch, orphan)
    out = run_verify(tmp_path)
    assert out.returncode == 0
    assert f"{orphan}: note: no manifest lists this file" in out.stdout


def test_verify_reads_each_problem_file_once(tmp_path):
    """A problem the reader also hits is not reported twice."""
    make_recording(tmp_path)
    blob = sorted(p for p in tmp_path.iterdir() if p.name.endswith(".bin"))[0]
    blob.unlink()
    report = verify(tmp_path)
    assert not report.ok
    lines = report.lines()
    assert len(lines) == len(set(lines))


def test_a_directory_without_a_recording_is_a_problem(tmp_path):
    """A directory of other files only (a wrong path, say) is no recording: verify says so,
    and exits 1. One with nothing, or only what a writer killed before its first manifest
    leaves, is a recording with no episode yet: sound, with a note."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.txt").write_text("not a trace")
    (other / "sub").mkdir()
    report = verify(other)
    assert not report.ok
    assert "holds no recording" in report.problems[str(other)][0]
    out = run_verify(other)
    assert out.returncode == 1 and "holds no recording" in out.stdout
    assert not verify(tmp_path).ok  # (the parent of a directory: no recording either)

    empty = tmp_path / "empty"
    empty.mkdir()
    (tmp_path / "killed").mkdir()
    (tmp_path / "killed" / ".gymrec-tmp-0123456789ab").write_bytes(b"partial")
    for d in (empty, tmp_path / "killed"):
        report = verify(d)
        assert report.ok, report.lines()
        assert "no manifest yet" in report.notes[str(d)][0]


def _edit_manifest(path: Path, **keys: object) -> None:
    """Rewrite the manifest ``path`` with ``keys`` set (``None``: the key removed)."""
    doc = json.loads(path.read_bytes())
    for key, value in keys.items():
        if value is None:
            doc.pop(key, None)
        else:
            doc[key] = value
    path.write_text(json.dumps(doc))


def _one_manifest(directory: Path) -> Path:
    (manifest,) = directory.glob("*.manifest.json")
    return manifest


def test_a_format_version_without_its_minor_part_is_a_problem(tmp_path):
    """FORMAT.md §3: a version 2 manifest's format_version is "2.<minor>". The reader reads
    "2" (or "2.3.1") as version 2 all the same, but verify reports it, naming the file and
    the key (it said OK)."""
    make_recording(tmp_path, episodes=2)
    manifest = _one_manifest(tmp_path)
    for version in ("2", "2.3.1", "2.03"):
        _edit_manifest(manifest, format_version=version)
        report = verify(tmp_path)
        assert list(report.problems) == [str(manifest)], report.lines()
        (problem,) = report.problems[str(manifest)]
        assert problem.startswith('format_version: expected "2.<minor>"'), problem
        assert repr(version) in problem
        assert report.episodes == 2  # (the reader reads it)
    out = run_verify(tmp_path)
    assert out.returncode == 1 and f"{manifest}: format_version: " in out.stdout
    for version in ("2.0", "2.3"):
        _edit_manifest(manifest, format_version=version)
        assert verify(tmp_path).ok, version


def test_a_text_charset_out_of_code_point_order_is_a_problem(tmp_path):
    """FORMAT.md §7: a Text space's charset holds its characters in code point order. One
    out of order (as a hand-written manifest may hold), at the top or inside a Tuple or
    Dict, is reported with its key; the reader reads the same characters all the same."""
    make_recording(tmp_path, episodes=1)
    manifest = _one_manifest(tmp_path)

    def text(charset: str) -> dict[str, object]:
        return {"type": "Text", "min_length": 0, "max_length": 4, "charset": charset}

    _edit_manifest(
        manifest,
        observation_space={"type": "Dict", "spaces": {"a": text("abc"), "t": text("bca")}},
        action_space={"type": "Tuple", "spaces": [text("xyz"), text("zy")]},
    )
    report = verify(tmp_path)
    problems = report.problems[str(manifest)]
    assert len(problems) == 2, problems
    assert problems[0].startswith("observation_space.spaces['t'].charset: expected the "), problems
    assert "'c' (U+0063) before 'a' (U+0061)" in problems[0] and "sorted: 'abc'" in problems[0]
    assert problems[1].startswith("action_space.spaces[1].charset: expected the "), problems
    with gym_recording.load(tmp_path) as rec:
        assert rec.observation_space["t"].character_set == frozenset("abc")
    _edit_manifest(manifest, observation_space=text("abc"), action_space=text(""))
    assert verify(tmp_path).ok


def test_a_segment_not_named_by_its_writer_id_is_a_problem(tmp_path, monkeypatch):
    """FORMAT.md §3: segment k of writer w is the writer id w.s<k> (w for segment 0). A
    writer's own segments pass; a manifest whose `segment` its name does not end with is
    reported, naming the file and the key (it said OK)."""
    from gym_recording.record import writer

    monkeypatch.setattr(writer, "SEGMENT_BATCHES", 1)
    make_recording(tmp_path, episodes=3, batch_bytes=1)
    assert verify(tmp_path).ok
    (second,) = tmp_path.glob("*.s1.manifest.json")
    writer_id = json.loads(second.read_bytes())["writer"]
    first = tmp_path / f"openaigym.trace.{writer_id}.manifest.json"
    assert first.is_file() and json.loads(first.read_bytes())["segment"] == 0

    _edit_manifest(second, segment=2)
    _edit_manifest(first, segment=1)
    report = verify(tmp_path)
    assert set(report.problems) == {str(first), str(second)}, report.lines()
    (problem,) = report.problems[str(first)]
    assert problem.startswith(f"segment: expected segment 1 of writer {writer_id!r} ")
    assert "the writer id in its name to end with .s1" in problem
    assert f"got {first.name}" in problem
    (problem,) = report.problems[str(second)]
    assert f"openaigym.trace.{writer_id}.s2.manifest.json" in problem

    _edit_manifest(first, segment=0)
    _edit_manifest(second, segment=1, writer=None)  # (no writer: its name's .s1 is checked)
    assert verify(tmp_path).ok, verify(tmp_path).lines()
    _edit_manifest(second, segment=3)
    (problem,) = verify(tmp_path).problems[str(second)]
    assert "the writer id in its name to end with .s3" in problem


@pytest.mark.skipif(
    sys.platform != "linux" or (os.geteuid() == 0 and shutil.which("setpriv") is None),
    reason="a file root may not read needs Linux's setpriv to drop the capabilities",
)
def test_a_file_this_user_may_not_read_is_reported_and_the_rest_checked(tmp_path: Path) -> None:
    """A batch's blob this user may not read (another user's, written under umask 077):
    verify reports it, naming the file and why, and checks the rest; a ReadError, not a
    damaged file (verify raised it, unchecked, when unreadable files became ReadErrors)."""
    make_recording(tmp_path)
    blob = sorted(p for p in tmp_path.iterdir() if p.name.endswith(".bin"))[0]
    blob.chmod(0)
    drop = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"] if os.geteuid() == 0 else []
    code = (
        "import sys; from gym_recording.tools.verify import verify\n"
        "r = verify(sys.argv[1])\n"
        "print(r.ok, r.batches, len(r.problems)); print(*r.lines(), sep='\\n')\n"
    )
    out = subprocess.run(
        [*drop, sys.executable, "-c", code, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    ok, batches, files = out[0].split()
    assert ok == "False" and int(batches) > 0 and files == "2", out  # (its batch; reading all)
    said = [
        line for line in out[1:] if f"{blob}: cannot open array file: Permission denied" in line
    ]
    assert len(said) == 2 and "Traceback" not in "\n".join(out), out
