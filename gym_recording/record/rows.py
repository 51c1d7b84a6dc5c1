"""A vector env's sub-env rows, stored at once: :meth:`TraceRecording.add_rows`.

The vector wrapper holds its sub-envs' steps in columns and hands each sub-env's rows to its
recording in one call. :class:`RowsMixin` is that call, part of
:class:`~gym_recording.TraceRecording` (whose buffer and episodes it works on, declared
below): the rows that fit the batch and the buffer's layout are stored at once, the others
one by one, as :meth:`~gym_recording.TraceRecording.add_reset` and
:meth:`~gym_recording.TraceRecording.add_step` store them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from gym_recording._errors import WriteError
from gym_recording.format.batch import Span
from gym_recording.record import lifetime
from gym_recording.record.buffer import Field, OpenSpan, Rewards, start_keys
from gym_recording.record.writer import MAX_BATCH_EPISODES, BatchWriter

__all__ = ["ROWS_AT_ONCE", "RowsMixin"]

#: Whether :meth:`RowsMixin.add_rows` stores rows at once where they fit (else row by row;
#: ``benchmarks/bench.py --ablate`` measures both).
ROWS_AT_ONCE = True
#: The arguments of :meth:`RowsMixin.add_rows` that hold a row each, as checked.
_ROW_ARGS = ("rewards", "actions", "observations", "terminated", "truncated", "times")


class RowsMixin:
    """:meth:`add_rows`, for :class:`~gym_recording.TraceRecording` (the rest is its own)."""

    record_infos: bool
    closed: bool
    episode_count: int
    _forks: int
    _open: OpenSpan | None
    _sized: bool
    _room: int
    _resets: int
    _pending: list[Span]
    _writer: BatchWriter
    _rew: Rewards
    _act: Field
    _obs: Field
    add_reset: Callable[..., None]
    add_step: Callable[..., None]
    end_episode: Callable[..., None]
    _end: Callable[[float | None], int]
    _flags: Callable[..., None]
    _finish: Callable[..., None]
    _note_cut: Callable[[], None]
    _sync_room: Callable[[], None]

    @lifetime.serialized
    def add_rows(
        self,
        actions: np.ndarray,
        observations: np.ndarray,
        rewards: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        times: np.ndarray,
        *,
        reset_first: bool,
    ) -> int:
        """Record rows that are each a reset or a step, as a vector env's sub-env takes them.

        Row ``j`` (``times[j]`` in unix seconds) is a reset if it is the first and
        ``reset_first`` is true, or if row ``j - 1`` set a flag (``NEXT_STEP``): it starts an
        episode as :meth:`add_reset` does (its action, reward and flags ignored). Any other
        row is a step, as :meth:`add_step` records it; one that sets a flag ends its episode.
        No infos or frames. Rows are stored at once, as many as the batch has room for at a
        time (a batch is written between), and one by one where they do not fit the layout.

        Args:
            actions: Each row's action, one array ``[T, ...]`` (ignored in reset rows).
            observations: Each row's observation, one array ``[T, ...]``: the reset
                observation of a reset row, else what the step returned.
            rewards: Each row's reward, ``[T]`` real numbers (ignored in reset rows).
            terminated: Whether each row's step terminated its episode, ``[T]`` bools.
            truncated: Whether each row's step truncated its episode, ``[T]`` bools.
            times: When each row was taken, ``[T]`` unix seconds (its episode's start for a
                reset row, its end for a row that sets a flag).
            reset_first: Whether row 0 is a reset (else it is a step of the open episode).

        Returns:
            The number of episodes the rows started (the last may be open: :attr:`in_episode`).

        Raises:
            RecordingError: as :meth:`add_reset` and :meth:`add_step`, for the row bringing it.
            ValueError: an argument is not an array of ``T`` rows, or a time is not a
                finite number (no row is recorded).
            WriteError: a batch could not be written; every row is recorded.
        """
        given = (rewards, actions, observations, terminated, truncated, times)
        t = len(rewards) if isinstance(rewards, np.ndarray) and rewards.ndim == 1 else -1
        for name, x in zip(_ROW_ARGS, given, strict=True):  # (before any row is recorded)
            if not isinstance(x, np.ndarray) or x.ndim < 1 or len(x) != t or t < 0:
                was = f"shape {x.shape}" if isinstance(x, np.ndarray) else type(x).__name__
                want = "a 1-d array" if t < 0 else f"an array of {t} rows (as the rewards)"
                raise ValueError(f"expected {name} to be {want}, got {was}")
        if not np.isfinite(times).all():
            raise ValueError("expected times to be finite numbers of unix seconds")
        lifetime.fed(self)
        done = np.logical_or(terminated, truncated)
        resets = np.zeros(t, np.bool_)
        resets[:1], resets[1:] = reset_first, done[:-1]
        at_once = (  # (a reset row that sets a flag: resets by the order they come, one by one)
            ROWS_AT_ONCE
            and not (self.record_infos or self.closed or self._forks != lifetime.forks)
            and rewards.dtype.kind in "biuf"
            and not (resets & done).any()
        )
        stepped = np.cumsum(~resets)  # the step rows up to each row
        rows = (actions, observations, rewards, terminated, truncated, times, resets, done)
        started, reset, failed, j = 0, reset_first, None, 0
        while j < t:  # (the rows that fit the batch at once, where the layout takes them)
            ep = self._open
            if at_once and self._sized and (ep is None) == reset and (not ep or ep.frame_start < 0):
                room = min(self._room, self._writer.target_steps) - (len(self._rew.buf) >> 3)
                stop = min(
                    int(np.searchsorted(stepped, (stepped[j - 1] if j else 0) + room - 1, "right")),
                    j + MAX_BATCH_EPISODES - 1 - len(self._pending),
                )
                if stop > j:
                    got = self._put_rows([x[j:stop] for x in rows])
                    if got is not None:
                        started, j, reset = started + got, stop, bool(done[stop - 1])
                        continue
                    at_once = False  # (not the layout: one by one)
            try:  # one row by itself (a batch written before it, as the calls one by one)
                if reset:
                    started, reset = started + 1, False
                    self.add_reset(observations[j], started_at=float(times[j]))
                    continue
                term, trunc = bool(terminated[j]), bool(truncated[j])
                reset = term or trunc
                self.add_step(actions[j], observations[j], rewards[j], term, trunc)
                if reset:
                    self.end_episode(ended_at=float(times[j]))
            except WriteError as exc:  # (the row is kept: the rows after it go on, then this)
                failed = failed or exc
                if reset and self._open is not None:  # (its episode ends at this row)
                    self._end(float(times[j]))
            finally:
                j += 1
        if failed is not None:
            raise failed
        return started

    def _put_rows(self, rows: list[np.ndarray]) -> int | None:
        """Store :meth:`add_rows`' rows at once: the episodes started (None: not the layout)."""
        actions, observations, rewards, terminated, truncated, times, resets, done = rows
        ep, steps = self._open, len(self._rew.buf) >> 3
        taken, starts, end, spans, opened = row_spans(
            resets, done, (terminated, truncated), times, steps + self._resets, steps
        )
        with lifetime.uninterrupted():  # (rows and episodes kept together, or neither)
            if self._act.put_rows(actions[taken]) and self._obs.put_rows(observations, starts):
                self._rew.buf += np.ascontiguousarray(rewards[taken], "<f8").tobytes()
                if ep is not None and end is not None:  # (the open episode ends there)
                    self._flags(terminated[end[0]], truncated[end[0]], end[1])
                    self._finish(ep, end[1], end[2], end[3])
                self._pending += spans
                self.episode_count += len(spans)
                self._note_cut()
                if opened is not None:
                    self._open = opened
                self._resets += len(starts)
                self._sync_room()
                return len(starts)
            self._act.truncate(steps)
            self._obs.truncate(steps + self._resets)
        return None


