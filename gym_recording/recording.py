"""The recording buffer: collects steps into batches and hands them to storage.

:class:`TraceRecording` is usable on its own (the wrapper is a thin layer over it). Observations
and actions are copied, as they arrive, into one preallocated array per leaf of their structure
(a Box observation is one ``[rows, *shape]`` array; a Dict observation one array per key), so a
step costs a row assignment and no allocation. Completed episodes are flushed as a batch when
the batch holds about ``batch_bytes``; an episode longer than the buffer is written in parts.
"""

from __future__ import annotations

import atexit
import datetime
import itertools
import json
import logging
import os
import platform
import secrets
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from gym_recording import _format
from gym_recording._buffer import BytesLeaf, Field, ScalarLeaf, stack_numbers
from gym_recording._cext import speedups as _speedups
from gym_recording._errors import RecordingClosedError, RecordingError
from gym_recording._storage import PendingWrite, Storage, open_storage
from gym_recording._version import __version__

__all__ = ["TraceRecording"]

logger = logging.getLogger(__name__)

#: Steps per batch are clamped to this range (as in the original writer).
MIN_BATCH_STEPS = 1
MAX_BATCH_STEPS = 50_000
#: A batch of only zero-step episodes is flushed at this many episodes.
MAX_BATCH_EPISODES = 50_000
#: A writer starts a new manifest (segment) after this many batches.
SEGMENT_BATCHES = 1000
#: A batch is written in the recording thread when its write is expected to take less than this
#: share of the time the batch took to fill (see TraceRecording._submit_batch).
FOREGROUND_WRITE_SHARE = 0.02
#: While batches go to the background thread, every this many is written in the foreground to
#: measure what a write costs now.
FOREGROUND_PROBE_EVERY = 32

_writer_counter = itertools.count()
_open_recordings: dict[int, TraceRecording] = {}
_open_lock = threading.Lock()


def _close_open_recordings() -> None:
    """At interpreter exit, flush every recording that was not closed."""
    with _open_lock:
        recordings = list(_open_recordings.values())
    for rec in recordings:
        try:
            rec.close()
        except Exception:  # exit must go on; say what was lost
            logger.exception("could not flush the recording in %s at exit", rec.directory)


atexit.register(_close_open_recordings)


def _forget_open_recordings() -> None:
    """In a forked child: the parent's recordings are the parent's to flush, not its own."""
    global _open_lock
    _open_lock = threading.Lock()  # (it may have been held by another thread at the fork)
    _open_recordings.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_open_recordings)


class _WriteJob:
    """A batch's files, published in order (blob, batch JSON, manifest).

    Each file is ``(name, chunks, sync_directory)``: whether its rename is followed by an
    fsync of the directory (see TraceRecording._submit_batch). They go to the storage as one
    group (``Storage.write_files``), which locally writes and fsyncs all three before the
    first rename.

    Written in the background (``start``): on a thread of the C extension's that never takes
    the GIL, where the storage can (``LocalStorage.start_write_files``), else on a Python
    thread, which spends its time in write and fsync with the GIL released; either way the
    env keeps stepping meanwhile. Or in the caller's thread (``run``). An error is kept and
    raised by ``wait``. The job owns its bytes, so it can be retried if it fails.
    """

    def __init__(self, storage: Storage, files: list[tuple[str, list[Any], bool]]) -> None:
        self.storage = storage
        self.files = files
        self.done = 0  # files written
        self.error: BaseException | None = None
        self.thread: threading.Thread | None = None
        self.pending: PendingWrite | None = None  # the write on the C extension's thread
        self.seconds = 0.0  # how long the last run took (the foreground rule's measure)

    @property
    def running(self) -> bool:
        """Whether it was started in the background and not waited for."""
        return self.thread is not None or self.pending is not None

    def run(self) -> None:
        """Write the files not written yet; keep an error for ``wait``.

        A KeyboardInterrupt (in the caller's thread) propagates; the job can be run again.
        """
        t = time.perf_counter()
        self._count(lambda published: self.storage.write_files(self.files[self.done :], published))
        self.seconds = time.perf_counter() - t

    def _count(self, write: Callable[[list[str]], None]) -> None:
        """Run ``write(published)``; count the files it published, keep its error for wait."""
        published: list[str] = []
        try:
            write(published)
        except Exception as exc:  # handed to the recording's thread by wait()
            self.error = exc
        finally:
            self.done += len(published)

    def _run_in_thread(self) -> None:
        try:
            self.run()
        except BaseException as exc:  # pragma: no cover - nothing else reaches this thread
            self.error = exc

    def start(self) -> None:
        start = getattr(self.storage, "start_write_files", None)
        if start is not None:
            self.pending = start(self.files[self.done :])
            if self.pending is not None:
                return
        self.thread = threading.Thread(target=self._run_in_thread, name="gym-recording-writer")
        self.thread.start()

    def wait(self) -> None:
        """Wait for the write; raise its error (the job can then be run again)."""
        if self.pending is not None:
            pending, self.pending = self.pending, None
            self._count(pending.wait)
        if self.thread is not None:
            self.thread.join()
            self.thread = None
        if self.error is not None:
            exc, self.error = self.error, None
            raise exc


