"""``iter_transitions``: minibatches of (obs, action, reward, next_obs, done) for offline RL."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import gym_recording
from gym_recording import TraceRecording, iter_transitions


def make_recording(directory: Path, lengths: list[int], *, batch_bytes: int = 5_000_000) -> None:
    """Episodes whose observation is [episode, step]: each transition says where it came from."""
    rec = TraceRecording(str(directory), batch_bytes=batch_bytes)
    for e, n in enumerate(lengths):
        rec.add_reset(np.array([e, 0], np.int64))
        for t in range(1, n + 1):
            rec.add_step(
                np.array([e, t - 1], np.int32),
                np.array([e, t], np.int64),
                float(100 * e + t),
                terminated=(t == n and e % 2 == 0),
                truncated=(t == n and e % 2 == 1),
            )
    rec.close()


@pytest.fixture
def rec(tmp_path: Path) -> gym_recording.Recording:
    make_recording(tmp_path, [3, 0, 5, 1, 4], batch_bytes=150)  # split over several batches
    return gym_recording.load(tmp_path)


def test_every_transition_once_and_consistent(rec: gym_recording.Recording) -> None:
    """One pass yields each step of each episode once, with its own next_obs, reward, done
    and truncated."""
    seen = set()
    for batch in iter_transitions(rec, 4, seed=0):
        assert set(batch) == {"obs", "action", "reward", "next_obs", "done", "truncated"}
        assert batch["truncated"].dtype == np.bool_
        assert batch["obs"].dtype == np.int64 and batch["action"].dtype == np.int32
        assert batch["reward"].dtype == np.float64 and batch["done"].dtype == np.bool_
        for obs, act, rew, nxt, done, truncated in zip(
            batch["obs"],
            batch["action"],
            batch["reward"],
            batch["next_obs"],
            batch["done"],
            batch["truncated"],
            strict=True,
        ):
            e, t = obs.tolist()
            assert act.tolist() == [e, t]
            assert nxt.tolist() == [e, t + 1]
            assert rew == 100 * e + t + 1
            n = rec[e].length
            assert done == (t + 1 == n and e % 2 == 0)  # terminated only, not truncated
            assert truncated == (t + 1 == n and e % 2 == 1)  # a time limit: told apart
            seen.add((e, t))
    assert seen == {(e, t) for e, ep in enumerate(rec) for t in range(ep.length)}
    assert len(seen) == 13


def test_shuffle_is_seeded_and_mixes_episodes(rec: gym_recording.Recording) -> None:
    """The same seed gives the same order; batches mix episodes; shuffle=False keeps order."""

    def order(**kw: object) -> list[tuple[int, int]]:
        batches = iter_transitions(rec, 5, **kw)  # type: ignore[arg-type]
        return [tuple(o) for b in batches for o in b["obs"].tolist()]

    assert order(seed=1) == order(seed=1)
    assert order(seed=1) != order(seed=2)
    assert sorted(order(seed=1)) == order(shuffle=False)
    assert order(shuffle=False) == sorted(order(shuffle=False))
    first = next(iter_transitions(rec, 5, seed=3))
    assert len(set(first["obs"][:, 0].tolist())) > 1


def test_batch_sizes_and_drop_last(rec: gym_recording.Recording) -> None:
    """13 transitions in batches of 5: 5, 5, 3, or 5, 5 with drop_last."""
    assert [len(b["reward"]) for b in iter_transitions(rec, 5, seed=0)] == [5, 5, 3]
    assert [len(b["reward"]) for b in iter_transitions(rec, 5, drop_last=True)] == [5, 5]
    with pytest.raises(ValueError, match="positive"):
        next(iter_transitions(rec, 0))
    with pytest.raises(TypeError, match="positive int"):
        next(iter_transitions(rec, 2.5))  # type: ignore[arg-type]
    # (a path, which load() takes: its characters were read as episodes, an AttributeError)
    with pytest.raises(TypeError, match=r"got the path 'traces': pass gym_recording\.load"):
        next(iter_transitions("traces", 4))  # type: ignore[arg-type]


def test_dict_observations_and_empty_input(tmp_path: Path) -> None:
    """Dict observations come as dicts of arrays; no episodes means no batches."""
    r = TraceRecording(str(tmp_path))
    r.add_reset({"a": np.zeros(2, np.float32), "b": 0})
    for t in range(1, 4):
        r.add_step(t % 2, {"a": np.full(2, t, np.float32), "b": t}, 1.0, terminated=t == 3)
    r.close()
    with gym_recording.load(tmp_path) as rec:
        (batch,) = list(iter_transitions(rec, 10, shuffle=False))
    assert batch["obs"]["a"].shape == (3, 2) and batch["next_obs"]["b"].tolist() == [1, 2, 3]
    assert batch["done"].tolist() == [False, False, True]
    assert list(iter_transitions([], 4)) == []


def test_episodes_of_arrays_and_of_per_step_values_are_refused(tmp_path: Path) -> None:
    """One episode's observations are arrays, another's per-step values of changing shapes:
    no array of transitions holds both. An ExportError says so."""
    with TraceRecording(str(tmp_path)) as r:
        for e in range(2):
            r.add_reset(np.zeros(2))
            for k in range(2):
                r.add_step(0, np.zeros(2 if e == 0 else k + 1), 1.0)
    with (
        gym_recording.load(tmp_path) as rec,
        pytest.raises(gym_recording.ExportError, match="observations cannot be batched"),
    ):
        list(iter_transitions(rec, 4))


@pytest.mark.parametrize(
    ("first", "second", "says"),
    [
        ({"a": 1.0}, {"b": 1.0}, r"a dict of keys \['a'\], a dict of keys \['b'\]"),
        (np.ones(2), {"a": np.ones(2)}, r"a dict of keys \['a'\], steps"),
        ({"a": np.ones(2)}, np.ones(2), r"a dict of keys \['a'\], steps"),
        ((np.ones(2), 1.0), (np.ones(2),), "a tuple of 1, a tuple of 2"),
    ],
    ids=["dict-keys", "array-then-dict", "dict-then-array", "tuple-lengths"],
)
def test_episodes_of_different_layouts_are_refused(
    tmp_path: Path, first: object, second: object, says: str
) -> None:
    """Episodes of two writers whose observations are laid out differently (another dict's
    keys, a tuple's length, a dict against an array): an ExportError names both layouts."""
    for obs in (first, second):
        with TraceRecording(str(tmp_path)) as r:
            r.add_reset(obs)
            r.add_step(0, obs, 1.0, terminated=True)
    with (
        gym_recording.load(tmp_path) as rec,
        pytest.raises(gym_recording.ExportError, match=f"different layouts \\({says}\\)"),
    ):
        list(iter_transitions(rec, 4))


def test_dict_observations_of_one_layout_in_another_key_order_are_batched(
    tmp_path: Path,
) -> None:
    """Two writers whose envs hand out the same dict keys in another order: one layout."""
    for obs in ({"a": np.zeros(1), "b": np.ones(1)}, {"b": np.ones(1), "a": np.zeros(1)}):
        with TraceRecording(str(tmp_path)) as r:
            r.add_reset(obs)
            r.add_step(0, obs, 1.0, terminated=True)
    with gym_recording.load(tmp_path) as rec:
        (batch,) = iter_transitions(rec, 4, shuffle=False)
    np.testing.assert_array_equal(batch["obs"]["a"], np.zeros((2, 1)))
    np.testing.assert_array_equal(batch["obs"]["b"], np.ones((2, 1)))
    # (episodes made in memory may have keys of other types, whose str() may be equal)
    eps = [
        gym_recording.Episode({1: np.zeros(2), "1": np.ones(2)}, np.zeros(1), np.zeros(1)),
        gym_recording.Episode({"1": np.ones(2), 1: np.zeros(2)}, np.zeros(1), np.zeros(1)),
    ]
    (batch,) = iter_transitions(eps, 4, shuffle=False)
    np.testing.assert_array_equal(batch["obs"][1], np.zeros(2))


@pytest.mark.parametrize(
    ("observations", "actions", "got"),
    [
        (np.array([[0.0], [1.0], [2.0], [99.0]]), np.array([0, 1]), "4 rows of observations"),
        (np.arange(2.0)[:, None], np.array([0, 1]), "2 rows of observations"),
        (
            {"x": np.arange(3.0), "y": np.arange(2.0)},
            np.array([0, 1]),
            "rows of different lengths of observations",
        ),
        (np.arange(3.0), np.array([0, 1, 1]), "3 rows of actions"),
    ],
)
def test_hand_made_episodes_of_other_row_counts_are_refused(
    observations: object, actions: np.ndarray, got: str
) -> None:
    # (one observation too many made the transitions run into the next episode's)
    good = gym_recording.Episode(np.arange(10.0, 13.0), np.array([0, 1]), np.ones(2))
    bad = gym_recording.Episode(observations, actions, np.ones(2))
    with pytest.raises(gym_recording.ExportError, match=f"position 1 .*{got}"):
        list(iter_transitions([good, bad, good], 10, shuffle=False))


@pytest.mark.parametrize(
    ("dtypes", "refused"),
    [
        ((np.uint64, np.int64), True),  # (float64 rounds 2**63 + 1)
        ((np.int64, np.float32), True),
        ((np.int64, np.float64), True),
        ((np.float32, np.float64), False),
        ((np.int32, np.int64), False),
        ((np.uint8, np.int16), False),
        ((np.int32, np.float64), False),  # (ints within the float's mantissa)
        ((np.uint8, np.float32), False),
        ((np.bool_, np.float32), False),
    ],
)
def test_episodes_of_dtypes_no_one_dtype_holds_are_refused(
    dtypes: tuple[type, type], refused: bool
) -> None:
    first, second = (
        gym_recording.Episode(np.array([[v], [v]], dtype), np.array([0]), np.ones(1))
        for v, dtype in zip((9, 1), dtypes, strict=True)
    )
    if dtypes[0] is np.uint64:
        first = gym_recording.Episode(
            np.array([[2**63 + 1], [2**64 - 1]], np.uint64), np.array([0]), np.ones(1)
        )
    if refused:
        with pytest.raises(gym_recording.ExportError, match="no one dtype holds exactly"):
            list(iter_transitions([first, second], 4, shuffle=False))
        return
    (batch,) = iter_transitions([first, second], 4, shuffle=False)
    want = np.concatenate([first.observations[:1], second.observations[:1]])
    assert batch["obs"].dtype == np.result_type(*dtypes)
    assert batch["obs"].tolist() == want.tolist()
