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
import logging
import os
import platform
import secrets
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gym_recording import _format
from gym_recording._errors import RecordingClosedError, RecordingError
from gym_recording._storage import Storage, open_storage
from gym_recording._version import __version__

__all__ = ["TraceRecording"]

logger = logging.getLogger(__name__)

#: Steps per batch are clamped to this range (as in the original writer).
MIN_BATCH_STEPS = 1
MAX_BATCH_STEPS = 50_000
_INITIAL_ALLOC_ROWS = 64

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


# --------------------------------------------------------------------------------------------
# Leaves: where the values of one field live between flushes
# --------------------------------------------------------------------------------------------


class _ArrayLeaf:
    """Fixed-shape numeric values: one preallocated array, one row per step."""

    __slots__ = ("buf", "dtype", "shape")

    def __init__(self, dtype: np.dtype[Any], shape: tuple[int, ...], rows: int) -> None:
        self.dtype = dtype
        self.shape = shape
        self.buf: np.ndarray = np.empty((rows, *shape), dtype=dtype)

    def put(self, v: Any, row: int) -> bool:
        if type(v) is np.ndarray and v.shape == self.shape and (
            v.dtype is self.dtype or v.dtype == self.dtype
        ):
            self.buf[row] = v
            return True
        return False

    def take(self, start: int, stop: int) -> Any:
        return self.buf[start:stop]

    def get(self, row: int) -> Any:
        return self.buf[row].copy()

    def clear(self) -> None:
        pass

    def resize(self, rows: int, keep: int) -> None:
        new = np.empty((rows, *self.shape), dtype=self.dtype)
        new[:keep] = self.buf[:keep]
        self.buf = new

    def row_bytes(self) -> int:
        return self.dtype.itemsize * int(np.prod(self.shape, dtype=np.int64))


class _ScalarLeaf:
    """Python or numpy scalars (Discrete values, flags): a list, stacked at flush."""

    __slots__ = ("dtype", "pytype", "values")

    def __init__(self, pytype: type, dtype: np.dtype[Any]) -> None:
        self.pytype = pytype
        self.dtype = dtype
        self.values: list[Any] = []

    def put(self, v: Any, row: int) -> bool:
        if type(v) is self.pytype:
            self.values.append(v)
            return True
        dt = self.dtype
        if isinstance(v, np.generic):
            ok = v.dtype == dt
        elif type(v) is bool:
            ok = dt.kind == "b"
        elif type(v) is int:
            ok = dt.kind in "iu" and bool(np.iinfo(dt).min <= v <= np.iinfo(dt).max)
        elif type(v) is float:
            ok = dt == np.float64
        else:
            ok = False
        if ok:
            self.values.append(v)
        return ok

    def take(self, start: int, stop: int) -> Any:
        vals = self.values[start:stop]
        try:
            return np.array(vals, dtype=self.dtype)
        except OverflowError:  # a Python int beyond int64: keep it exact as JSON
            return _format.PerStep(vals)

    def get(self, row: int) -> Any:
        return self.values[row]

    def clear(self) -> None:
        self.values.clear()

    def resize(self, rows: int, keep: int) -> None:
        del self.values[keep:]

    def row_bytes(self) -> int:
        return self.dtype.itemsize


class _ListLeaf:
    """Anything else (text, variable shapes, objects): a snapshot per step, JSON at flush."""

    __slots__ = ("values",)

    def __init__(self, values: list[Any] | None = None) -> None:
        self.values: list[Any] = values if values is not None else []

    def put(self, v: Any, row: int) -> bool:
        self.values.append(_format.snapshot(v))
        return True

    def take(self, start: int, stop: int) -> Any:
        return _format.PerStep(self.values[start:stop])

    def get(self, row: int) -> Any:
        return self.values[row]

    def clear(self) -> None:
        self.values.clear()

    def resize(self, rows: int, keep: int) -> None:
        del self.values[keep:]

    def row_bytes(self) -> int:
        return 64


class _DictNode:
    """A Dict observation: one child per key, in the first value's key order."""

    __slots__ = ("children", "keys")

    def __init__(self, keys: tuple[str, ...], children: list[Any]) -> None:
        self.keys = keys
        self.children = children

    def put(self, v: Any, row: int) -> bool:
        if not isinstance(v, Mapping) or len(v) != len(self.keys):
            return False
        try:
            for k, c in zip(self.keys, self.children):
                if not c.put(v[k], row):
                    return False
        except KeyError:
            return False
        return True

    def take(self, start: int, stop: int) -> Any:
        return _format.FieldDict(
            (k, c.take(start, stop)) for k, c in zip(self.keys, self.children)
        )

    def get(self, row: int) -> Any:
        return {k: c.get(row) for k, c in zip(self.keys, self.children)}

    def clear(self) -> None:
        for c in self.children:
            c.clear()

    def resize(self, rows: int, keep: int) -> None:
        for c in self.children:
            c.resize(rows, keep)

    def row_bytes(self) -> int:
        return sum(c.row_bytes() for c in self.children)


