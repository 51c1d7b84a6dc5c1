"""The recording: episodes collected step by step into a buffer, and handed over in batches.

:class:`TraceRecording` is what the wrappers feed, and is usable on its own. It keeps the
open episode and the completed ones waiting for their batch (as rows of the buffer:
:class:`~gym_recording.format.batch.Span`), splits an episode longer than a batch into
parts, and hands each batch to its :class:`~gym_recording.record.writer.BatchWriter`.
Observations and actions are copied as they arrive (:mod:`~gym_recording.record.buffer`);
a wrapper's steps reach the buffer through a step recorder (:mod:`~gym_recording.record.steps`).
"""

from __future__ import annotations

import itertools
import logging
import os
import secrets
import struct
import tempfile
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn

import msgspec

from gym_recording._errors import RecordingClosedError, RecordingError
from gym_recording.format.batch import Span
from gym_recording.format.codec import make_compressor
from gym_recording.record import buffer, lifetime
from gym_recording.record import steps as _steps
from gym_recording.record.batching import BatchingMixin
from gym_recording.record.buffer import Field, OpenSpan, Rewards
from gym_recording.record.head import manifest_head
from gym_recording.record.infos import Values
from gym_recording.record.rows import RowsMixin
from gym_recording.record.writer import (
    MAX_BATCH_EPISODES,
    MAX_BATCH_STEPS,
    BatchWriter,
    checked_batch_bytes,
)
from gym_recording.storage import LocalStorage, open_storage

if TYPE_CHECKING:
    from typing_extensions import Self  # (typing.Self from Python 3.11)

__all__ = ["TraceRecording"]

logger = logging.getLogger(__name__)


_writer_counter = itertools.count()

_pack_reward = struct.Struct("<d").pack  # (a reward's bytes, as Rewards holds them)
_get_ident = threading.get_ident


