"""Batches out of a recording's buffer: :class:`BatchingMixin`.

Part of :class:`~gym_recording.TraceRecording` (whose buffer and episodes it works on, declared
below): when the buffer holds a batch, the completed episodes (and the open one's steps so
far, as a part it continues from, when it alone fills a batch) are handed to the
:class:`~gym_recording.record.writer.BatchWriter`, one batch in flight at a time. While
writes fail, the episodes pile up; where their batches would have ended is noted, so that
each is written by itself once the writes succeed again.
"""

from __future__ import annotations

from collections.abc import Callable

from gym_recording.format.batch import Span
from gym_recording.record import buffer, lifetime
from gym_recording.record.buffer import Field, OpenSpan, Rewards
from gym_recording.record.infos import Values
from gym_recording.record.steps import Recorders
from gym_recording.record.writer import MAX_BATCH_EPISODES, BatchWriter

__all__ = ["BatchingMixin"]


class BatchingMixin:
    """Handing batches to the writer, for :class:`~gym_recording.TraceRecording`."""

    _open: OpenSpan | None
    _pending: list[Span]
    _cuts: list[int]
    _writer: BatchWriter
    _values: Values
    _recorders: Recorders
    _rew: Rewards
    _act: Field
    _obs: Field
    _frames: buffer.FrameStore | None
    _frame_rows: int
    _resets: int
    _room: int
    _check_usable: Callable[[str], None]
    _sync_room: Callable[[], None]

    @lifetime.serialized
    def _make_room(self) -> None:
        """The buffer holds ``_room`` steps inside an episode: write out what can be written.

        Completed episodes are written if there are any (the open episode's steps move to the
        front of the buffer). An open episode alone (or one with rendered frames, which are
        not moved) is given more room, up to its split size, then written as a part that
        continues in the next batch (FORMAT.md §4).
        """
        ep = self._open
        if ep is None:  # (ended by a close in another thread, which this call waited for)
            return self._check_usable("add_step")
        steps = len(self._rew)
        rendered = ep.frame_start >= 0
        if (
            (not self._pending or rendered)
            and steps < self._writer.split_steps
            and not self._values.full
            and not (rendered and self._frames.n >= self._frame_rows)  # type: ignore[union-attr]
        ):
            self._room = self._writer.split_steps
            self._sync_room()
            return
        retry_at = self._writer.retry_at
        if retry_at and steps < retry_at:  # (writes fail, and no retry is due: nothing written)
            # As the batch would be written: the episodes completed since the last, if any;
            # else the open episode's part, once it fills a batch.
            self._note_cut()
            frames = rendered and self._frames.n - ep.frame_start >= self._frame_rows  # type: ignore[union-attr]
            part = steps - ep.act_start  # (its steps: a part of none is no part)
            if part and (part >= self._writer.split_steps or self._values.full or frames):
                with lifetime.uninterrupted():
                    self._batch_ends()  # (the episodes before it, if any)
                    self._cut_part(ep, steps)
                    self._batch_ends()
            self._room = min(retry_at, ep.act_start + self._writer.split_steps)
            self._sync_room()
            return
        if not self._pending:
            if not self._wait():  # (first: a Ctrl-C there leaves the episode as it was, uncut)
                return
            with lifetime.uninterrupted():  # (the part goes with its batch, alone)
                self._cut_part(ep, steps)
                self._hand_over()
        self._submit_batch()

    def _cut_part(self, ep: OpenSpan, steps: int) -> None:
        """End the open episode's rows so far (``steps`` steps) as a part it continues from."""
        frames = self._frames.n if ep.frame_start >= 0 else -1  # type: ignore[union-attr]
        self._pending.append(ep.part_so_far(steps + self._resets, steps, frames))
        # The next part starts at the last observation (and frame), which both parts hold.
        ep.obs_start = steps + self._resets - 1
        ep.act_start = steps
        self._obs.begin_part(ep.obs_start)
        if ep.frame_start >= 0:
            ep.frame_start = self._frames.n - 1  # type: ignore[union-attr]
            self._frames.begin_part(ep.frame_start)  # type: ignore[union-attr]
        ep.part += 1
        if ep.infos is not None:  # (the next part's first info is this one's last)
            self._recorders.withdraw_rows()  # (the part takes the rows)
            rows, ep.info_rows = ep.info_rows, None
            ep.infos = ep.infos[-1:] if rows is None else rows.dicts(len(rows) - 1)

    @lifetime.serialized
    def _submit_batch(self, *, background: bool = False) -> None:
        """Hand the completed episodes (and parts) to the writer, and have it write them."""
        while self._pending:
            if not self._wait():  # one batch in flight at a time keeps the write order
                return
            with lifetime.uninterrupted():
                self._hand_over()
            if not self._pending:
                break
            self._writer.launch()  # (one of the batches kept while writes failed)
        self._writer.launch(background=background)  # (interrupted: the next flush writes it)
        self._room = self._writer.target_steps
        self._sync_room()

    def _wait(self) -> bool:
        """Wait for the batch in flight; ``False`` (kept for the call to raise) if it failed."""
        if self._writer.wait_or_keep((len(self._rew.buf) >> 3) + self._resets):
            return True
        self._room = self._writer.retry_at
        if (ep := self._open) is not None:  # (its part is cut before it outgrows a batch)
            self._room = min(self._room, ep.act_start + self._writer.split_steps)
        self._sync_room()
        return False

    def _hand_over(self) -> None:
        """Give the writer the pending episodes' rows, up to the first cut, if any.

        The rest (see :meth:`_note_cut`), and the open episode's rows, stay at the front.
        """
        k = self._cuts[0] if self._cuts else len(self._pending)
        pending, rest, ep, store = self._pending[:k], self._pending[k:], self._open, self._frames
        last = pending[-1]
        obs = self._obs.take(0, last.obs_stop)
        act = self._act.take(0, last.act_stop)
        rewards = self._rew.take(last.act_stop)
        frames = None
        if store is not None and (stop := max(sp.frame_stop for sp in pending)) > 0:
            frames = store.take(0, stop)
        kept = rest[0] if rest else ep
        keep_obs = kept.obs_start if kept is not None else len(self._rew) + self._resets
        keep_act = kept.act_start if kept is not None else len(self._rew)
        self._obs.release(keep_obs)
        self._act.release(keep_act)
        self._rew.release(keep_act)
        keep_frames = 0
        if store is not None:
            starts = [
                sp.frame_start for sp in (*rest, ep) if sp is not None and sp.frame_start >= 0
            ]
            keep_frames = min(starts, default=store.n)
            store.release(keep_frames)
        self._resets -= keep_obs - keep_act
        _rebase(rest, keep_obs, keep_act, keep_frames, ep)
        self._pending, self._cuts = rest, [c - k for c in self._cuts[1:]]
        if not rest:  # (the next batch's values: the open episode's, counted anew)
            self._batch_ends()
        self._writer.submit(obs, act, rewards, pending, frames)

    def _note_cut(self) -> None:
        """While writes fail, end a batch of the pending episodes where it would be written.

        Each is then handed over by itself (:meth:`_hand_over`), within a batch's bounds.
        """
        if not self._writer.retry_at or not self._pending:
            return
        since = self._cuts[-1] if self._cuts else 0
        if since == len(self._pending):
            return
        steps = self._pending[-1].act_stop - self._pending[since].act_start
        frames = False  # (the frames since the last cut fill a batch)
        if self._frames is not None:
            firsts = [sp.frame_start for sp in self._pending[since:] if sp.frame_start >= 0]
            frames = self._frames.n - min(firsts, default=self._frames.n) >= self._frame_rows
        if (
            self._values.full
            or frames
            or steps >= self._writer.target_steps
            or len(self._pending) - since >= MAX_BATCH_EPISODES
        ):
            self._batch_ends()

    def _batch_ends(self) -> None:
        """End a batch of the pending episodes here (if any since the last); count anew."""
        if self._pending and len(self._pending) > (self._cuts[-1] if self._cuts else 0):
            self._cuts.append(len(self._pending))
        self._values.clear()  # (the next batch's values counted from here: the open episode's)
        steps, ep = len(self._rew), self._open
        obs, act = (ep.obs_start, ep.act_start) if ep else (steps + self._resets, steps)
        self._values.count(self._obs.carried(obs) + self._act.carried(act))


def _rebase(spans: list[Span], obs: int, act: int, frames: int, ep: OpenSpan | None) -> None:
    """Index ``spans`` and the open episode ``ep`` anew, in buffers that lost rows to a write.

    Their first ``obs`` observation, ``act`` action and ``frames`` frame rows went.
    """
    for sp in spans:
        sp.obs_start, sp.obs_stop = sp.obs_start - obs, sp.obs_stop - obs
        sp.act_start, sp.act_stop = sp.act_start - act, sp.act_stop - act
        if sp.frame_start >= 0:
            sp.frame_start, sp.frame_stop = sp.frame_start - frames, sp.frame_stop - frames
    if ep is not None:  # (its stops are not set yet)
        ep.obs_start -= obs
        ep.act_start -= act
        if ep.frame_start >= 0:
            ep.frame_start -= frames
        if ep.flagged_at >= 0:
            ep.flagged_at -= act