class _TupleNode:
    """A Tuple observation: one child per position."""

    __slots__ = ("children",)

    def __init__(self, children: list[Any]) -> None:
        self.children = children

    def put(self, v: Any, row: int) -> bool:
        if type(v) is not tuple or len(v) != len(self.children):
            return False
        for x, c in zip(v, self.children):
            if not c.put(x, row):
                return False
        return True

    def take(self, start: int, stop: int) -> Any:
        return _format.FieldTuple(c.take(start, stop) for c in self.children)

    def get(self, row: int) -> Any:
        return tuple(c.get(row) for c in self.children)

    def clear(self) -> None:
        for c in self.children:
            c.clear()

    def resize(self, rows: int, keep: int) -> None:
        for c in self.children:
            c.resize(rows, keep)

    def row_bytes(self) -> int:
        return sum(c.row_bytes() for c in self.children)


_Node = _ArrayLeaf | _ScalarLeaf | _ListLeaf | _DictNode | _TupleNode


def _infer(v: Any, rows: int, depth: int = 0) -> _Node:
    """Choose how to store values shaped like ``v``."""
    if depth > 32:
        return _ListLeaf()
    if type(v) is np.ndarray:
        if _format.blob_dtype_ok(v.dtype):
            return _ArrayLeaf(v.dtype, v.shape, rows)
        return _ListLeaf()
    if isinstance(v, np.generic):
        if _format.blob_dtype_ok(v.dtype):
            return _ScalarLeaf(type(v), v.dtype)
        return _ListLeaf()
    if type(v) is bool:
        return _ScalarLeaf(bool, np.dtype(np.bool_))
    if type(v) is int:
        if -(2**63) <= v < 2**63:
            return _ScalarLeaf(int, np.dtype(np.int64))
        return _ListLeaf()
    if type(v) is float:
        return _ScalarLeaf(float, np.dtype(np.float64))
    if type(v) is tuple and v:
        return _TupleNode([_infer(x, rows, depth + 1) for x in v])
    if isinstance(v, Mapping) and v and all(type(k) is str for k in v):
        return _DictNode(tuple(v), [_infer(x, rows, depth + 1) for x in v.values()])
    return _ListLeaf()


class _Field:
    """The observations or the actions of the buffered steps: a tree of leaves, rows shared."""

    __slots__ = ("alloc", "put", "root")

    def __init__(self, alloc: int) -> None:
        self.root: _Node | None = None
        self.alloc = alloc
        self.put = self._first_put

    def _first_put(self, v: Any, row: int) -> bool:
        self.root = _infer(v, max(row + 1, self.alloc))
        self.put = self.root.put
        return self.root.put(v, row)

    def ensure_rows(self, rows: int, keep: int) -> None:
        self.alloc = rows
        if self.root is not None:
            self.root.resize(rows, keep)

    def fallback(self, v: Any, row: int) -> None:
        """``v`` does not fit the inferred layout: store this field as per-step values."""
        root = self.root
        values = [root.get(r) for r in range(row)] if root is not None else []
        logger.warning(
            "a value of type %s does not match the earlier ones (%s); storing this field as "
            "per-step JSON values from now on, which is slower",
            type(v).__name__,
            type(root).__name__,
        )
        self.root = _ListLeaf(values)
        self.put = self.root.put
        self.root.put(v, row)

    def take(self, start: int, stop: int) -> Any:
        if self.root is None:
            return np.zeros((0,), dtype=np.float64)
        return self.root.take(start, stop)

    def get(self, row: int) -> Any:
        return self.root.get(row) if self.root is not None else None

    def clear(self) -> None:
        if self.root is not None:
            self.root.clear()

    def row_bytes(self) -> int:
        return self.root.row_bytes() if self.root is not None else 0


@dataclass
class _Pending:
    """A completed episode (or part) whose rows wait in the buffer."""

    obs_start: int
    obs_stop: int
    act_start: int
    act_stop: int
    rewards: list[Any]
    terminated: bool
    truncated: bool
    seed: int | None
    options: Any
    infos: list[Any] | None
    started_at: float | None
    ended_at: float | None
    part: int = 0
    continues: bool = False


