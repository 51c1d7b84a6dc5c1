"""A vector env's steps as they come, one row per vector step: :class:`Columns`.

The vector wrapper's step copies the batched arrays here (no work per sub-env); the
sub-envs' rows then go to their recordings at once (:mod:`gym_recording.record.rows`).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

__all__ = ["COLUMN_BYTES", "COLUMN_STEPS", "Columns"]

#: Vector steps the columns hold before they are handed to the sub-envs' recordings, and
#: the most bytes they may take.
COLUMN_STEPS = 1024
COLUMN_BYTES = 16 * 1024 * 1024


class Columns:
    """A vector env's steps as they come: one row per vector step of each batched array.

    :meth:`put` copies a step's batched observations, actions, rewards and flags into row
    ``t`` of preallocated columns (a few NumPy copies, no work per sub-env); the vector
    wrapper keeps the final observations of sub-envs that ended under ``SAME_STEP`` in
    :attr:`final`. Once they are full (``t == size``), the wrapper cuts each sub-env's
    episodes out of the columns and hands each its rows
    (:meth:`~gym_recording.TraceRecording.add_rows`).

    Args:
        obs: A batched observation, ``[n, ...]`` (its dtype and shape are the layout).
        act: A batched action, ``[n, ...]``.
        n: The number of sub-envs.
    """

    def __init__(self, obs: np.ndarray, act: np.ndarray, n: int) -> None:
        row = max(1, (obs.nbytes + act.nbytes) // n + 10) * n
        self.size = max(8, min(COLUMN_STEPS, COLUMN_BYTES // row))
        self.obs = np.empty((self.size, *obs.shape), obs.dtype)
        self.act = np.empty((self.size, *act.shape), act.dtype)
        self.rew = np.empty((self.size, n), np.float64)
        self.term = np.empty((self.size, n), np.bool_)
        self.trunc = np.empty((self.size, n), np.bool_)
        self.times = np.empty(self.size, np.float64)
        # Each row of each column, as a view (assigning to a view's [...] is the cheapest copy)
        self._rows = [
            (self.obs[t], self.act[t], self.rew[t], self.term[t], self.trunc[t])
            for t in range(self.size)
        ]
        self._layout = (obs.dtype, obs.shape, act.dtype, act.shape, (n,))
        #: Rows filled; ``final[(t, i)]``: sub-env ``i``'s final observation at row ``t``.
        self.t = 0
        self.final: dict[tuple[int, int], np.ndarray] = {}

    def fits(self, obs: Any, actions: Any, rewards: Any, terms: Any, truncs: Any) -> bool:
        """Whether a step's arrays are exactly what the columns hold (else: one by one)."""
        ndarray = np.ndarray
        odt, oshape, adt, ashape, n = self._layout
        return (
            type(obs) is ndarray
            and type(actions) is ndarray
            and type(rewards) is ndarray
            and type(terms) is ndarray
            and type(truncs) is ndarray
            and obs.shape == oshape
            and actions.shape == ashape
            and rewards.shape == terms.shape == truncs.shape == n
            and (obs.dtype is odt or obs.dtype == odt)
            and (actions.dtype is adt or actions.dtype == adt)
            and rewards.dtype.kind in "biuf"
        )

    def put(
        self, obs: np.ndarray, actions: np.ndarray, rewards: Any, terms: Any, truncs: Any
    ) -> None:
        """Store one vector step in row ``t`` (checked by :meth:`fits`)."""
        t = self.t
        o, a, r, te, tr = self._rows[t]
        o[...] = obs
        a[...] = actions
        r[...] = rewards
        te[...] = terms
        tr[...] = truncs
        self.times[t] = time.time()
        self.t = t + 1
