"""``TraceRecording.add_rows``: rows of resets and steps, recorded as the calls one by one.

Each test records the same rows twice: once with ``add_rows`` (stored at once where the
buffer takes them), once with the ``add_reset`` / ``add_step`` / ``end_episode`` calls the
rows stand for, and compares every episode, to the byte and the dtype, with its times.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import gym_recording
from gym_recording import TraceRecording


def _rows(seed: int, t: int, end_every: float) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    ends = rng.random(t) < end_every
    coin = rng.random(t) < 0.5
    return {
        "actions": rng.integers(0, 3, t).astype(np.int64),
        "observations": rng.standard_normal((t, 3)).astype(np.float32),
        "rewards": rng.standard_normal(t),
        "terminated": ends & coin,
        "truncated": ends & ~coin,
        "times": 1.7e9 + np.arange(t) * 0.001 + seed,
    }


def _one_by_one(rec: TraceRecording, rows: dict[str, np.ndarray], reset_first: bool) -> int:
    """What ``add_rows`` stands for (``NEXT_STEP``: the row after an end is a reset)."""
    started, reset = 0, reset_first
    for j in range(len(rows["rewards"])):
        if reset:
            rec.add_reset(rows["observations"][j], started_at=float(rows["times"][j]))
            started, reset = started + 1, False
            continue
        term, trunc = bool(rows["terminated"][j]), bool(rows["truncated"][j])
        rec.add_step(rows["actions"][j], rows["observations"][j], rows["rewards"][j], term, trunc)
        if term or trunc:
            rec.end_episode(ended_at=float(rows["times"][j]))
            reset = True
    return started


def _episodes(directory: Path) -> list[dict[str, Any]]:
    with gym_recording.load(directory) as rec:
        return [
            {
                "observations": ep.observations.copy(),
                "actions": ep.actions.copy(),
                "rewards": ep.rewards.copy(),
                "terminated": ep.terminated,
                "truncated": ep.truncated,
                "started_at": ep.started_at,
                "ended_at": ep.ended_at,
                "seed": ep.seed,
            }
            for ep in rec
        ]


def _assert_same(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        for key, value in x.items():
            if isinstance(value, np.ndarray):
                assert value.dtype == y[key].dtype and value.shape == y[key].shape, key
                assert value.tobytes() == y[key].tobytes(), key
            else:
                assert value == y[key], key


@pytest.mark.parametrize("batch_bytes", [5_000_000, 2_000], ids=["one-batch", "small-batches"])
@pytest.mark.parametrize("end_every", [0.05, 0.4, 0.0])
def test_rows_recorded_as_the_calls_they_stand_for(
    tmp_path: Path, batch_bytes: int, end_every: float
) -> None:
    """Runs of rows, some starting with a reset and some continuing an open episode (as a
    vector env hands a sub-env's rows over), in batches of one or many."""
    a = TraceRecording(tmp_path / "a", batch_bytes=batch_bytes)
    b = TraceRecording(tmp_path / "b", batch_bytes=batch_bytes)
    for rec in (a, b):
        rec.add_reset(np.zeros(3, np.float32), seed=5, started_at=1.6e9)
    for k in range(40):
        rows = _rows(k, int(np.random.default_rng(k).integers(0, 300)), end_every)
        reset_first = not a.in_episode
        assert b.in_episode == a.in_episode
        started = a.add_rows(
            rows["actions"],
            rows["observations"],
            rows["rewards"],
            rows["terminated"],
            rows["truncated"],
            rows["times"],
            reset_first=reset_first,
        )
        assert started == _one_by_one(b, rows, reset_first)
        assert a.steps == b.steps and a.episode_count == b.episode_count
    for rec in (a, b):
        rec.end_episode(ended_at=2e9)
        rec.close()
    got, want = _episodes(tmp_path / "a"), _episodes(tmp_path / "b")
    assert len(want) > (5 if end_every else 0)
    _assert_same(got, want)
    assert got[0]["seed"] == 5 and got[0]["started_at"] == 1.6e9


def test_a_reset_row_that_sets_a_flag_is_a_reset(tmp_path: Path) -> None:
    """Rows are resets by the order they come in: a reset row's flags are ignored, so the
    row after it is a step."""
    rec = TraceRecording(tmp_path)
    rows = {
        "actions": np.array([0, 1, 2, 0], np.int64),
        "observations": np.arange(12, dtype=np.float32).reshape(4, 3),
        "rewards": np.array([9.0, 1.0, 2.0, 3.0]),
        "terminated": np.array([True, False, True, False]),
        "truncated": np.array([False, False, False, False]),
        "times": np.array([1.0, 2.0, 3.0, 4.0]),
    }
    assert rec.add_rows(*rows.values(), reset_first=True) == 2
    rec.close()
    eps = _episodes(Path(rec.directory))
    assert [ep["actions"].tolist() for ep in eps] == [[1, 2], []]
    assert eps[0]["rewards"].tolist() == [1.0, 2.0] and eps[0]["terminated"]
    assert (eps[0]["started_at"], eps[0]["ended_at"]) == (1.0, 3.0)
    assert eps[1]["observations"].tolist() == [[9.0, 10.0, 11.0]]


def test_rows_of_another_layout_are_recorded_one_by_one(tmp_path: Path) -> None:
    """Observations of another dtype than the episode's first: stored exactly all the same."""
    rec = TraceRecording(tmp_path)
    rec.add_reset(np.zeros(3, np.float32))
    rec.add_step(0, np.zeros(3, np.float32), 0.0)
    obs = np.ones((4, 3), np.float64)
    flags = np.zeros(4, np.bool_)
    assert (
        rec.add_rows(np.arange(4), obs, np.ones(4), flags, flags, np.arange(4.0), reset_first=False)
        == 0
    )
    rec.close()
    with gym_recording.load(tmp_path) as got:
        (ep,) = list(got)
        assert ep.actions.tolist() == [0, 0, 1, 2, 3] and ep.actions.dtype == np.int64
        obs = ep.observations  # (per-step values once a value leaves the layout)
        assert [o.dtype for o in obs] == [np.float32] * 2 + [np.float64] * 4
        assert [o.tolist() for o in obs] == [[0.0] * 3] * 2 + [[1.0] * 3] * 4


def test_reset_options_that_fill_the_batch_write_it_where_the_calls_do(tmp_path: Path) -> None:
    """Reset options larger than a batch: the batch is written after the episode's first
    step, by rows at once as by the calls one by one (and by the C step recorder)."""
    rows = _rows(1, 40, 0.1)
    recs = [TraceRecording(tmp_path / name, batch_bytes=2_000) for name in "ab"]
    for rec in recs:  # (an episode waiting for its batch, then the options)
        rec.add_reset(np.zeros(3, np.float32), started_at=1.0)
        rec.add_step(0, np.zeros(3, np.float32), 0.0, terminated=True)
        rec.end_episode(ended_at=2.0)
        rec.add_reset(np.zeros(3, np.float32), options={"big": "x" * 3000}, started_at=3.0)
    a, b = recs
    assert a.add_rows(*rows.values(), reset_first=False) == _one_by_one(b, rows, False)
    cuts = [[(e["first"], e["len"], e["steps"]) for e in rec.batches] for rec in recs]
    assert a.steps == b.steps and cuts[0] == cuts[1] and len(cuts[0]) >= 2
    for rec in recs:
        rec.end_episode(ended_at=2e9)
        rec.close()
    _assert_same(_episodes(tmp_path / "a"), _episodes(tmp_path / "b"))


def test_rows_at_times_that_are_not_finite_numbers_are_refused_before_any_is_recorded(
    tmp_path: Path,
) -> None:
    """A time of inf or NaN (JSON would store null) is refused by the call: no row of it is
    recorded, and the recording goes on."""
    t = 4
    done = np.array([False, True, False, True])
    args = (np.zeros(t, np.int64), np.zeros((t, 2)), np.ones(t), done, np.zeros(t, bool))
    with TraceRecording(tmp_path / "t") as rec:
        rec.add_rows(*args, np.full(t, 1.7e9), reset_first=True)
        bad = np.full(t, 1.7e9)
        bad[2] = np.nan
        with pytest.raises(ValueError, match="finite"):
            rec.add_rows(*args, bad, reset_first=True)
        assert rec.episode_count == 2
    with gym_recording.load(tmp_path / "t") as r:
        assert [(ep.length, ep.started_at, ep.ended_at) for ep in r] == [(1, 1.7e9, 1.7e9)] * 2


@pytest.mark.parametrize("bad", ["observations", "actions", "terminated", "times", "rewards"])
def test_rows_of_other_lengths_are_refused_before_any_is_recorded(tmp_path: Path, bad: str) -> None:
    """An argument of fewer or more rows than the rewards (or not an array) was taken: too few
    observations made every later write fail, and the episodes before were lost at close."""
    t = 4
    done = np.array([False, True, False, True])
    good = {
        "actions": np.zeros(t, np.int64),
        "observations": np.zeros((t, 2)),
        "rewards": np.ones(t),
        "terminated": done,
        "truncated": np.zeros(t, bool),
        "times": np.full(t, 1.7e9),
    }
    with TraceRecording(tmp_path / "t") as rec:
        rec.add_rows(**good, reset_first=True)
        said = "(rewards|actions)" if bad == "rewards" else bad  # (the rewards set the rows)
        for wrong in (good[bad][:2], np.concatenate([good[bad], good[bad]]), list(good[bad])):
            with pytest.raises(ValueError, match=f"expected {said} to be "):
                rec.add_rows(**{**good, bad: wrong}, reset_first=True)
        assert rec.episode_count == 2
    with gym_recording.load(tmp_path / "t") as r:
        assert [(ep.length, ep.started_at, ep.ended_at) for ep in r] == [(1, 1.7e9, 1.7e9)] * 2


def test_add_rows_documents_each_argument() -> None:
    """add_rows is public (the README names it): its docstring's Args section says what each
    parameter is."""
    import inspect
    import re

    doc = inspect.getdoc(TraceRecording.add_rows) or ""
    assert "\nArgs:\n" in doc, doc
    args = doc.split("\nArgs:\n", 1)[1].split("\n\n", 1)[0]
    documented = re.findall(r"^    (\w+):", args, re.MULTILINE)
    params = [p for p in inspect.signature(TraceRecording.add_rows).parameters if p != "self"]
    assert documented == params