class TraceRecording(RowsMixin, BatchingMixin):
    """A buffer of episodes that writes them to a directory in batches.

    Feed it with :meth:`add_reset` and :meth:`add_step` (the wrappers do this for you). Every
    observation and action is copied when it arrives, so envs may reuse their buffers.
    Episodes are written when about ``batch_bytes`` have accumulated, and at :meth:`close`,
    which runs by itself at interpreter exit. What is not yet written is lost if the process
    is killed.

    A value that cannot be stored exactly (a vector reward, an info nested past 100
    levels...) is refused with a :class:`RecordingError`: its episode is cut at its last
    stored step, and recording goes on with the next :meth:`add_reset`. A batch that cannot
    be written stays buffered, tried again once twice as many steps are (and at close): the
    call that met it records what it brought, then raises a :class:`WriteError`. It cannot
    be copied or pickled, and a forked child cannot record into it (make one in the child).

    Another thread than the one stepping may close it, or end, start and write its episodes
    (a watchdog, a checkpoint thread, exit closing what a daemon thread records): such a
    call waits for a step in flight, and a step begun meanwhile waits for the call, so that
    every step that returns is written whole (after a close, one raises
    :class:`RecordingClosedError`). Steps themselves take no lock.

    Args:
        directory: Where to write; created if missing. ``None`` makes a fresh directory under
            the system's temporary directory. An fsspec URL (``s3://``, ``gs://``,
            ``memory://`` ...) writes there (the ``remote`` extra).
        batch_bytes: The size a batch (blob plus JSON) aims at. Steps per batch adapt toward it,
            within 1..50000.
        metadata: A JSON-able dict stored in the manifest.
        env_id: The environment's id, stored in the manifest.
        env_spec: The environment's spec as a JSON-able dict.
        observation_space: The observation space, serialised into the manifest.
        action_space: The action space, serialised into the manifest.
        record_infos: Whether info dicts passed in are kept (otherwise they are ignored).
        storage_options: For a URL ``directory``, options for its filesystem, e.g.
            ``{"endpoint_url": ...}``; without them the standard configuration applies
            (``AWS_ENDPOINT_URL``, fsspec's config). Ignored for local paths.
        compression: ``"zstd"`` compresses each array that shrinks, losslessly, on a writer
            thread (FORMAT.md §6.2), for readers of gym-recording 2.1 or later; batches then
            aim at ``batch_bytes`` on disk. ``None`` (the default) writes arrays raw:
            zero-copy, and readable by every version 1 and 2.0 reader.
        compression_level: zstd's level, 1 (fastest) to 22 (smallest); default 3.
        render_fps: The frame rate of the environment's rendered frames (its
            ``metadata["render_fps"]``), stored in the manifest for players and videos of the
            frames passed as ``render_frame``.

    Example:
        >>> import tempfile, numpy as np, gym_recording
        >>> d = tempfile.mkdtemp()
        >>> rec = TraceRecording(d)
        >>> rec.add_reset(np.zeros(2, np.float32), seed=7)
        >>> rec.add_step(1, np.ones(2, np.float32), 0.5, terminated=True)
        >>> rec.close()
        >>> with gym_recording.load(d) as r:
        ...     ep = r[0]
        ...     ep.observations.shape, ep.actions.tolist(), ep.seed, ep.terminated
        ((2, 2), [1], 7, True)
    """

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        *,
        batch_bytes: int = 5_000_000,
        metadata: Mapping[str, Any] | None = None,
        env_id: str | None = None,
        env_spec: Any = None,
        observation_space: Any = None,
        action_space: Any = None,
        record_infos: bool = False,
        storage_options: dict[str, Any] | None = None,
        compression: str | None = None,
        compression_level: int | None = None,
        render_fps: float | None = None,
    ) -> None:
        self.batch_bytes = batch_bytes = checked_batch_bytes(batch_bytes)
        compressor = make_compressor(compression, compression_level)
        self.writer_id = f"{next(_writer_counter)}.{os.getpid()}.{secrets.token_hex(5)}"
        # (_closing: closed with its last write in flight, by close(wait=False))
        self.closed, self._closing = False, False
        head = manifest_head(
            self.writer_id,
            env_id=env_id,
            env_spec=env_spec,
            observation_space=observation_space,
            action_space=action_space,
            metadata=metadata,
            record_infos=record_infos,
            render_fps=render_fps,
        )  # (checked before the directory is made)
        self.record_infos = bool(record_infos)
        if directory is None:
            directory = tempfile.mkdtemp(prefix="gym-recording-")
        self._storage = open_storage(directory, create=True, storage_options=storage_options)
        #: Where it writes: a URL, or an absolute path (a relative one is made absolute).
        self.directory = self._storage.location
        self._writer = BatchWriter(self._storage, self.writer_id, head, batch_bytes, compressor)
        #: ``"zstd"`` or ``None``: how arrays are stored.
        self.compression = compression
        self._pid, self._forks = os.getpid(), lifetime.forks
        #: Complete episodes handed to the buffer.
        self.episode_count = 0
        self._values = Values(batch_bytes)  # the buffered infos, options and per-step values
        self._obs = Field("observations", compressor=compressor, count=self._values.count)
        self._act = Field("actions", action_space, count=self._values.count)
        self._rew = Rewards()
        self._frames: buffer.FrameStore | None = None  # one frame per observation
        self._frame_rows = 0  # the frames a batch holds (as split_steps, for a frame's bytes)
        self._resets = 0  # buffered observation rows that follow no step (episode starts)
        self._room = MAX_BATCH_STEPS  # steps the buffer may hold before _make_room
        self._sized = False
        self._pending: list[Span] = []
        self._cuts: list[int] = []  # (while writes fail: where _pending's batches end)
        self._open: OpenSpan | None = None
        self._recorders = _steps.Recorders()
        self._lock = threading.RLock()  # (see lifetime.serialized)
        self._holder: int | None = None  # the thread in a serialized call
        self._stepper: int | None = None  # the thread in add_step, from its mark on
        early = not isinstance(self._storage, LocalStorage)  # (see lifetime.register)
        lifetime.register(self, self.directory, self.close, self._forget, early=early)
        logger.info("Recording traces to %s (writer %s)", self.directory, self.writer_id)

    @property
    def file_prefix(self) -> str:
        """The prefix of the files of the current segment."""
        return self._writer.file_prefix

    @property
    def batch_count(self) -> int:
        """Batches written so far."""
        return self._writer.batch_count

    @property
    def batches(self) -> list[dict[str, Any]]:
        """The manifest entries of the current segment's batches, as written."""
        return [msgspec.structs.asdict(e) for e in self._writer.entries]

    @property
    def steps(self) -> int:
        """Steps in the buffer (not yet written)."""
        return len(self._rew)

    @property
    def in_episode(self) -> bool:
        """Whether an episode is open: started by :meth:`add_reset`, not yet ended."""
        return self._open is not None

    # ---------------------------------------------------------------- feeding

    def _check_usable(self, what: str) -> None:
        if self._forks != lifetime.forks:
            msg = (
                f"{what}() in a forked child of the process that made this TraceRecording "
                f"(pid {self._pid}); its files and buffer are the parent's. Create a new "
                "TraceRecording (or wrapper) in the child to record there"
            )
            raise RecordingError(msg)
        with self._lock:  # (closing in another thread: closed once that is done)
            if self.closed:
                msg = f"{what}() on a closed TraceRecording; create a new one to record more"
                raise RecordingClosedError(msg)

    @lifetime.serialized
    def add_reset(
        self,
        observation: Any,
        *,
        seed: int | None = None,
        options: Any = None,
        info: Any = None,
        started_at: float | None = None,
        render_frame: Any = None,
        ended_at: float | None = None,
    ) -> None:
        """Start an episode with the observation ``reset`` returned (ending any open one).

        Args:
            observation: The reset observation.
            seed: The seed passed to ``reset``, if any.
            options: The options passed to ``reset``, if any.
            info: The reset info; kept only with ``record_infos=True``.
            started_at: When the episode started, in unix seconds (default: now); for
                episodes recorded elsewhere, as :func:`~gym_recording.tools.minari.import_minari`
                brings them.
            render_frame: What ``env.render()`` returned after the reset (``uint8[H, W,
                3]``): the episode then records a frame at every step, all of one size,
                stored as one ``uint8[N + 1, H, W, 3]`` array (FORMAT.md §4).
            ended_at: When the open episode, if any, ended (unix seconds; default: now), as
                :meth:`end_episode` takes it.

        Raises:
            RecordingError: a value cannot be stored (the message says which), or a frame
                of a new size comes while a batch could not be written; no episode starts.
            WriteError: a batch could not be written; the reset is recorded.
            TypeError, ValueError: ``started_at`` or ``ended_at`` is not a finite number
                (nothing changes).
        """
        if self.closed or self._forks != lifetime.forks:
            self._check_usable("add_reset")
        lifetime.fed(self)
        if seed is not None:
            buffer.check_seed(seed)
        if started_at is not None:
            started_at = buffer.seconds(started_at, "started_at")
        if ended_at is not None:
            ended_at = buffer.seconds(ended_at, "ended_at")
        if self._open is not None:
            self._end_episode(ended_at)
        if len(self._pending) >= MAX_BATCH_EPISODES:
            self._submit_batch()
        frame = None if render_frame is None else buffer.rgb_frame(render_frame, None, None)
        if frame is not None and self._frames is not None and frame.shape != self._frames.shape:
            self._submit_batch()  # (frames of another size: a new buffer, once it is empty)
            if self._pending:  # (not written: its frames, of the old size, are in the buffer)
                what = f"a rendered frame of shape {frame.shape} after {self._frames.shape}"
                raise self._writer.refusal(what)
            self._frames.close()
            self._frames = None
        kept_options = self._values.keep(options, "the reset options")
        kept_info = [self._values.keep(info, "the reset info")] if self.record_infos else None
        if frame is not None:
            if self._frames is None:
                self._frames = buffer.frame_store(frame.dtype, frame.shape, self._writer.compressor)
                self._frame_rows = self._writer.rows_within(self._frames.row_bytes())
                self._sized = False  # (batches are sized with the frames)
            self._frames.claim()  # (before the observation is stored)
        keys = buffer.start_keys(buffer.now() if started_at is None else started_at, seed)
        steps = len(self._rew.buf) >> 3
        rows = steps + self._resets
        store: Any = self._frames
        frame_start = -1 if frame is None else store.n
        ep = OpenSpan(rows, 0, steps, 0, keys, kept_options, kept_info, frame_start=frame_start)
        self._obs.begin_part(rows)
        try:
            if not self._obs.put(observation):
                self._refit(self._obs, observation, rows)
            if frame is not None:
                store.begin_part(frame_start)
                store.put(frame)
            self._resets, self._open = self._resets + 1, ep  # (at once: no interrupt between)
        except BaseException as exc:  # (refused, or interrupted: no episode is started)
            self._obs.truncate(rows)
            if frame is not None and store.n > frame_start:
                store.truncate(frame_start)
            if isinstance(exc, Exception):
                raise buffer.refusal("the reset observation", exc) from None
            raise
        try:
            if frame is not None and store.n >= self._frame_rows and self._pending:
                # (write the others at the next step; or, while writes fail, at their retry)
                self._room = min(self._room, max(steps, self._writer.retry_at))
            if self._writer.retry_at:  # (writes fail: its part is cut before it fills a batch)
                self._room = min(self._room, steps + self._writer.split_steps)
            if self._values.full:  # (options that fill the batch: written after one step)
                self._room = min(self._room, self._writer.write_after(steps))
            if not self._sized:
                self._layout_known()
            self._sync_room()
        finally:
            if self._writer.compressor is not None:
                self._settle(steps)
        self._writer.raise_kept()

    def add_step(
        self,
        action: Any,
        observation: Any,
        reward: Any,
        terminated: bool = False,
        truncated: bool = False,
        info: Any = None,
        render_frame: Any = None,
    ) -> None:
        """Record one step: the action taken and what ``step`` returned.

        Args:
            action: The action passed to ``step``.
            observation: The observation ``step`` returned.
            reward: The reward ``step`` returned: a real number (see
                :func:`~gym_recording.record.buffer.reward_value`).
            terminated: Whether the episode terminated at this step.
            truncated: Whether the episode was truncated at this step.
            info: The step's info; kept only with ``record_infos=True``.
            render_frame: What ``env.render()`` returned after the step: needed when the
                episode's reset had one, refused (a :class:`RecordingError`) when it had none.

        Raises:
            RecordingError: no episode is open (call :meth:`add_reset` first), or a value
                cannot be stored; then the episode is cut at its last stored step.
            WriteError: a batch could not be written; the step is recorded.
        """
        me = _get_ident()
        while True:  # (until no call of another thread holds the buffers: see _halt)
            ep = self._open
            if ep is None:
                self._check_usable("add_step")  # (once a call of another thread is done)
                if self._open is not None:  # (that call was its add_reset)
                    continue
                msg = (
                    "add_step() with no open episode (none was started, a refused value cut "
                    "it, or save_complete() wrote it whole, its last step having ended it): "
                    "call env.reset() (or add_reset(observation)) first"
                )
                raise RecordingError(msg)
            rewards = self._rew.buf
            if len(rewards) >> 3 >= self._room:
                try:
                    self._make_room()
                except Exception:  # (the episode ends before the step)
                    self._end(None)
                    raise
            try:
                self._stepper = me  # (first: a call of another thread waits for the step)
                if self._open is ep and ((holder := self._holder) is None or holder == me):
                    break
            except BaseException:
                self._stepper = None
                raise
            self._stepper = None  # (that call holds the buffers, or ended the episode)
            with self._lock:  # (once it is done, the step goes on as it then may)
                pass
        try:
            steps = len(rewards) >> 3
            what = "terminated and truncated (bools)"
            try:  # (every check before anything is kept: a refused step leaves no trace)
                terminated, truncated = bool(terminated), bool(truncated)
                what = "the reward"
                value = reward if type(reward) is float else buffer.reward_value(reward)
                if ep.frame_start >= 0 or render_frame is not None:
                    shape = self._frames.shape if self._frames is not None else None
                    render_frame = buffer.rgb_frame(render_frame, shape, ep.frame_start >= 0)
                    self._frames.claim()  # type: ignore[union-attr]
                what = "the action"
                if not self._act.put(action):
                    self._refit(self._act, action, steps)
                what = "the observation"
                if not self._obs.put(observation):
                    self._refit(self._obs, observation, steps + self._resets)
                if self.record_infos:
                    self._keep_info(info)  # (refused: it cut the episode)
                if render_frame is not None:
                    self._frames.put(render_frame)  # type: ignore[union-attr]
                if terminated or truncated:
                    self._flags(terminated, truncated)
                rewards += _pack_reward(value)  # (the step is kept: no interrupt lands after it)
            except Exception as exc:  # (refused: no trace of it, the episode ends before it)
                if self._open is ep:  # (not cut already, by an info refused)
                    self._cut(steps)
                self._stepper = None
                self._check_usable("add_step")  # (or ended by a close meanwhile)
                raise buffer.refusal(what, exc) from None
            except BaseException:  # (interrupted: no trace of the step, the episode goes on)
                self._cut(steps, end=False)
                raise
            if self._open is not ep:  # (meanwhile, by a close in a signal's handler, say)
                self._stepper = None
                self._check_usable("add_step")
            try:
                if not self._sized:
                    self._layout_known()
                frames: Any = self._frames  # (they fill a batch, whatever its steps)
                full = self._values.full or (
                    render_frame is not None and frames.n >= self._frame_rows
                )
                if full and self._room > self._writer.write_after(steps):
                    self._room = self._writer.write_after(steps)
                    self._sync_room()
            finally:  # (an interrupt above: the rows put are the env's arrays, taken now)
                if self._writer.compressor is not None:
                    self._settle(steps + 1)
        finally:
            self._stepper = None
        self._writer.raise_kept()

    def _keep_info(self, info: Any) -> None:
        """Keep the info of the step about to be stored (by add_step, or the C step recorder).

        Raises:
            RecordingError: ``info`` cannot be stored; the episode is cut before the step.
        """
        if self._recorders.keep_rows:  # (the rows may change: none is appended until synced)
            self._recorders.withdraw_rows()
        ep: Any = self._open
        try:
            self._values.keep_step_info(ep, info)
            if self._open is not ep:  # (ended meanwhile by a signal's handler: not its info)
                self._values.take_back(ep, ep.act_stop - ep.act_start)
            if self._values.full:
                self._room = min(self._room, self._writer.write_after(len(self._rew.buf) >> 3))
                self._sync_room()
            elif self._recorders.keep_rows:  # (the rows, and how many more fit)
                self._sync_room()
        except Exception as exc:
            self._cut(len(self._rew.buf) >> 3)
            raise buffer.refusal("the step's info", exc) from None
        except BaseException:  # (interrupted: the info goes, the step is not stored)
            self._cut(len(self._rew.buf) >> 3, end=False)
            raise

    def _settle(self, steps: int) -> None:
        """Settle this call's streamed rows: held back where the next add_step may cut them."""
        keep = steps >= self._room
        try:
            self._obs.settle(keep)
        finally:  # (an interrupt there: the step is stored, and so is its frame)
            if self._frames is not None:
                self._frames.settle(keep)

    def _refit(self, field: Field, value: Any, rows: int) -> None:
        """``value`` does not fit the layout of ``field`` (``rows`` rows): go per step."""
        field.fallback(value, rows)
        self._configure()

    def _halt(self) -> None:
        """Before a call that holds the buffers: see :func:`lifetime.serialized`."""
        if (self._recorders.halt() or self._stepper is not None) and not lifetime.step_ended(
            lambda: self._stepper or self._recorders.stepper() or None
        ):
            logger.error("a step in another thread did not end: %s is changed meanwhile", self)

    def _cut(self, steps: int, *, end: bool = True) -> None:
        """Take back a step stored in part after ``steps``; end the episode (or not: ``end``)."""
        self._act.truncate(steps)
        self._obs.truncate(steps + self._resets)
        del self._rew.buf[steps << 3 :]
        ep = self._open
        if ep is not None:
            if ep.flagged_at > steps:  # (the flags of the step taken back)
                ep.flagged_at = -1
            self._values.take_back(ep, steps - ep.act_start)
            if ep.frame_start >= 0:
                self._frames.truncate(ep.frame_start + steps - ep.act_start + 1)  # type: ignore[union-attr]
        if end:  # (its batch is written at the next step: a step takes no lock, see add_step)
            logger.warning("a value was refused: the episode in %s ends before it", self.directory)
            if self._end(None) >= max(self._writer.target_steps, self._writer.retry_at):
                self._room = min(self._room, len(self._rew.buf) >> 3)

    def _flags(self, terminated: Any, truncated: Any, steps: int | None = None) -> None:
        """The step about to be stored (the ``steps``-th buffered one) sets a flag."""
        ep: Any = self._open
        ep.keys["terminated"], ep.keys["truncated"] = bool(terminated), bool(truncated)
        ep.flagged_at = (len(self._rew.buf) >> 3) + 1 if steps is None else steps

    @lifetime.serialized
    def end_episode(self, *, ended_at: float | None = None) -> None:
        """End the open episode, if any (at ``ended_at``, unix seconds; default: now).

        It is written with the next batch. ``terminated``/``truncated`` are those of its last
        step (both false if the last step set neither: the episode was cut by a reset or a
        close). Raises a :class:`WriteError` (a batch could not be written) once it is ended,
        and a ``TypeError`` or ``ValueError`` for an ``ended_at`` that is not a finite number
        (before anything changes).
        """
        if ended_at is not None:
            ended_at = buffer.seconds(ended_at, "ended_at")
        self._end_episode(ended_at)
        self._writer.raise_kept()

    def _end_episode(self, ended_at: float | None) -> None:
        steps, retry_at = self._end(ended_at), self._writer.retry_at
        frames = self._frames is not None and self._frames.n >= self._frame_rows
        if steps >= max(self._writer.target_steps, retry_at) or (
            (self._values.full or frames) and steps + self._resets >= retry_at  # (resets alone)
        ):
            self._submit_batch()

    def _end(self, ended_at: float | None) -> int:
        """End the open episode, if any, unwritten: the steps buffered (-1: none was open)."""
        ep = self._open
        if ep is None:
            return -1
        steps = len(self._rew.buf) >> 3
        self._finish(ep, steps, steps + self._resets, ended_at)
        return steps

    def _finish(self, ep: OpenSpan, steps: int, obs_stop: int, ended_at: float | None) -> None:
        """End the open episode ``ep`` at ``steps`` buffered steps and ``obs_stop`` observations."""
        keys = ep.last_keys(steps, buffer.now() if ended_at is None else float(ended_at))
        ep.obs_stop, ep.act_stop = obs_stop, steps
        # (what a step being stored kept before its reward, if a signal's handler ends the
        # episode meanwhile, is not the episode's: its info, its rendered frame)
        if self.record_infos:
            self._values.take_back(ep, steps - ep.act_start)
        if ep.frame_start >= 0:
            frames: Any = self._frames
            frames.truncate(ep.frame_start + obs_stop - ep.obs_start)  # (if it put one more)
            ep.frame_stop = frames.n
        ep.keys, ep.options = keys, None if ep.part else ep.options
        self._recorders.sync(-1, None, self._values)  # (first: no step stored with no episode)
        self._open = None  # (a store, then a list's append: no signal is handled between)
        self._pending.append(ep)
        self.episode_count += 1
        if self._writer.retry_at:  # (writes fail: the episodes pile up)
            self._note_cut()

    # ---------------------------------------------------------------- the hot path

    def step_recorder(self, other: Callable[[Any, Any], None]) -> _steps.StepRecorder:
        """The recorder a wrapper hands each ``env.step`` result to: ``record(action, result)``.

        A gymnasium 5-tuple result is recorded as :meth:`add_step` records it; any other
        result (a legacy 4-tuple), or any result while no episode is open, goes to
        ``other(action, result)``. The C step recorder is used where it is built.
        """

        def slow(action: Any, result: Any) -> Any:
            if self._open is not None and type(result) is tuple and len(result) == 5:
                self.add_step(action, *result)  # (observation, reward, flags, info)
            else:
                other(action, result)
            return result

        recorder = _steps.step_recorder(
            slow, self._flags, self._stored_in_part, self._rew, accelerated=True
        )
        self._recorders.add(recorder)
        self._configure()
        self._sync_room()
        return recorder

    def _stored_in_part(self, exc: Exception | None) -> NoReturn:
        """The C step recorder stored a step in part (no memory): take it back, as add_step does.

        Raises:
            RecordingError: always; the episode ends at its last stored step.
        """
        self._cut(len(self._rew.buf) >> 3)  # (the rows, flags and info past the steps stored)
        raise buffer.refusal("the step", exc or MemoryError()) from None

    def _configure(self) -> None:
        """Tell the step recorders the buffer's layouts, and where infos go (if kept)."""
        keep_info = self._keep_info if self.record_infos else None
        self._recorders.configure(self._obs, self._act, keep_info)

    def _sync_room(self) -> None:
        """Tell the step recorders the room and rows of the open episode (see Recorders.sync).

        Not while a call holds the buffers (they have none then): at its end (:meth:`_resume`).
        """
        if self._holder is None:
            self._recorders.sync(self._room, self._open, self._values)
            if self._holder is not None:  # (a call of another thread began: its halt stands)
                self._recorders.halt()

    def _resume(self) -> None:
        if self._open is not None:  # (else they have no room, as the halt left them)
            self._recorders.sync(self._room, self._open, self._values)

    def _layout_known(self) -> None:
        """Once both fields have a layout: size batches by it, and tell the recorders."""
        if self._sized or self._obs.root is None or self._act.root is None:
            return
        self._sized = True
        row = self._obs.row_bytes() + self._act.row_bytes() + 8
        if self._frames is not None:
            row += self._frames.row_bytes()
        self._writer.size_for(row + 16, row)
        self._room = self._writer.target_steps
        if self._frames is not None:  # (a batch's frames, and its episodes' first frames)
            self._frames.reserve(self._frame_rows + 1)
        self._configure()
        self._sync_room()

    @lifetime.serialized
    def save_complete(self) -> None:
        """Write the completed episodes as one batch and update the manifest; wait for it.

        The blob is written first, then the batch JSON, then the manifest, each atomically.
        When it returns, every episode written is durable (it survives a power loss). An open
        episode whose last step ended it is complete, and written too (a step after it, which
        Gymnasium leaves undefined, raises a :class:`RecordingError`); another stays buffered.

        Raises:
            WriteError: a write failed (twice): nothing of it is published; it is retried.
        """
        self._check_usable("save_complete")
        if (ep := self._open) is not None and ep.flagged_at == len(self._rew.buf) >> 3:
            self._end(None)
        self._submit_batch()
        self._writer.raise_kept()
        self._writer.save()

    @lifetime.serialized
    def close(self, *, keep_empty: bool = True, wait: bool = True) -> None:
        """End the open episode, write everything buffered, and close. Safe to call twice.

        It runs by itself at exit, and as a ``multiprocessing`` worker exits (not in a forked
        child, for its parent's). What is not written when the process is killed is lost. A
        write that fails raises a :class:`WriteError` and keeps the rest for the next close.

        Args:
            keep_empty: Whether a recording of no episode still writes its manifest (its
                metadata, no episode). The wrappers pass ``False``: an env never reset (the
                spaces probe of ``AsyncVectorEnv``, say) leaves no file.
            wait: ``False`` returns once the last batch's write is started in the background:
                the recording takes no more steps; the next ``close()`` waits for the write
                (and raises its error). Closing many, do so for each, then close each again.
        """
        if self.closed and not self._closing:  # (also when it waited for another close)
            return
        if self._forks != lifetime.forks:
            self.closed = True
            logger.warning("not writing %s from a forked child: it is the parent's", self.directory)
            return
        try:
            self._end(None)  # (written by the next line, however many steps it has)
            self._submit_batch(background=not wait)
            self._writer.raise_kept()
            if not wait:
                self._closing = True
                return
            self._closing = False
            self._writer.finish(empty_manifest=keep_empty or self.episode_count > 0)
            logger.info("Wrote traces to %s", self.directory)
        except BaseException:  # (interrupted, or a write failed: the next close(), or exit,
            self._closing = True  # writes what is left)
            raise
        finally:
            self.closed = True
            self._sync_room()
            if not self._closing:  # (closed, not just waiting for its last write)
                self._obs.close()  # (their memory is freed: the recording takes no more)
                self._act.close()
                self._configure()  # (the step recorders let go of the fields' rows)
                if self._frames is not None:
                    self._frames.close()
                lifetime.unregister(self)

    def _forget(self) -> None:
        """In a forked child: no open episode, so that the checks refuse the next step."""
        self._open = self._holder = self._stepper = None
        self._lock = threading.RLock()  # (another thread of the parent's may have held it)
        for r in self._recorders:  # (a thread of the parent's may have been in its step)
            r.stepper = 0
        self._sync_room()

    __copy__ = __deepcopy__ = __reduce_ex__ = __getstate__ = lifetime.refuse_copy

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<TraceRecording {self.directory!r} writer={self.writer_id} {state}>"