def row_spans(
    resets: np.ndarray,
    done: np.ndarray,
    flags: tuple[np.ndarray, np.ndarray],
    times: np.ndarray,
    obs0: int,
    steps: int,
) -> tuple[np.ndarray, list[int], Any, list[Span], OpenSpan | None]:
    """The episodes of rows that are each a reset (``resets``) or a step, taken at ``times``.

    (See ``TraceRecording.add_rows``.)

    Row ``j``'s observation is buffered row ``obs0 + j``; ``steps`` steps are buffered
    before the rows. Returns the step rows, the reset rows, where an episode open before the
    rows would end (the first end row, the steps and observations buffered up to it, and its
    time; ``None``: no row ends one), the episodes the rows start and end, and the one they
    leave open (``None``: none). Only the rows that start or end an episode are read one by one.
    """
    taken, starts, ends = np.flatnonzero(~resets), np.flatnonzero(resets), np.flatnonzero(done)
    times = np.asarray(times, np.float64)
    acts = np.cumsum(~resets) + steps  # buffered steps up to each row
    begun, first_acts = times[starts].tolist(), acts[starts].tolist()
    stops, closed, last_acts = ends.tolist(), times[ends].tolist(), acts[ends].tolist()
    terms, truncs = flags[0][ends].tolist(), flags[1][ends].tolist()
    end = (stops[0], last_acts[0], obs0 + stops[0] + 1, closed[0]) if stops else None
    spans: list[Span] = []
    firsts = zip(starts.tolist(), begun, first_acts, strict=True)
    # Each start's episode ends at the first end row after it (none: it stays open).
    for (r, at, a), e in zip(firsts, np.searchsorted(ends, starts).tolist(), strict=True):
        keys = start_keys(at)
        if e == len(stops):
            opened = OpenSpan(obs0 + r, 0, a, 0, keys, None, None)
            return taken, starts.tolist(), end, spans, opened
        keys["terminated"], keys["truncated"] = bool(terms[e]), bool(truncs[e])
        keys["ended_at"] = closed[e]
        spans.append(Span(obs0 + r, obs0 + stops[e] + 1, a, last_acts[e], keys, None, None))
    return taken, starts.tolist(), end, spans, None
