"""Recordings written by every earlier release read back as that release's reader read them.

``tests/data/versions/<format version>/`` holds recordings written by the release that wrote
that format version (see its README), and ``expected.json``: what that release's own reader
returned for each (:mod:`version_digest`). Today's reader must return the same for every
attribute that release had, and ``verify`` must find nothing wrong.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from version_digest import recording_digest

import gym_recording

VERSIONS_DIR = Path(__file__).resolve().parent / "data" / "versions"
CASES = sorted(
    (v.name, case)
    for v in VERSIONS_DIR.iterdir()
    if (v / "expected.json").is_file()
    for case in json.loads((v / "expected.json").read_text(encoding="utf-8"))["cases"]
)


def _expected(version: str, case: str) -> dict[str, Any]:
    doc = json.loads((VERSIONS_DIR / version / "expected.json").read_text(encoding="utf-8"))
    cases: dict[str, Any] = doc["cases"]
    return cases[case]


def test_every_format_version_is_carried():
    versions = {v for v, _ in CASES}
    assert {"2.0", "2.1", "2.2", gym_recording.FORMAT_VERSION} <= versions
    # Each version writes the cases it can (compression from 2.1, rendered frames from 2.2).
    assert ("2.1", "zstd") in CASES
    assert ("2.2", "render") in CASES


@pytest.mark.parametrize(("version", "case"), CASES)
def test_a_recording_of_an_earlier_release_reads_as_that_release_read_it(version, case, tmp_path):
    d = tmp_path / case
    shutil.copytree(VERSIONS_DIR / version / case, d)  # (nothing may write into the data)
    expected = _expected(version, case)
    with gym_recording.load(d) as rec:
        got = recording_digest(rec)
    assert sorted(got) == sorted(expected), "the same writers"
    for writer, episodes in expected.items():
        assert len(got[writer]) == len(episodes), writer
        for i, (want, have) in enumerate(zip(episodes, got[writer], strict=True)):
            for name, value in want.items():  # (the attributes that release's episodes had)
                assert have[name] == value, f"{version}/{case}: {writer} episode {i}: {name}"


@pytest.mark.parametrize(("version", "case"), CASES)
def test_verify_finds_nothing_wrong_in_an_earlier_release_s_recording(version, case):
    report = gym_recording.verify(VERSIONS_DIR / version / case)
    assert report.ok, report.lines()
    assert report.read_all and report.problem_count == 0
    expected = _expected(version, case)
    assert report.episodes == sum(len(eps) for eps in expected.values())


@pytest.mark.parametrize("version", sorted({v for v, _ in CASES}))
def test_recording_on_into_an_earlier_release_s_folder_keeps_both(version, tmp_path):
    import gymnasium as gym

    d = tmp_path / "traces"
    shutil.copytree(VERSIONS_DIR / version / "cartpole", d)
    env = gym_recording.TraceRecordingWrapper(gym.make("CartPole-v1"), d)
    env.reset(seed=1)
    resets = 1
    for i in range(40):
        *_, terminated, truncated, _ = env.step(i & 1)
        if terminated or truncated:
            env.reset()
            resets += 1
    env.close()
    expected = _expected(version, "cartpole")
    with gym_recording.load(d) as rec:
        got = recording_digest(rec)
    (old,) = expected
    new = set(got) - {old}
    assert len(new) == 1
    assert [e["observations"] for e in got[old]] == [e["observations"] for e in expected[old]]
    assert len(got[new.pop()]) == resets  # (this version's episodes, beside them)
    assert gym_recording.verify(d).ok
