"""Compare read-back episodes with the ``<case>.expected.json`` files of ``tests/data/compat``.

An ``expected.json`` holds ``{"writers": int, "episodes_in_writer_order": [entry, ...]}``. Each
entry is ``{"writer": int, "steps": N, "observations": [digest] * (N + 1), "actions": [digest] * N,
"rewards": [float] * N}``, a digest being ``{"dtype", "shape", "sha256", "sum"}`` of the value fed
to the original writer, hashed as ``np.atleast_1d(np.asarray(x)).tobytes()``.

An *episode* given to these helpers may be a dict (as the seed reader returns), a tuple
``(observations, actions, rewards)`` (as ``scan_recorded_traces`` calls back), or any object with
``observations``, ``actions`` and ``rewards`` attributes (``gym_recording.Episode``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "COMPAT_DIR",
    "assert_episode_matches",
    "assert_episodes_match_in_some_order",
    "assert_recording_matches",
    "compat_cases",
    "episode_fields",
    "expected_by_writer",
    "iter_steps",
    "load_expected",
    "match_writers",
    "step_digest",
]

#: The traces written by the original gym-recording, carried by the tests (see its README).
COMPAT_DIR = Path(__file__).resolve().parent / "data" / "compat"

Digest = tuple[str, list[int], str]


def compat_cases() -> list[str]:
    """Case names, discovered from the ``*.expected.json`` files (empty if the dir is missing)."""
    if not COMPAT_DIR.is_dir():
        return []
    return sorted(p.name[: -len(".expected.json")] for p in COMPAT_DIR.glob("*.expected.json"))


def load_expected(case: str) -> dict[str, Any]:
    """Load ``<case>.expected.json``."""
    with open(COMPAT_DIR / f"{case}.expected.json", encoding="utf-8") as f:
        expected: dict[str, Any] = json.load(f)
    return expected


def step_digest(x: Any) -> Digest:
    """Return ``(dtype, shape, sha256)`` of one step's value, hashed as the expected files were."""
    a = np.atleast_1d(np.asarray(x))
    return str(a.dtype), list(a.shape), hashlib.sha256(a.tobytes(order="C")).hexdigest()


def iter_steps(field: Any) -> Iterator[Any]:
    """Iterate the per-step values of a field: an ndarray over axis 0, a list over its items."""
    if isinstance(field, np.ndarray):
        if field.ndim == 0:
            raise AssertionError(f"a field must have a step axis, got a 0-d array {field!r}")
        yield from field
    elif isinstance(field, (list, tuple)):
        yield from field
    else:
        raise AssertionError(f"a field must be an ndarray or a list, got {type(field).__name__}")


def episode_fields(episode: Any) -> tuple[Any, Any, Any]:
    """Return ``(observations, actions, rewards)`` of a dict, a 3-tuple or an Episode-like."""
    if isinstance(episode, Mapping):
        return episode["observations"], episode["actions"], episode["rewards"]
    if isinstance(episode, tuple) and len(episode) == 3:
        return episode
    return episode.observations, episode.actions, episode.rewards


def _is_empty_quirk(field: Any) -> bool:
    """True for a zero-step field: shape (0,) or the original writer's shape (1, 0)."""
    if isinstance(field, np.ndarray):
        return field.shape in ((0,), (1, 0))
    return isinstance(field, (list, tuple)) and len(field) == 0


def _reward_list(rewards: Any, steps: int, where: str) -> list[float]:
    if isinstance(rewards, np.ndarray):
        assert rewards.dtype.kind == "f", f"{where}: rewards dtype {rewards.dtype} is not float"
        if steps == 0:
            assert _is_empty_quirk(rewards), f"{where}: rewards shape {rewards.shape} for 0 steps"
            return []
        assert rewards.shape == (steps,), f"{where}: rewards shape {rewards.shape} != ({steps},)"
        return [float(r) for r in rewards]
    assert isinstance(rewards, (list, tuple)), f"{where}: rewards is {type(rewards).__name__}"
    return [float(r) for r in rewards]