@dataclass(slots=True)
class _Open(_format.EpisodeSpan):
    """The episode being recorded: its rows start at ``obs_start``/``act_start``.

    ``terminated``/``truncated`` are the flags of the last step that set one, and
    ``flagged_at`` the step count when it did. When the episode ends, its stops, flags and end
    time are set, and it goes to the pending list itself as the span of its (last) part.
    """

    flagged_at: int = -1


class _NoType:
    """A type no value has: disables an inlined fast path."""


def _inline_array(f: Field) -> tuple[Any, Any, Any]:
    """``(shape, dtype, extend)`` if ``f`` is one small-array leaf, else values never matching."""
    leaf = f.root
    if isinstance(leaf, BytesLeaf):
        return leaf.shape, leaf.dtype, leaf.buf.extend
    return None, None, None


def _inline_scalar(f: Field) -> tuple[type, Any]:
    """``(type, append)`` if ``f`` is one scalar leaf, else a type no value has."""
    leaf = f.root
    if isinstance(leaf, ScalarLeaf):
        return leaf.pytype, leaf.values.append
    return _NoType, None


def _plain_json(obj: Any, what: str) -> Any:
    """``obj`` as plain JSON (numpy scalars and arrays become numbers and lists).

    Raises:
        RecordingError: ``obj`` holds something JSON cannot represent (objects, NaN, ...).
    """

    def default(o: Any) -> Any:
        if isinstance(o, (np.generic, np.ndarray)):
            return o.tolist()
        if isinstance(o, tuple):
            return list(o)
        raise TypeError(f"{type(o).__name__} is not JSON-serialisable")

    try:
        return json.loads(json.dumps(obj, allow_nan=False, default=default))
    except (TypeError, ValueError) as exc:
        msg = f"expected {what} to be plain JSON (dicts, lists, numbers, strings), but {exc}"
        raise RecordingError(msg) from exc


def _now() -> float:
    """The wall-clock time in unix seconds, to the microsecond (an episode's start or end).

    Whole microseconds are written to JSON without the general float-to-text search
    (``_speedups.encode_spans``), and read back as the same float.
    """
    return time.time_ns() // 1000 / 1e6


def _library_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {
        "gym_recording": __version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
    }
    for mod in ("gymnasium", "gym"):
        m = sys.modules.get(mod)
        versions[mod] = getattr(m, "__version__", None) if m is not None else None
    return versions