@dataclass
class _Open:
    """The episode being recorded."""

    obs_start: int
    act_start: int
    seed: int | None
    options: Any
    started_at: float
    infos: list[Any] | None
    rewards: list[Any] = field(default_factory=list)
    terminated: bool = False
    truncated: bool = False
    part: int = 0


def _json_safe(obj: Any, what: str) -> Any:
    """Check that ``obj`` is JSON-able (for metadata), naming it in the error."""
    try:
        _format.dumps(_format.encode_value(obj, _format.BlobBuilder("-")))
    except (TypeError, ValueError) as exc:
        msg = f"expected {what} to be JSON-serialisable, but it is not: {exc}"
        raise RecordingError(msg) from exc
    return obj


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
        self._storage: Storage = open_storage(self.directory, create=True)
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
            "env_spec": _json_safe(env_spec, "env_spec") if env_spec is not None else None,
            "observation_space": space_to_json(observation_space),
            "action_space": space_to_json(action_space),
            "versions": _library_versions(),
            "metadata": _json_safe(dict(metadata or {}), "metadata"),
            "record_infos": record_infos,
        }
        self.batches: list[dict[str, Any]] = []
        self._episode_objects = 0  # episode objects written (parts count one each)
        self.episode_count = 0  # complete episodes handed to the buffer

        self._obs = _Field(_INITIAL_ALLOC_ROWS)
        self._act = _Field(_INITIAL_ALLOC_ROWS)
        self._obs_rows = 0
        self._act_rows = 0
        self._alloc_rows = _INITIAL_ALLOC_ROWS
        self._max_rows: int | None = None  # decided once the first step's size is known
        self._target_steps: int | None = None
        self._pending: list[_Pending] = []
        self._open: _Open | None = None

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
        if self.closed:
            msg = "add_reset() on a closed TraceRecording; create a new one to record more"
            raise RecordingClosedError(msg)
        self.end_episode()
        if self._obs_rows >= self._alloc_rows:
            self._make_room_at_reset()
        row = self._obs_rows
        if not self._obs.put(observation, row):
            self._obs.fallback(observation, row)
        self._obs_rows = row + 1
        if seed is not None and not isinstance(seed, (int, np.integer)):
            msg = f"expected seed to be an int or None, got {type(seed).__name__}"
            raise TypeError(msg)
        self._open = _Open(
            obs_start=row,
            act_start=self._act_rows,
            seed=None if seed is None else int(seed),
            options=_format.snapshot(options),
            started_at=time.time(),
            infos=[_format.snapshot(info)] if self.record_infos else None,
        )

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
        ep = self._open
        if ep is None:
            self._no_open_episode()
            ep = self._open
            assert ep is not None  # set by _no_open_episode or it raised  # noqa: S101
        if self._obs_rows >= self._alloc_rows:
            self._make_room_in_episode()
        arow = self._act_rows
        if not self._act.put(action, arow):
            self._act.fallback(action, arow)
        orow = self._obs_rows
        if not self._obs.put(observation, orow):
            self._obs.fallback(observation, orow)
        self._act_rows = arow + 1
        self._obs_rows = orow + 1
        ep.rewards.append(reward)
        ep.terminated = terminated
        ep.truncated = truncated
        if ep.infos is not None:
            ep.infos.append(_format.snapshot(info))

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

        ``terminated``/``truncated`` are those of its last step.
        """
        ep = self._open
        if ep is None:
            return
        self._open = None
        self._pending.append(
            _Pending(
                obs_start=ep.obs_start,
                obs_stop=self._obs_rows,
                act_start=ep.act_start,
                act_stop=self._act_rows,
                rewards=ep.rewards,
                terminated=bool(ep.terminated),
                truncated=bool(ep.truncated),
                seed=ep.seed if ep.part == 0 else None,
                options=ep.options if ep.part == 0 else None,
                infos=ep.infos,
                started_at=ep.started_at if ep.part == 0 else None,
                ended_at=time.time(),
                part=ep.part,
            )
        )
        self.episode_count += 1
        if self._target_steps is None:
            self._decide_batch_size()
        if self._act_rows >= (self._target_steps or MAX_BATCH_STEPS):
            self.save_complete()

    # ---------------------------------------------------------------- batching

    def _decide_batch_size(self, bytes_per_step: float | None = None) -> None:
        if bytes_per_step is None:
            bytes_per_step = self._obs.row_bytes() + self._act.row_bytes() + 8 + 16
        target = int(self.batch_bytes / max(bytes_per_step, 1.0) + 1)
        self._target_steps = max(MIN_BATCH_STEPS, min(MAX_BATCH_STEPS, target))
        # Rows the buffer may hold: room to finish an episode begun near the target.
        self._max_rows = 2 * self._target_steps + 2

    def _grow(self, rows: int) -> None:
        self._obs.ensure_rows(rows, self._obs_rows)
        self._act.ensure_rows(rows, self._act_rows)
        self._alloc_rows = rows

    def _make_room_at_reset(self) -> None:
        if self._max_rows is None:
            self._decide_batch_size()
        assert self._max_rows is not None  # noqa: S101
        if self._alloc_rows < self._max_rows:
            self._grow(min(self._max_rows, 2 * self._alloc_rows))
        else:
            self.save_complete()

    def _make_room_in_episode(self) -> None:
        if self._max_rows is None:
            self._decide_batch_size()
        assert self._max_rows is not None  # noqa: S101
        if self._alloc_rows < self._max_rows:
            self._grow(min(self._max_rows, 2 * self._alloc_rows))
            return
        # The buffer is full inside an episode: write what we have, the open episode as a part.
        ep = self._open
        assert ep is not None  # noqa: S101
        last_obs = self._obs.get(self._obs_rows - 1)
        last_info = ep.infos[-1] if ep.infos is not None else None
        self._pending.append(
            _Pending(
                obs_start=ep.obs_start,
                obs_stop=self._obs_rows,
                act_start=ep.act_start,
                act_stop=self._act_rows,
                rewards=ep.rewards,
                terminated=False,
                truncated=False,
                seed=ep.seed if ep.part == 0 else None,
                options=ep.options if ep.part == 0 else None,
                infos=ep.infos,
                started_at=ep.started_at if ep.part == 0 else None,
                ended_at=None,
                part=ep.part,
                continues=True,
            )
        )
        self.save_complete()
        # The next part starts with a copy of the last observation (FORMAT.md §4).
        if not self._obs.put(last_obs, 0):
            self._obs.fallback(last_obs, 0)
        self._obs_rows = 1
        ep.obs_start = 0
        ep.act_start = 0
        ep.rewards = []
        ep.part += 1
        if ep.infos is not None:
            ep.infos = [last_info]

    def save_complete(self) -> None:
        """Write the buffered episodes as one batch, then update the manifest.

        The blob is written first, then the batch JSON, then the manifest, each atomically.
        Does nothing if no episode is buffered.
        """
        if not self._pending:
            return
        first = self._episode_objects
        batch_fn, bin_fn = _format.batch_names(self.file_prefix, first)
        records = [
            _format.EpisodeRecord(
                observations=self._obs.take(p.obs_start, p.obs_stop),
                actions=self._act.take(p.act_start, p.act_stop),
                rewards=np.asarray(p.rewards, dtype=np.float64).reshape(-1),
                terminated=p.terminated,
                truncated=p.truncated,
                seed=p.seed,
                options=p.options,
                infos=p.infos,
                started_at=p.started_at,
                ended_at=p.ended_at,
                part=p.part,
                continues=p.continues,
            )
            for p in self._pending
        ]
        steps = sum(len(p.rewards) for p in self._pending)
        json_bytes, chunks, blob_size = _format.encode_batch(records, bin_fn)
        self._storage.write_atomic(bin_fn, chunks)
        self._storage.write_atomic(batch_fn, [json_bytes])
        entry: dict[str, Any] = {
            "first": first,
            "len": len(records),
            "fn": batch_fn,
            "bin": bin_fn,
            "steps": steps,
            "bytes": blob_size + len(json_bytes),
        }
        if records[-1].continues:
            entry["continues"] = True
        self.batches.append(entry)
        self._write_manifest()
        self._episode_objects += len(records)

        if steps:
            self._decide_batch_size((blob_size + len(json_bytes)) / steps)
        self._pending = []
        self._obs.clear()
        self._act.clear()
        self._obs_rows = 0
        self._act_rows = 0
        assert self._max_rows is not None  # noqa: S101
        if self._alloc_rows > self._max_rows:  # the target shrank: give memory back
            self._grow(self._max_rows)

    def _write_manifest(self) -> None:
        manifest = {"batches": self.batches, **self._manifest_head}
        self._storage.write_atomic(
            _format.manifest_name(self.file_prefix), [_format.dumps(manifest)]
        )

    def close(self) -> None:
        """End the open episode, write everything buffered, and close. Safe to call twice.

        It runs by itself at interpreter exit; call it to free memory once done. Episodes not
        written when the process dies (killed, or crashed before exit) are lost.
        """
        if self.closed:
            return
        try:
            self.end_episode()
            self.save_complete()
            if not self.batches:
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
