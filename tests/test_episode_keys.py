"""The per-episode keys (FORMAT.md §4): declared once, in ``format/wire.py``, and carried from
the writer to ``Episode`` by code that does not name them.

The consistency tests reach into ``gym_recording.format.wire`` on purpose: they hold the
declaration (``EpisodeKeys``, read by ``Episode``) to the file's structure (``EpisodeObject``),
so that a key added to one and not the other fails here.
"""

from __future__ import annotations

import dataclasses
import fractions
import json
import re
from pathlib import Path

import msgspec
import numpy as np
import pytest

import gym_recording
from gym_recording import Episode, TraceRecording
from gym_recording.format.wire import EPISODE_KEYS, EpisodeKeys, EpisodeObject, part_keys


def test_every_declared_key_is_a_key_of_the_episode_object_with_its_default():
    """Each key an Episode hands out is stored in the file, with the same default (§4)."""
    stored = {f.name: f for f in msgspec.structs.fields(EpisodeObject)}
    for f in dataclasses.fields(EpisodeKeys):
        assert f.name in stored, f"EpisodeObject has no {f.name!r}"
        assert stored[f.name].default == f.default, f.name
        assert f.metadata["part"] in ("first", "last")
    assert set(EPISODE_KEYS) == {f.name for f in dataclasses.fields(EpisodeKeys)}
    assert {f.name for f in dataclasses.fields(Episode)} >= set(EPISODE_KEYS)


def test_the_viewer_declares_the_same_keys_with_the_same_parts():
    """viewer.js, the other reader (FORMAT.md), holds the keys in one table: EPISODE_KEYS."""
    source = (Path(gym_recording.__file__).parent / "tools" / "viewer" / "viewer.js").read_text()
    start = source.index("const EPISODE_KEYS = {")
    table = source[start : source.index("\n  };\n", start)]
    entries = re.split(r"^ {4}(\w+): \{", table, flags=re.M)[1:]
    parts = {}
    for key, body in zip(entries[::2], entries[1::2], strict=True):
        part = re.search(r'part: "(\w+)"', body)
        assert part is not None, key
        parts[key] = part.group(1)
    assert parts == EPISODE_KEYS


def test_part_keys_splits_an_episodes_keys_between_its_first_and_last_parts():
    keys = {"seed": 3, "started_at": 1.5, "terminated": True, "ended_at": 2.5}
    assert part_keys(keys, first=True, last=True) == keys
    assert part_keys(keys, first=True, last=False) == {"seed": 3, "started_at": 1.5}
    assert part_keys(keys, first=False, last=True) == {"terminated": True, "ended_at": 2.5}
    assert part_keys(keys, first=False, last=False) == {}


def test_episode_takes_keys_by_name_or_as_a_mapping_and_refuses_unknown_ones():
    obs, act, rew = np.zeros((3, 2)), np.zeros(2), np.ones(2)
    a = Episode(obs, act, rew, terminated=True, seed=9)
    b = Episode(obs, act, rew, {"terminated": True, "seed": 9})
    for ep in (a, b):
        assert (ep.terminated, ep.truncated, ep.seed, ep.started_at) == (True, False, 9, None)
    with pytest.raises(TypeError, match="colour"):
        Episode(obs, act, rew, colour="red")
    with pytest.raises(TypeError, match="colour"):
        Episode(obs, act, rew, {"colour": "red"})
    for once_terminated in (True, False, 0):  # (the fourth argument before 2.3)
        with pytest.raises(TypeError, match="by name"):
            Episode(obs, act, rew, once_terminated, True)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="by name"):
        Episode(obs, act, rew, True, seed=1)  # type: ignore[arg-type]
    for ep in (a, Episode(obs, act, rew), Episode(obs, act, rew, {"seed": 9})):
        assert set(EPISODE_KEYS) <= vars(ep).keys()  # (every key in the instance's dict)