class TraceRecording:
    """A buffer of episodes that writes them to a directory in batches.

    Feed it with :meth:`add_reset` and :meth:`add_step` (the wrapper does this for you). Every
    observation and action is copied when it arrives, so envs may reuse their buffers. Episodes
    are written when about ``batch_bytes`` have accumulated, and at :meth:`close`, which runs by
    itself at interpreter exit. What is not yet written is lost if the process is killed.

    Args:
        directory: Where to write; created if missing. ``None`` makes a fresh directory under
            the system's temporary directory.
        batch_bytes: The size a batch (blob plus JSON) aims at. Steps per batch adapt toward it,
            within 1..50000.
        metadata: A JSON-able dict stored in the manifest.
        env_id: The environment's id, stored in the manifest.
        env_spec: The environment's spec as a JSON-able dict.
        observation_space: The observation space, serialised into the manifest.
        action_space: The action space, serialised into the manifest.
        record_infos: Whether info dicts passed in are kept (otherwise they are ignored).
        storage_options: For an fsspec URL ``directory`` (``s3://``, ``gs://``,
            ``memory://`` ...), options for its filesystem, e.g. ``{"endpoint_url": ...}``;
            without them the standard configuration applies (``AWS_ENDPOINT_URL``, fsspec's
            config). Ignored for local paths. Needs the ``remote`` extra.

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
    ) -> None:
        if not isinstance(batch_bytes, int) or isinstance(batch_bytes, bool) or batch_bytes < 1:
            msg = f"expected batch_bytes to be a positive int, got {batch_bytes!r}"
            raise ValueError(msg)
        if metadata is not None and not isinstance(metadata, Mapping):
            msg = f"expected metadata to be a dict, got {type(metadata).__name__}"
            raise TypeError(msg)
        if directory is None:
            directory = tempfile.mkdtemp(prefix="gym-recording-")
        self.directory = os.fspath(directory)
        self._storage: Storage = open_storage(
            self.directory, create=True, storage_options=storage_options
        )
        self.writer_id = f"{next(_writer_counter)}.{os.getpid()}.{secrets.token_hex(5)}"
        self.file_prefix = f"openaigym.trace.{self.writer_id}"
        self.batch_bytes = batch_bytes
        self.record_infos = record_infos
        self.closed = False

        from gym_recording._spaces import space_to_json

        self._manifest_head: dict[str, Any] = {
            "format": _format.FORMAT_NAME,
            "format_version": _format.FORMAT_VERSION,
            "writer": self.writer_id,
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "env_id": env_id,
            "env_spec": _plain_json(env_spec, "env_spec") if env_spec is not None else None,
            "observation_space": space_to_json(observation_space),
            "action_space": space_to_json(action_space),
            "versions": _library_versions(),
            "metadata": _plain_json(dict(metadata or {}), "metadata"),
            "record_infos": record_infos,
        }
        self.batch_count = 0  # batches written, all segments
        self.episode_count = 0  # complete episodes handed to the buffer
        self._segment = -1
        self._start_segment()

        self._obs = Field("observations")
        self._act = Field("actions")
        self._rew: list[Any] = []  # one reward per buffered step
        self._resets = 0  # buffered observation rows that follow no step (episode starts)
        self._target_steps = MAX_BATCH_STEPS  # steps per batch, adapted after each batch
        self._room = MAX_BATCH_STEPS  # steps the buffer may hold before an episode is split
        self._split_steps = MAX_BATCH_STEPS
        self._sized = False
        self._recorders: list[Any] = []  # the C step recorders of wrappers' steps
        self._pending: list[_format.EpisodeSpan] = []
        self._open: _Open | None = None
        self._job: _WriteJob | None = None
        self._unsynced = False  # a manifest was renamed without the directory's fsync
        # What a batch write costs, measured in the foreground (None: not yet measured), when
        # the buffer last started filling, and background writes since the last measurement.
        self._write_seconds: float | None = None
        self._filling_since = time.perf_counter()
        self._background_writes = 0
        self._build_hot_path()

        with _open_lock:
            _open_recordings[id(self)] = self
        logger.info("Recording traces to %s (writer %s)", self.directory, self.writer_id)

    # ---------------------------------------------------------------- feeding

    def add_reset(
        self,
        observation: Any,
        *,
        seed: int | None = None,
        options: Any = None,
        info: Any = None,
    ) -> None:
        """Start an episode with the observation ``reset`` returned (ending any open one).

        Args:
            observation: The reset observation.
            seed: The seed passed to ``reset``, if any.
            options: The options passed to ``reset``, if any.
            info: The reset info; kept only with ``record_infos=True``.
        """
        # Instances carry a closure built by _build_hot_path under this name (see add_step).
        self.__dict__["add_reset"](observation, seed=seed, options=options, info=info)

    def _check_reset(self, seed: Any) -> None:
        """add_reset's checks and its ending of the open episode (the uncommon cases)."""
        if self.closed:
            msg = "add_reset() on a closed TraceRecording; create a new one to record more"
            raise RecordingClosedError(msg)
        if seed is not None and (not isinstance(seed, (int, np.integer)) or isinstance(seed, bool)):
            msg = f"expected seed to be an int or None, got {type(seed).__name__}"
            raise TypeError(msg)
        self.end_episode()

    def add_step(
        self,
        action: Any,
        observation: Any,
        reward: Any,
        terminated: bool = False,
        truncated: bool = False,
        info: Any = None,
    ) -> None:
        """Record one step: the action taken and what ``step`` returned.

        Args:
            action: The action passed to ``step``.
            observation: The observation ``step`` returned.
            reward: The reward ``step`` returned.
            terminated: Whether the episode terminated at this step.
            truncated: Whether the episode was truncated at this step.
            info: The step's info; kept only with ``record_infos=True``.
        """
        # Instances carry a closure built by _build_hot_path under this name; this method is
        # only reached when called on the class.
        self.__dict__["add_step"](action, observation, reward, terminated, truncated, info)

    def _build_hot_path(self) -> None:
        """Build this instance's ``add_step`` and ``add_reset`` closures and the wrappers' steps.

        Every recorded step runs through them, so ``add_step`` keeps what it needs in closure
        cells rather than attributes, and inlines the commonest layouts: a small array (Box)
        and a scalar (Discrete); ``add_reset`` runs once per episode. The cells are updated in
        place by ``relayout`` whenever a field's layout changes, and so are the C recorders
        (``_speedups.StepRecorder``), so that nothing a caller holds on to
        (``add = rec.add_step``, ``step = env.step``) goes stale.
        """
        rew = self._rew
        rew_app = rew.append
        obs_field, act_field = self._obs, self._act
        keep_infos = self.record_infos
        snapshot = _format.snapshot
        ndarray = np.ndarray
        # The layout cells: values no observation or action matches until the layout is known.
        o_shape: Any = None
        o_dtype: Any = None
        o_ext: Any = None
        a_shape: Any = None
        a_dtype: Any = None
        a_ext: Any = None
        a_type: Any = _NoType
        a_scalar_app: Any = None
        obs_put: Any = None
        act_put: Any = None
        # Steps the buffer may hold before _make_room; -1 while no episode is open, so that one
        # comparison per step covers both (see _sync_room).
        room = -1

        # The step recorders in C (gym_recording._speedups.StepRecorder) of the wrappers'
        # steps: they keep their own copy of the layout and the room, updated with the cells.
        recorders: list[Any] = self._recorders

        def configure(c: Any) -> None:
            o, a = obs_field.root, act_field.root
            if not keep_infos and isinstance(o, BytesLeaf):
                if isinstance(a, ScalarLeaf):
                    c.configure(o.buf, o.dtype, o.shape, a.pytype, a.values, None, None, None)
                    return
                if isinstance(a, BytesLeaf):
                    c.configure(o.buf, o.dtype, o.shape, None, None, a.buf, a.dtype, a.shape)
                    return
            c.configure(None, None, None, None, None, None, None, None)  # all to the Python step

        def set_room(n: int) -> None:
            nonlocal room
            room = n
            for c in recorders:
                c.room = n

        def on_flags(terminated: Any, truncated: Any) -> None:
            """The step just stored set a flag: the episode may end here."""
            ep: Any = self._open
            ep.terminated, ep.truncated = bool(terminated), bool(truncated)
            ep.flagged_at = len(rew)

        def first_put(field: Field) -> Callable[[Any], bool]:
            def put(value: Any) -> bool:
                ok = field.put(value)  # infers the field's layout from its first value
                relayout()
                return ok

            return put

        def relayout() -> None:
            nonlocal o_shape, o_dtype, o_ext, a_shape, a_dtype, a_ext, a_type, a_scalar_app
            nonlocal obs_put, act_put
            o_shape, o_dtype, o_ext = _inline_array(obs_field)
            a_shape, a_dtype, a_ext = _inline_array(act_field)
            a_type, a_scalar_app = _inline_scalar(act_field)
            obs_put = obs_field.put if obs_field.root is not None else first_put(obs_field)
            act_put = act_field.put if act_field.root is not None else first_put(act_field)
            for c in recorders:
                configure(c)
            if not self._sized and obs_field.root is not None and act_field.root is not None:
                self._sized = True
                self._decide_batch_size()

        def add_step(
            action: Any,
            observation: Any,
            reward: Any,
            terminated: bool = False,
            truncated: bool = False,
            info: Any = None,
        ) -> None:
            if len(rew) >= room:  # full (write out before storing this step), or no episode
                if self._open is None:
                    self._no_open_episode()
                    return
                self._make_room()
            if type(action) is a_type:
                a_scalar_app(action)
            elif type(action) is ndarray and action.dtype is a_dtype and action.shape == a_shape:
                try:
                    a_ext(action)
                except (TypeError, BufferError, ValueError):  # not C-contiguous
                    a_ext(action.tobytes())
            elif not act_put(action):
                self._fallback(act_field, action, len(rew))
            if (
                type(observation) is ndarray
                and observation.dtype is o_dtype
                and observation.shape == o_shape
            ):
                try:
                    o_ext(observation)
                except (TypeError, BufferError, ValueError):  # not C-contiguous
                    o_ext(observation.tobytes())
            elif not obs_put(observation):
                self._fallback(obs_field, observation, len(rew) + self._resets)
            rew_app(reward)
            if terminated or truncated:
                on_flags(terminated, truncated)
            if keep_infos:
                self._open.infos.append(snapshot(info))  # type: ignore[union-attr]

        def add_reset(
            observation: Any, *, seed: Any = None, options: Any = None, info: Any = None
        ) -> None:
            if self._open is not None or self.closed or not (seed is None or type(seed) is int):
                self._check_reset(seed)
            if len(self._pending) >= MAX_BATCH_EPISODES:
                self._submit_batch()
            steps = len(rew)
            rows = steps + self._resets
            if not obs_put(observation):
                self._fallback(obs_field, observation, rows)
            self._resets += 1
            self._open = _Open(
                rows,
                0,
                steps,
                0,
                False,
                False,
                None if seed is None else int(seed),
                None if options is None else snapshot(options),
                [snapshot(info)] if keep_infos else None,
                _now(),
                None,
            )
            set_room(self._room)  # (_sync_room, with an episode open)

        def fused_step(
            env_step: Callable[[Any], Any], other_result: Callable[[Any, Any], None]
        ) -> Callable[[Any], Any]:
            def record(action: Any, result: Any) -> Any:
                """Record the step ``env_step(action)`` returned ``result`` (the general path)."""
                try:
                    observation, reward, terminated, truncated, info = result
                except (TypeError, ValueError):  # not a gymnasium 5-tuple (legacy gym)
                    other_result(action, result)
                    return result
                if self._open is None:  # between episodes, or closed: the caller decides
                    other_result(action, result)
                    return result
                add_step(action, observation, reward, terminated, truncated, info)
                return result

            record_step = record
            if _speedups is not None:
                # Stores the commonest layouts itself and hands any other step to record().
                recorder = _speedups.StepRecorder(record, on_flags, rew)
                configure(recorder)
                recorder.room = room
                recorders.append(recorder)
                # A bound method of a C type: the interpreter calls it without a frame.
                record_step = recorder.record

            def step(action: Any) -> Any:
                return record_step(action, env_step(action))

            return step

        relayout()
        add_step.__doc__ = TraceRecording.add_step.__doc__
        add_reset.__doc__ = TraceRecording.add_reset.__doc__
        self.add_step = add_step  # type: ignore[method-assign]
        self.add_reset = add_reset  # type: ignore[method-assign]
        self._relayout = relayout
        self._set_room = set_room
        self._fused_step = fused_step

    def _step_function(
        self, env_step: Callable[[Any], Any], other_result: Callable[[Any, Any], None]
    ) -> Callable[[Any], Any]:
        """``step(action)``: ``env_step(action)``, then the step recorded, for a wrapper.

        A gymnasium 5-tuple result is recorded exactly as :meth:`add_step` would record it;
        any other result, or any result while no episode is open, is handed to
        ``other_result(action, result)``. Either way the result is returned. The step is a
        closure; it records through a ``gym_recording._speedups.StepRecorder`` (C) when the
        extension is built, else in Python.
        """
        return self._fused_step(env_step, other_result)

    def _sync_room(self) -> None:
        """Tell the hot path how many steps fit, or -1 if no episode is open."""
        self._set_room(self._room if self._open is not None else -1)

    def _fallback(self, target: Field, value: Any, rows: int) -> None:
        target.fallback(value, rows)
        self._relayout()

    def _no_open_episode(self) -> None:
        if self.closed:
            msg = "add_step() on a closed TraceRecording; create a new one to record more"
            raise RecordingClosedError(msg)
        msg = (
            "add_step() before add_reset(): an episode starts with the observation reset() "
            "returned; call add_reset(observation) first"
        )
        raise RecordingError(msg)

    def end_episode(self) -> None:
        """End the open episode, if any; it is written with the next batch.

        ``terminated``/``truncated`` are those of its last step (both false if the last step
        set neither: the episode was cut by a reset or a close).
        """
        ep = self._open
        if ep is None:
            return
        self._open = None
        self._set_room(-1)  # (_sync_room, with no episode open)
        # The episode object becomes the span of its last part (see _continuing_part).
        steps = len(self._rew)
        ep.obs_stop = steps + self._resets
        ep.act_stop = steps
        if ep.flagged_at != steps:  # its last step set no flag: cut by a reset or a close
            ep.terminated = ep.truncated = False
        if ep.part:  # seed, options and start time are the first part's
            ep.seed = ep.options = ep.started_at = None
        ep.ended_at = _now()
        self._pending.append(ep)
        self.episode_count += 1
        if steps >= self._target_steps:
            self._submit_batch()

    def _continuing_part(self, ep: _Open) -> _format.EpisodeSpan:
        """The span of the open episode's rows so far, as a part continuing in the next batch.

        Its last part is the episode object itself (see ``end_episode``).
        """
        first = ep.part == 0
        return _format.EpisodeSpan(
            ep.obs_start,
            len(self._rew) + self._resets,
            ep.act_start,
            len(self._rew),
            False,
            False,
            ep.seed if first else None,
            ep.options if first else None,
            list(ep.infos) if ep.infos is not None else None,
            ep.started_at if first else None,
            None,
            ep.part,
            True,
        )

    # ---------------------------------------------------------------- batching

    def _decide_batch_size(self, bytes_per_step: float | None = None) -> None:
        if bytes_per_step is None:
            bytes_per_step = self._obs.row_bytes() + self._act.row_bytes() + 8 + 16
        target = int(self.batch_bytes / max(bytes_per_step, 1.0) + 1)
        self._target_steps = max(MIN_BATCH_STEPS, min(MAX_BATCH_STEPS, target))
        # An episode alone is split into parts once its arrays pass 1.25 batch_bytes.
        row_bytes = self._obs.row_bytes() + self._act.row_bytes() + 8
        split = int(1.25 * self.batch_bytes / max(row_bytes, 1))
        self._split_steps = max(self._target_steps, min(MAX_BATCH_STEPS, split), 1)
        # What the buffer may hold before it is written out mid-episode.
        self._room = self._target_steps
        self._sync_room()

    def _make_room(self) -> None:
        """The buffer holds ``_room`` steps inside an episode: write out what can be written.

        Completed episodes are written if there are any (the open episode's steps move to the
        front of the buffer). An open episode alone is given a quarter more room, then written
        as a part that continues in the next batch (FORMAT.md §4).
        """
        ep = self._open
        if ep is None:  # pragma: no cover - add_step checks
            return
        split_at = self._split_steps
        if not self._pending:
            if len(self._rew) < split_at:
                self._room = split_at
                self._sync_room()
                return
            self._pending.append(self._continuing_part(ep))
            # The next part starts at the last observation, which both parts hold.
            ep.obs_start = len(self._rew) + self._resets - 1
            ep.act_start = len(self._rew)
            ep.part += 1
            if ep.infos is not None:
                ep.infos = ep.infos[-1:]
        self._submit_batch()

    def save_complete(self) -> None:
        """Write the completed episodes as one batch and update the manifest; wait for it.

        The blob is written first, then the batch JSON, then the manifest, each atomically.
        When it returns, every episode written is durable (it survives a power loss). The open
        episode, if any, stays in the buffer.

        Raises:
            RecordingError: a write failed (twice); nothing of that batch was published, and
                it is retried at the next flush or close.
        """
        self._submit_batch()
        self._wait_for_writes()
        if self._unsynced:  # the last manifest's rename, made durable now
            self._storage.sync()
            self._unsynced = False

    def _submit_batch(self) -> None:
        """Encode the completed episodes and hand their files to a background write.

        Waits for the previous batch's write first (one in flight keeps the order). Batches
        written while recording go this way, so the env steps on while the disk works.
        """
        if not self._pending:
            return
        first = self._episode_objects
        batch_fn, bin_fn = _format.batch_names(self.file_prefix, first)
        pending, rew = self._pending, self._rew
        # Convert the batch's steps once, then give each episode views of them.
        obs = self._obs.take(0, pending[-1].obs_stop)
        act = self._act.take(0, pending[-1].act_stop)
        n_act = pending[-1].act_stop
        rewards = stack_numbers(rew, n_act, "d")
        if rewards is None:  # not all Python floats (or no C extension)
            rewards = np.asarray(rew[:n_act], dtype=np.float64).reshape(-1)
        steps = sum(p.act_stop - p.act_start for p in pending)
        encoded = _format.encode_columns(obs, act, rewards, pending, bin_fn)
        if encoded is None:  # not three plain arrays: encode episode by episode
            records = _format.episode_records(obs, act, rewards, pending)
            encoded = _format.encode_batch(records, bin_fn)
        json_bytes, chunks, blob_size = encoded
        entry: dict[str, Any] = {
            "first": first,
            "len": len(pending),
            "fn": batch_fn,
            "bin": bin_fn,
            "steps": steps,
            "bytes": blob_size + len(json_bytes),
        }
        if pending[-1].continues:
            entry["continues"] = True
        self._wait_for_writes()  # one batch in flight at a time keeps the write order
        self.batches.append(entry)
        self._batch_entries.append(_format.dumps(entry))
        # The three files are written and fsynced (locally their writeback starts together,
        # for one journal commit), then renamed in order, with one fsync of the directory
        # after the batch JSON's rename: it makes the blob's and its own renames durable
        # before the manifest names them. The manifest's rename is made durable by the next
        # batch's, or by save_complete (FORMAT.md §2).
        job = self._job = _WriteJob(
            self._storage,
            [
                (bin_fn, chunks, False),
                (batch_fn, [json_bytes], True),
                (_format.manifest_name(self.file_prefix), [self._manifest_bytes()], False),
            ],
        )
        self._unsynced = True
        # A write that costs little next to the time the batch took to fill is done here: a
        # background thread would cost more than it saves (a thread start, GIL handoffs, and
        # on virtual machines an fsync on another CPU slows this one). A costly write (large
        # frames, a slow disk, object storage) goes to the background thread, and every
        # FOREGROUND_PROBE_EVERY-th one is done here again to see whether that still holds.
        now = time.perf_counter()
        filled_in, self._filling_since = now - self._filling_since, now
        cost = self._write_seconds
        foreground = (
            cost is None
            or cost < FOREGROUND_WRITE_SHARE * filled_in
            or self._background_writes >= FOREGROUND_PROBE_EVERY
        )
        if foreground:
            self._background_writes = 0
        else:
            self._background_writes += 1
            job.start()
        self._episode_objects += len(pending)
        self.batch_count += 1

        # Keep only the open episode's rows (or nothing), at the front of the buffer.
        ep = self._open
        keep_obs = ep.obs_start if ep is not None else len(rew) + self._resets
        keep_act = ep.act_start if ep is not None else len(rew)
        self._obs.release(keep_obs)
        self._act.release(keep_act)
        del rew[:keep_act]
        self._resets = 1 if ep is not None else 0
        if ep is not None:
            ep.obs_start, ep.act_start = 0, 0
            if ep.flagged_at >= 0:
                ep.flagged_at -= keep_act
        self._pending = []
        self._room = self._target_steps
        self._sync_room()
        if steps:
            self._decide_batch_size((blob_size + len(json_bytes)) / steps)
        if len(self.batches) >= SEGMENT_BATCHES and not entry.get("continues"):
            self._start_segment()
        if foreground:
            # Last, once the buffer's bookkeeping is done: if this is interrupted (Ctrl-C),
            # the job is still in flight and the next _wait_for_writes runs it again.
            job.run()  # an error is raised by the next _wait_for_writes, as for a thread
            if job.error is None:
                self._write_seconds = job.seconds

    def _start_segment(self) -> None:
        """Continue in a new manifest, so that no flush rewrites an ever-growing manifest."""
        self._segment += 1
        suffix = f".s{self._segment}" if self._segment else ""
        self.file_prefix = f"openaigym.trace.{self.writer_id}{suffix}"
        self._manifest_head["segment"] = self._segment
        self._head_json = _format.dumps(self._manifest_head)[1:-1]
        self.batches: list[dict[str, Any]] = []
        self._batch_entries: list[bytes] = []
        self._episode_objects = 0  # episode objects in this segment (parts count one each)

    def _manifest_bytes(self) -> bytes:
        return b'{"batches":[' + b",".join(self._batch_entries) + b"]," + self._head_json + b"}"

    def _write_manifest(self) -> None:
        self._storage.write_atomic(
            _format.manifest_name(self.file_prefix), [self._manifest_bytes()]
        )

    def _wait_for_writes(self) -> None:
        """Wait for the batch being written; if its write failed, retry it once, here.

        Raises:
            RecordingError: the write failed again. Nothing of that batch is visible to
                readers; it is retried at the next flush or close.
        """
        job = self._job
        if job is None:
            return
        if not job.running and job.done < len(job.files) and job.error is None:
            job.run()  # an earlier attempt failed and said so: try again, do not drop it
        try:
            job.wait()
        except RecordingError:
            job.run()  # the files written already are not written again
            job.wait()
        self._job = None

    def close(self) -> None:
        """End the open episode, write everything buffered, and close. Safe to call twice.

        It runs by itself at interpreter exit (of the process that made the recording: a
        forked child leaves it to its parent); call it to free memory once done. Episodes not
        written when the process dies (killed, or crashed before exit) are lost.
        """
        if self.closed:
            return
        try:
            self.end_episode()
            self.save_complete()
            if not self.batch_count:
                self._write_manifest()  # an empty recording still says what was recorded
        finally:
            self.closed = True
            with _open_lock:
                _open_recordings.pop(id(self), None)
        logger.info("Wrote traces to %s", self.directory)

    def __enter__(self) -> TraceRecording:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<TraceRecording {self.directory!r} writer={self.writer_id} {state}>"
