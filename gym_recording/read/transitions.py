"""Minibatches of transitions for offline RL on one machine, without PyTorch."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from operator import itemgetter
from typing import Any

import numpy as np

from gym_recording._errors import ExportError
from gym_recording.format.fields import as_array, field_length, map_leaves
from gym_recording.read.episode import Episode

__all__ = ["iter_transitions"]


def _concat(fields: list[Any], what: str) -> Any:
    """Join the per-episode fields (arrays, or dicts/tuples of them) along the step axis.

    Raises:
        ExportError: their steps are not of one shape (one is per-step values, say), or of
            dtypes no one dtype holds exactly (int64 and uint64, say).
    """
    head = fields[0]
    kinds = {_layout(f) for f in fields}
    if len(kinds) > 1:
        msg = (
            f"the episodes' {what} cannot be batched into transitions: they are of different "
            f"layouts ({', '.join(sorted(kinds))}); pick episodes of one layout"
        )
        raise ExportError(msg)
    if isinstance(head, dict):
        return {k: _concat([f[k] for f in fields], f"{what}[{k!r}]") for k in head}
    if isinstance(head, tuple):
        return tuple(_concat([f[i] for f in fields], f"{what}[{i}]") for i in range(len(head)))
    arrays = [as_array(f) for f in fields]
    shapes = {(a.ndim, a.shape[1:]) for a in arrays}
    if len(shapes) > 1:
        msg = (
            f"the episodes' {what} cannot be batched into transitions: their steps are of "
            f"different shapes ({', '.join(str(s[1]) for s in sorted(shapes))}), or some are "
            "per-step values; pick episodes of one layout"
        )
        raise ExportError(msg)
    dtypes = {a.dtype for a in arrays}
    if len(dtypes) > 1 and not _widens(dtypes):
        names = ", ".join(sorted(map(str, dtypes)))
        msg = (
            f"the episodes' {what} cannot be batched into transitions: they are of dtypes "
            f"{names}, which no one dtype holds exactly; pick episodes of one dtype"
        )
        raise ExportError(msg)
    return np.concatenate(arrays)


def _widens(dtypes: set[np.dtype[Any]]) -> bool:
    """Whether the dtype NumPy joins ``dtypes`` into holds each of their values exactly.

    Float32 into float64 does, int32 into float64, and anything into object (per-step
    values); int64 and uint64 into float64 do not.
    """
    joined = np.result_type(*dtypes)
    return joined.kind == "O" or all(_exact(d, joined) for d in dtypes)


def _exact(d: np.dtype[Any], joined: np.dtype[Any]) -> bool:
    """Whether a safe cast of ``d`` into ``joined`` keeps every value."""
    if not np.can_cast(d, joined, "safe"):
        return False
    if d.kind in "biu" and joined.kind in "fc":  # (ints within the float's mantissa)
        bits = 1 if d.kind == "b" else np.iinfo(d).bits - (d.kind == "i")
        return bits <= np.finfo(joined).nmant + 1
    return True


def _rows_checked(k: int, ep: Episode) -> bool:
    """True, or refuse the episode at position ``k``: one of other row counts.

    Each episode needs ``length + 1`` observations and ``length`` actions; a hand-made one of
    other counts would run its transitions into the next episode's.
    """
    for what, want, rule in (
        ("observations", ep.length + 1, "one more than its steps: the first is the reset's"),
        ("actions", ep.length, "one a step"),
    ):
        got = field_length(getattr(ep, what))
        if got != want:
            rows = "rows of different lengths" if got is None else f"{got} rows"
            msg = (
                f"the episode at position {k} (its index {ep.index}) cannot be cut into "
                f"transitions: it has {ep.length} rewards and {rows} of {what}, expected "
                f"{want} ({rule})"
            )
            raise ExportError(msg)
    return True


def _layout(field: Any) -> str:
    """What a field is, for :func:`_concat` to compare: a dict of keys, a tuple, or steps."""
    if isinstance(field, dict):
        return f"a dict of keys [{', '.join(sorted(map(repr, field)))}]"  # (in any order)
    if isinstance(field, tuple):
        return f"a tuple of {len(field)}"
    return "steps"


def iter_transitions(
    rec: Sequence[Episode],
    batch_size: int,
    *,
    seed: int | None = None,
    shuffle: bool = True,
    drop_last: bool = False,
) -> Iterator[dict[str, Any]]:
    """Yield minibatches of transitions from a recording, for offline-RL training loops.

    Each minibatch is a dict of numpy arrays with ``batch_size`` rows (the last may be smaller):
    ``obs``, ``action``, ``reward`` (float64), ``next_obs``, ``done`` (bool: the step
    *terminated* its episode, so a truncated episode's last step bootstraps as usual) and
    ``truncated`` (bool: the step truncated its episode, a time limit say; false on the last
    step of an episode cut by a reset or a close, which ended neither way).
    Observations and actions of Dict/Tuple spaces are dicts/tuples of arrays. With ``shuffle``
    the transitions of all episodes are shuffled together by ``numpy.random.default_rng(seed)``;
    otherwise they come in episode then step order. One pass over the data per call.

    The episodes' observations, actions and rewards are copied into memory once (observations
    once, not twice: ``next_obs`` rows are gathered from the same array).

    Args:
        rec: A :class:`~gym_recording.Recording` or any sequence of episodes.
        batch_size: Transitions per minibatch.
        seed: Seeds the shuffle; the same seed gives the same minibatches.
        shuffle: Shuffle transitions across episodes.
        drop_last: Skip the last minibatch if it is smaller than ``batch_size``.

    Yields:
        ``{"obs", "action", "reward", "next_obs", "done", "truncated"}`` dicts of arrays.

    Raises:
        TypeError, ValueError: ``batch_size`` is not a positive int, or ``rec`` is a path.
        ExportError: the episodes' observations (or actions) are not of one per-step shape,
            or an episode does not hold one observation more than its rewards and one
            action per reward.

    Example:
        >>> import numpy as np
        >>> from gym_recording import Episode
        >>> ep = Episode(np.arange(4.0)[:, None], np.array([0, 1, 0]), np.ones(3), terminated=True)
        >>> batches = list(iter_transitions([ep], 2, shuffle=False))
        >>> batches[0]["obs"].ravel().tolist(), batches[0]["next_obs"].ravel().tolist()
        ([0.0, 1.0], [1.0, 2.0])
        >>> batches[1]["done"].tolist(), batches[1]["truncated"].tolist()
        ([True], [False])
    """
    if not isinstance(batch_size, (int, np.integer)) or isinstance(batch_size, bool):
        msg = f"expected batch_size to be a positive int, got {batch_size!r}"
        raise TypeError(msg)
    if batch_size < 1:
        msg = f"expected batch_size to be a positive int, got {batch_size!r}"
        raise ValueError(msg)
    if isinstance(rec, (str, bytes, os.PathLike)):
        msg = (
            f"expected a Recording or a sequence of Episodes, got the path {rec!r}: "
            "pass gym_recording.load(path)"
        )
        raise TypeError(msg)
    # Zero-step episodes have no transition (and their empty actions may lack a dtype).
    episodes = [ep for k, ep in enumerate(rec) if ep.length > 0 and _rows_checked(k, ep)]
    if not episodes:
        return
    lengths = np.array([ep.length for ep in episodes], dtype=np.int64)
    total = int(lengths.sum())
    obs = _concat([ep.observations for ep in episodes], "observations")
    actions = _concat([ep.actions for ep in episodes], "actions")
    rewards = np.concatenate([np.asarray(ep.rewards, np.float64) for ep in episodes])
    # Transition k of episode e: observation row obs_start[e] + k, action row act_start[e] + k.
    act_start = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    obs_start = act_start + np.arange(len(episodes))
    episode_of = np.repeat(np.arange(len(episodes)), lengths)
    step_of = np.arange(total) - act_start[episode_of]
    obs_rows = obs_start[episode_of] + step_of
    done = np.zeros(total, dtype=bool)
    truncated = np.zeros(total, dtype=bool)
    last = act_start + lengths - 1
    done[last[np.array([ep.terminated for ep in episodes], dtype=bool)]] = True
    truncated[last[np.array([ep.truncated for ep in episodes], dtype=bool)]] = True

    order = np.random.default_rng(seed).permutation(total) if shuffle else np.arange(total)
    for lo in range(0, total, batch_size):
        idx = order[lo : lo + batch_size]
        if drop_last and len(idx) < batch_size:
            return
        rows = obs_rows[idx]
        yield {
            "obs": map_leaves(obs, itemgetter(rows)),
            "action": map_leaves(actions, itemgetter(idx)),
            "reward": rewards[idx],
            "next_obs": map_leaves(obs, itemgetter(rows + 1)),
            "done": done[idx],
            "truncated": truncated[idx],
        }