def _assert_steps_match(field: Any, expected: list[dict[str, Any]], name: str, where: str) -> None:
    steps = list(iter_steps(field))
    assert len(steps) == len(expected), f"{where}: {len(steps)} {name}, expected {len(expected)}"
    for t, (value, exp) in enumerate(zip(steps, expected, strict=True)):
        dtype, shape, sha = step_digest(value)
        got = (dtype, shape)
        want = (exp["dtype"], list(exp["shape"]))
        assert got == want, f"{where}: {name}[{t}] is {got}, expected {want}"
        assert sha == exp["sha256"], (
            f"{where}: {name}[{t}] bytes differ (sha256 {sha[:12]}, expected "
            f"{exp['sha256'][:12]}; sum {np.asarray(value).sum()}, expected {exp.get('sum')})"
        )


def assert_episode_matches(
    observations: Any,
    actions: Any,
    rewards: Any,
    expected_entry: Mapping[str, Any],
    where: str = "",
) -> None:
    """Assert one episode equals an ``episodes_in_writer_order`` entry, step by step, exactly.

    Compares dtype, shape and sha256 of every observation (``steps + 1``) and action (``steps``),
    and the rewards with float equality. A zero-step episode may have ``actions`` and ``rewards``
    of shape ``(0,)`` or the original writer's ``(1, 0)``.
    """
    where = where or f"writer {expected_entry.get('writer')} episode"
    steps = int(expected_entry["steps"])
    assert len(expected_entry["observations"]) == steps + 1, "malformed expected entry"
    assert len(expected_entry["actions"]) == steps == len(expected_entry["rewards"]), (
        "malformed expected entry"
    )
    _assert_steps_match(observations, expected_entry["observations"], "observations", where)
    if steps == 0:
        assert _is_empty_quirk(actions), (
            f"{where}: zero-step actions must have shape (0,) or (1, 0), got "
            f"{getattr(actions, 'shape', actions)!r}"
        )
    else:
        _assert_steps_match(actions, expected_entry["actions"], "actions", where)
    got_rewards = _reward_list(rewards, steps, where)
    want_rewards = [float(r) for r in expected_entry["rewards"]]
    assert len(got_rewards) == len(want_rewards), (
        f"{where}: {len(got_rewards)} rewards, expected {len(want_rewards)}"
    )
    for t, (got, want) in enumerate(zip(got_rewards, want_rewards, strict=True)):
        assert got == want, f"{where}: rewards[{t}] is {got!r}, expected {want!r}"


def expected_by_writer(expected: Mapping[str, Any]) -> dict[int, list[dict[str, Any]]]:
    """Group the expected entries by writer index, keeping each writer's order."""
    groups: dict[int, list[dict[str, Any]]] = {}
    for entry in expected["episodes_in_writer_order"]:
        groups.setdefault(int(entry["writer"]), []).append(entry)
    return groups


def _first_obs_sha(episode: Any) -> str:
    observations = episode_fields(episode)[0]
    first = next(iter_steps(observations), None)
    return "" if first is None else step_digest(first)[2]


def match_writers(
    episodes_by_writer: Mapping[str, Sequence[Any]], expected: Mapping[str, Any]
) -> dict[int, str]:
    """Match expected writer indices to actual writers; return ``{expected index: actual key}``.

    Writers may come back in any order; they are matched by the sequence of their episodes'
    first-observation sha256s. A single writer on each side is matched without comparing, so that
    ``assert_episode_matches`` reports the precise difference.
    """
    groups = expected_by_writer(expected)
    n_writers = int(expected.get("writers", len(groups)))
    assert len(groups) == n_writers, f"expected file lists {len(groups)} writers, says {n_writers}"
    assert len(episodes_by_writer) == n_writers, (
        f"{len(episodes_by_writer)} writers found ({sorted(episodes_by_writer)}), "
        f"expected {n_writers}"
    )
    if n_writers == 1:
        return {next(iter(groups)): next(iter(episodes_by_writer))}
    wanted = {
        index: tuple(entry["observations"][0]["sha256"] for entry in entries)
        for index, entries in groups.items()
    }
    actual = {
        key: tuple(_first_obs_sha(ep) for ep in episodes)
        for key, episodes in episodes_by_writer.items()
    }
    mapping: dict[int, str] = {}
    unused = dict(actual)
    for index, signature in sorted(wanted.items()):
        key = next((k for k, sig in unused.items() if sig == signature), None)
        assert key is not None, (
            f"no writer matches expected writer {index} (first observations "
            f"{[s[:12] for s in signature]}); actual writers: "
            f"{ {k: [s[:12] for s in sig] for k, sig in actual.items()} }"
        )
        mapping[index] = key
        del unused[key]
    return mapping