@pytest.mark.parametrize("batch_bytes", [5_000_000, 300])
def test_keys_round_trip_whole_and_split_in_parts(batch_bytes, tmp_path):
    """Seed and start from the first part, flags and end from the last, whole or in parts."""
    d = tmp_path / "t"
    with TraceRecording(d, batch_bytes=batch_bytes) as rec:
        for e, (n, flag) in enumerate([(40, "terminated"), (3, "truncated"), (55, None)]):
            rec.add_reset(np.zeros(4, np.float32), seed=100 + e, started_at=1000.0 + e)
            for t in range(n):
                last = t == n - 1
                rec.add_step(
                    0,
                    np.full(4, t, np.float32),
                    1.0,
                    terminated=last and flag == "terminated",
                    truncated=last and flag == "truncated",
                )
            rec.end_episode(ended_at=2000.0 + e)
    manifest = json.loads(next(d.glob("*.manifest.json")).read_text())
    split = any(b.get("continues") for b in manifest["batches"])
    assert split == (batch_bytes == 300)
    with gym_recording.load(d) as r:
        got = [{k: getattr(ep, k) for k in EPISODE_KEYS} for ep in r]
        assert [ep.length for ep in r] == [40, 3, 55]
    assert got == [
        {"terminated": True, "truncated": False, "seed": 100, "started_at": 1000.0,
         "ended_at": 2000.0},
        {"terminated": False, "truncated": True, "seed": 101, "started_at": 1001.0,
         "ended_at": 2001.0},
        {"terminated": False, "truncated": False, "seed": 102, "started_at": 1002.0,
         "ended_at": 2002.0},
    ]  # fmt: skip


@pytest.mark.parametrize(
    "bad", [float("inf"), float("nan"), np.float64("-inf"), 10**400, "1.5", True]
)
def test_a_time_that_is_not_a_finite_number_is_refused_at_the_call(bad, tmp_path):
    """started_at/ended_at that no reader could date (or that JSON stores as null) are
    refused by the call that brings them, which changes nothing: the open episode goes on."""
    error = TypeError if isinstance(bad, (str, bool)) else ValueError
    with TraceRecording(tmp_path / "t") as rec:
        rec.add_reset(np.zeros(2), seed=1)
        rec.add_step(0, np.ones(2), 1.0)
        with pytest.raises(error, match="started_at"):
            rec.add_reset(np.zeros(2), started_at=bad)
        with pytest.raises(error, match="ended_at"):
            rec.add_reset(np.zeros(2), ended_at=bad)
        with pytest.raises(error, match="ended_at"):
            rec.end_episode(ended_at=bad)
        assert rec.in_episode
        rec.add_step(0, np.ones(2), 1.0)
        rec.end_episode(ended_at=np.float32(2e9))
        rec.add_reset(np.zeros(2), seed=2, started_at=fractions.Fraction(3, 2))  # (a number)
        rec.end_episode(ended_at=np.array(2.5))
    with gym_recording.load(tmp_path / "t") as r:
        got = [(ep.seed, ep.length, ep.started_at, ep.ended_at) for ep in r][1:]
        assert got == [(2, 0, 1.5, 2.5)]
        assert (r[0].seed, r[0].length, r[0].ended_at) == (1, 2, float(np.float32(2e9)))


def test_times_past_any_date_are_shown_as_seconds(tmp_path):
    """A start given in milliseconds by mistake (year 55,000) is kept as given and shown as
    seconds by the notebook views, which show the others as dates."""
    with TraceRecording(tmp_path / "t") as rec:
        rec.add_reset(np.zeros(2), started_at=1.7e12)
        rec.add_step(0, np.ones(2), 1.0, terminated=True)
        rec.add_reset(np.zeros(2), started_at=1.7e9)
        rec.add_step(0, np.ones(2), 1.0, terminated=True)
    with gym_recording.load(tmp_path / "t") as r:
        assert r[0].started_at == 1.7e12
        assert "1.7e+12 s" in r._repr_html_() and "1.7e+12 s" in r[0]._repr_html_()
        assert "2023-11-14" in r._repr_html_()
