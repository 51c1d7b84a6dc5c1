"""Reading traces the original way: :func:`scan_recorded_traces` and :class:`TraceRecordingReader`.

Kept for code written against the original gym-recording; new code should use
:func:`gym_recording.load`. Both are thin layers over the reader (:mod:`gym_recording.read`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from gym_recording.format.fields import join_fields
from gym_recording.format.manifest import Manifest
from gym_recording.read.recording import load, read_batch, read_manifests
from gym_recording.storage import Storage, open_storage

__all__ = ["TraceRecordingReader", "scan_recorded_traces"]


def _per_step(field: Any, n: int) -> Any:
    """A Dict or Tuple field as the original handed it: one dict (or list) per step.

    Each leaf's row ``t`` goes into step ``t``'s; any other field is returned as it is.
    """
    if isinstance(field, dict):
        rows = {k: _per_step(v, n) for k, v in field.items()}
        return [{k: r[t] for k, r in rows.items()} for t in range(n)]
    if isinstance(field, tuple):
        leaves = [_per_step(v, n) for v in field]
        return [[r[t] for r in leaves] for t in range(n)]
    return field


def scan_recorded_traces(
    directory: str | os.PathLike[str],
    episode_cb: Callable[[Any, Any, Any], Any] | None = None,
    max_episodes: int | None = None,
) -> None:
    """Call ``episode_cb(observations, actions, rewards)`` for every episode in ``directory``.

    As the original did: observations and actions of a Box or Discrete space are one array
    (``[N + 1, ...]`` and ``[N, ...]``); of a Dict or Tuple space, a list of one dict or
    list per step (:func:`gym_recording.load` gives them as dicts and tuples of arrays).

    Args:
        directory: The recording directory.
        episode_cb: Called once per episode, in recording order. Raise from it to stop early.
        max_episodes: Stop after this many episodes (0: none); ``None`` reads them all.

    Raises:
        TraceFormatError: a file of the recording does not follow the format.
        TypeError: ``max_episodes`` is not an int.
        ValueError: ``max_episodes`` is negative.

    Example:
        >>> import tempfile, numpy as np
        >>> from gym_recording import TraceRecording
        >>> d = tempfile.mkdtemp()
        >>> with TraceRecording(d) as rec:
        ...     rec.add_reset(np.zeros(3))
        ...     rec.add_step(0, np.ones(3), 1.0)
        >>> scan_recorded_traces(d, lambda o, a, r: print(o.shape, a.shape, r.shape))
        (2, 3) (1,) (1,)
    """
    if max_episodes is not None and (
        not isinstance(max_episodes, (int, np.integer)) or isinstance(max_episodes, bool)
    ):
        msg = f"max_episodes must be an int or None, got {max_episodes!r:.60}"
        raise TypeError(msg)
    if max_episodes is not None and max_episodes < 0:
        msg = f"expected max_episodes to be 0 or more (or None for all), got {max_episodes}"
        raise ValueError(msg)
    if max_episodes == 0:
        return
    with load(directory) as rec:
        for n, ep in enumerate(rec, start=1):
            if episode_cb is not None:
                steps = ep.length
                obs, acts = _per_step(ep.observations, steps + 1), _per_step(ep.actions, steps)
                episode_cb(obs, acts, ep.rewards)
            if max_episodes is not None and n >= max_episodes:
                return


class TraceRecordingReader:
    """The original reader's interface: list batches, then read the episodes of one batch.

    Episodes come back as dicts with ``observations``, ``actions``, ``rewards`` (as
    :func:`scan_recorded_traces` gives them) and the version 2 keys; an episode split across
    batches comes back as its parts.

    Args:
        directory: The recording directory.

    Example:
        >>> import tempfile, numpy as np
        >>> from gym_recording import TraceRecording
        >>> d = tempfile.mkdtemp()
        >>> with TraceRecording(d) as rec:
        ...     rec.add_reset(np.zeros(3))
        >>> rdr = TraceRecordingReader(d)
        >>> [len(rdr.get_recorded_episodes(b)) for b in rdr.get_recorded_batches()]
        [1]
        >>> rdr.close()
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = os.fspath(directory)
        self._storage: Storage = open_storage(self.directory, create=False)
        self._where: dict[str, tuple[Manifest, int]] = {}

    def get_recorded_batches(self) -> list[dict[str, Any]]:
        """The batch entries of every manifest in the directory, in reading order."""
        out: list[dict[str, Any]] = []
        for m in read_manifests(self._storage, self.directory):
            for i, b in enumerate(m.batches):
                self._where[b.fn] = (m, i)
                out.append({"first": b.first, "len": b.len, "fn": b.fn, "continues": b.continues})
        return out

    def get_recorded_episodes(self, batch: dict[str, Any]) -> list[dict[str, Any]]:
        """The decoded episode objects of one batch entry from :meth:`get_recorded_batches`.

        Raises:
            TypeError: ``batch`` is not such an entry.
            KeyError: no manifest lists its batch (now).
            TraceFormatError: the batch's files do not follow the format.
        """
        fn = batch.get("fn") if isinstance(batch, dict) else None
        if not isinstance(fn, str):
            msg = f"expected a batch entry dict from get_recorded_batches(), got {batch!r:.60}"
            raise TypeError(msg)
        if fn not in self._where:
            self.get_recorded_batches()
        if fn not in self._where:
            msg = f"no manifest of {self.directory!r} lists a batch {fn!r}"
            raise KeyError(msg)
        m, i = self._where[fn]
        b = read_batch(self._storage, self.directory, m, i)
        keys = ["observations", "actions", "rewards", "options", "infos", "part", "continues"]
        out = [{**{k: getattr(b, k)[j] for k in keys}, **b.keys[j]} for j in range(len(b))]
        for ep in out:  # (a part's per-step lists, which the reader joins first: stacked here)
            n = len(ep["rewards"])
            for key, rows in (("observations", n + 1), ("actions", n)):
                ep[key] = _per_step(join_fields([ep[key]], drop_first=False), rows)
        return out

    def close(self) -> None:
        """Nothing to release: arrays keep their files mapped for as long as they live."""