def assert_recording_matches(
    episodes_by_writer: Mapping[str, Sequence[Any]], expected: Mapping[str, Any]
) -> dict[int, str]:
    """Assert every writer's episodes equal the expected ones, in order; return the writer match."""
    mapping = match_writers(episodes_by_writer, expected)
    for index, entries in expected_by_writer(expected).items():
        key = mapping[index]
        episodes = episodes_by_writer[key]
        assert len(episodes) == len(entries), (
            f"writer {key}: {len(episodes)} episodes, expected {len(entries)}"
        )
        for i, (episode, entry) in enumerate(zip(episodes, entries, strict=True)):
            assert_episode_matches(*episode_fields(episode), entry, where=f"writer {key} ep {i}")
    return mapping


def _episode_key(observations: Any, actions: Any, rewards: Any) -> tuple[Any, ...]:
    obs = tuple(step_digest(o)[2] for o in iter_steps(observations))
    acts = () if _is_empty_quirk(actions) else tuple(step_digest(a)[2] for a in iter_steps(actions))
    rews = tuple(float(r) for r in np.asarray(rewards, dtype=np.float64).reshape(-1))
    return obs, acts, rews


def _entry_key(entry: Mapping[str, Any]) -> tuple[Any, ...]:
    return (
        tuple(d["sha256"] for d in entry["observations"]),
        tuple(d["sha256"] for d in entry["actions"]),
        tuple(float(r) for r in entry["rewards"]),
    )


def assert_episodes_match_in_some_order(
    episodes: Sequence[Any], expected: Mapping[str, Any], *, complete: bool = True
) -> list[dict[str, Any]]:
    """Assert a flat episode sequence (writers unknown) is the expected episodes in a valid order.

    Each episode is matched to an expected entry with the same content; each writer's episodes must
    keep their relative order. With ``complete``, every expected episode must be present.

    Returns:
        The matched expected entry for each episode, in the order given.
    """
    entries = list(expected["episodes_in_writer_order"])
    pending: dict[tuple[Any, ...], list[int]] = {}
    for position, entry in enumerate(entries):
        pending.setdefault(_entry_key(entry), []).append(position)
    matched: list[dict[str, Any]] = []
    last_position: dict[int, int] = {}
    for i, episode in enumerate(episodes):
        fields = episode_fields(episode)
        candidates = pending.get(_episode_key(*fields))
        if not candidates:
            # Compare against the entry with the same first observation for a precise message.
            sha = _first_obs_sha(fields)
            near = [e for e in entries if e["observations"][0]["sha256"] == sha]
            if near:
                assert_episode_matches(*fields, near[0], where=f"episode {i}")
            raise AssertionError(f"episode {i} (first observation {sha[:12]}) matches no entry")
        position = candidates.pop(0)
        entry = entries[position]
        writer = int(entry["writer"])
        assert position > last_position.get(writer, -1), (
            f"episode {i} comes before an earlier episode of writer {writer}"
        )
        last_position[writer] = position
        assert_episode_matches(*fields, entry, where=f"episode {i}")
        matched.append(entry)
    if complete:
        missing = sum(len(v) for v in pending.values())
        assert missing == 0, f"{missing} expected episodes never arrived"
    return matched
