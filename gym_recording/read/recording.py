"""The reader: :func:`load` a recording directory as a sequence of :class:`Episode`.

Arrays are read-only views over memory-mapped blobs (zero-copy). A blob stays mapped for as
long as any array made from it is alive, so arrays remain valid after the recording is
closed. Every file is checked by the format layer before a byte of it is trusted.
"""

from __future__ import annotations

import bisect
import copy
import itertools
import os
import threading
import warnings
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from gym_recording._errors import NoRecordingWarning, RecordingClosedError, TraceFormatError
from gym_recording.format.arrays import BatchBlob
from gym_recording.format.batch import DecodedBatch, decode_batch, join_parts
from gym_recording.format.limits import (
    JSONARRAY_RATIO,
    MAX_BATCH_JSON_BYTES,
    MAX_DECODED_BYTES,
    MAX_MANIFEST_BYTES,
)
from gym_recording.format.manifest import Manifest, decode_manifest
from gym_recording.format.names import (
    find_manifests,
    holds_no_recording,
    misnamed_manifest,
    misnamed_manifests,
    no_recording,
)
from gym_recording.format.spaces import space_from_json
from gym_recording.read import notebook
from gym_recording.read.episode import Episode
from gym_recording.storage import Storage, open_storage

if TYPE_CHECKING:
    from typing_extensions import Self  # (typing.Self from Python 3.11)

__all__ = ["Recording", "load", "read_ahead", "read_batch", "read_manifests"]

_BATCH_CACHE = 4
#: A remote storage fetches files ahead of the reader (see ``Storage.prefetch``): at most
#: its ``parallel_reads`` files, and about this many bytes of batches, at once.
READ_AHEAD_BYTES = 64 * 1024 * 1024


def read_manifests(storage: Storage, directory: str) -> list[Manifest]:
    """Every writer's manifest in ``storage``, checked, in reading order (FORMAT.md §8).

    Raises:
        TraceFormatError: a manifest is damaged (naming it).
    """
    manifests = []
    listed = storage.list_names()
    misnamed = misnamed_manifests(listed)
    if misnamed:  # (a writer is refused, not skipped: §8)
        raise TraceFormatError(misnamed_manifest(misnamed[0]), os.path.join(directory, misnamed[0]))
    names = find_manifests(listed)
    try:
        for k, name in enumerate(names):
            if k % storage.parallel_reads == 0 and storage.parallel_reads > 1:
                ahead = names[k : k + storage.parallel_reads]
                storage.prefetch([(n, MAX_MANIFEST_BYTES) for n in ahead])
            data = storage.read_bytes(name, MAX_MANIFEST_BYTES)
            manifests.append(decode_manifest(data, name, os.path.join(directory, name)))
    except BaseException:  # (a manifest changes: none fetched is left for a later read)
        storage.prefetch(())
        raise
    manifests.sort(key=lambda m: m.sort_key)
    return manifests


def read_batch(storage: Storage, directory: str, manifest: Manifest, i: int) -> DecodedBatch:
    """Batch ``i`` of ``manifest``, read and decoded (every rule of the format checked).

    Raises:
        TraceFormatError: the batch is damaged (naming the file and the place in it).
    """
    entry = manifest.batches[i]
    path = os.path.join(directory, entry.fn)
    data = storage.read_bytes(entry.fn, MAX_BATCH_JSON_BYTES)
    budget = min(MAX_DECODED_BYTES, JSONARRAY_RATIO * len(data))  # (§9: jsonarray values)
    blob = BatchBlob(manifest.blob_name(i), storage.map, path, budget)
    after = i > 0 and manifest.batches[i - 1].continues
    return decode_batch(data, entry, blob, legacy=manifest.legacy, after_continues=after)


def read_ahead(storage: Storage, batches: Iterable[tuple[Manifest, int]]) -> int:
    """Have ``storage`` fetch the files of the first of ``batches`` at once.

    ``batches`` are ``(manifest, i)``, in the order they will be read: as many as the storage
    fetches at once, and about :data:`READ_AHEAD_BYTES`. Returns how many batches that is
    (0 for a local disk, which fetches none ahead).
    """
    if storage.parallel_reads <= 1:
        return 0
    reads: list[tuple[str, int | None]] = []
    n, budget = 0, READ_AHEAD_BYTES
    for m, i in batches:
        if len(reads) >= storage.parallel_reads or budget < 0:
            break
        reads.append((m.batches[i].fn, MAX_BATCH_JSON_BYTES))
        if not m.legacy:  # (as read_batch reads it: its blob, mapped whole)
            reads.append((m.blob_name(i), None))
        n, budget = n + 1, budget - (m.batches[i].bytes or 0)
    storage.prefetch(reads)
    return n


@dataclass(frozen=True)
class _Writer:
    """A manifest, and how many episodes start in each of its batches (and at which object)."""

    manifest: Manifest
    starts: tuple[int, ...]
    first_obj: tuple[int, ...]
    cum: tuple[int, ...]  # episodes starting before each batch

    @classmethod
    def of(cls, m: Manifest) -> _Writer:
        starts, first_obj = [], []
        prev_continues = False
        for b in m.batches:
            skip = 1 if prev_continues else 0  # its first object continues an earlier episode
            starts.append(b.len - skip)
            first_obj.append(skip)
            prev_continues = b.continues
        if prev_continues and m.batches:
            # The last part of an episode is not written yet: hide the unfinished episode,
            # which starts in the last batch where any episode starts.
            k = len(starts) - 1
            while k > 0 and starts[k] == 0:
                k -= 1
            starts[k] -= 1
        cum = tuple(itertools.accumulate(starts, initial=0))
        return cls(m, tuple(starts), tuple(first_obj), cum)


def _frozen(batch: DecodedBatch, j: int) -> bool:
    """Whether episode ``j`` holds read-only arrays of no Python objects: nothing to change."""
    values = (batch.observations[j], batch.actions[j], batch.rewards[j])
    return (
        all(type(v) is np.ndarray and not (v.flags.writeable or v.dtype.hasobject) for v in values)
        and batch.options[j] is None
        and batch.infos[j] is None
    )


def _episodes(batch: DecodedBatch, m: Manifest, first: int, k: int, idx: int) -> Iterator[Episode]:
    """Episodes ``idx ..`` of writer ``m``: the ``k`` objects of ``batch`` from ``first`` on."""
    s = slice(first, first + k)
    return map(
        Episode,
        batch.observations[s],
        batch.actions[s],
        batch.rewards[s],
        batch.keys[s],
        batch.options[s],
        batch.infos[s],
        range(idx, idx + k),
        itertools.repeat(m.writer, k),
        itertools.repeat(m.env_id, k),
        itertools.repeat(m.env_spec, k),
        batch.render_frames[s],
        itertools.repeat(m.render_fps, k),
    )


class Recording(Sequence[Episode]):
    """The episodes of a recording directory, in writer order; random access loads one batch.

    Use :func:`load` to open one. Arrays are read-only, zero-copy views of the files, and stay
    valid after :meth:`close`.

    Args:
        directory: The recording directory, or an fsspec URL (``"s3://bucket/run1"``).
        storage_options: For a URL, options for its filesystem (``{"endpoint_url": ...}``);
            by default the standard configuration applies. Ignored for local paths.
        mmap: Map the blobs (the default). ``False`` reads them into memory, for a
            directory that another program may truncate while arrays are in use.

    Raises:
        TraceFormatError: a manifest is damaged or the directory is missing.
        TypeError: ``mmap`` is not a bool.

    Warns:
        NoRecordingWarning: the directory holds files but none of a recording (a wrong path:
            a recording's parent directory, say). It opens with no episodes.

    Example:
        >>> import tempfile, gymnasium as gym, gym_recording
        >>> from gym_recording.wrappers import TraceRecordingWrapper
        >>> d = tempfile.mkdtemp()
        >>> with TraceRecordingWrapper(gym.make("CartPole-v1"), d) as env:
        ...     obs, info = env.reset(seed=1)
        ...     obs, *_ = env.step(0)
        >>> with gym_recording.load(d) as rec:
        ...     len(rec), rec[0].observations.shape, rec[0].seed
        (1, (2, 4), 1)
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        storage_options: dict[str, Any] | None = None,
        mmap: bool = True,
    ) -> None:
        if not isinstance(mmap, (bool, np.bool_)):  # (a truthy "no" would map the files)
            msg = (
                f"expected mmap to be True (map the files) or False (read them into memory), "
                f"got {mmap!r:.60}"
            )
            raise TypeError(msg)
        self._storage: Storage = open_storage(
            directory, create=False, storage_options=storage_options, mmap=mmap
        )
        #: Where it reads: a URL, or an absolute path (a relative one is made absolute).
        self.directory = self._storage.location
        # Decoded batches, each with the objects whose episodes were handed out: an episode
        # handed out again is decoded again if it holds a container (an info or option dict,
        # a Dict observation) the user may have changed.
        self._cache: OrderedDict[tuple[str, int], tuple[DecodedBatch, set[int]]] = OrderedDict()
        self._ahead: set[tuple[str, int]] = set()  # batches a remote storage fetched ahead
        self._lock, self._lock_pid = threading.Lock(), os.getpid()  # (of both: see _guard)
        self._codecs: set[str] = set()  # of the compressed arrays of the batches read
        self.closed = False
        self._writers: list[_Writer] = []
        self._cum: list[int] = [0]  # episodes before each writer
        self._scan()
        if not self._writers:
            names = self._storage.list_names()
            if holds_no_recording(names):
                msg = f"{self.directory} {no_recording(names)}"
                warnings.warn(msg, NoRecordingWarning, stacklevel=3)

    # ---------------------------------------------------------------- index

    def _scan(self) -> None:
        self._writers = [_Writer.of(m) for m in read_manifests(self._storage, self.directory)]
        self._cum = list(itertools.accumulate((w.cum[-1] for w in self._writers), initial=0))
        with self._guard():
            self._cache.clear()
            self._ahead = set()

    def refresh(self) -> None:
        """Re-read the manifests, to see batches written since the recording was opened."""
        self._check_open()
        self._scan()

    @property
    def writers(self) -> list[Manifest]:
        """The manifests of the writers, in reading order."""
        return [w.manifest for w in self._writers]

    @property
    def metadata(self) -> dict[str, Any]:
        """The user metadata of the first writer (``{}`` if none): a copy, to change."""
        return copy.deepcopy(self._writers[0].manifest.metadata) if self._writers else {}

    @property
    def env_id(self) -> str | None:
        """The environment id recorded by the first writer that has one."""
        return next((w.manifest.env_id for w in self._writers if w.manifest.env_id), None)

    @property
    def observation_space(self) -> Any:
        """The observation space (a gymnasium space), if recorded."""
        return self._space("observation_space")

    @property
    def action_space(self) -> Any:
        """The action space (a gymnasium space), if recorded."""
        return self._space("action_space")

    @property
    def codecs(self) -> list[str]:
        """The codecs of the compressed arrays (FORMAT.md §6.2) in the batches read so far.

        Sorted: ``["zstd"]``, or ``[]`` while no batch read holds a compressed array.
        Reading every episode (iterating over the recording) reads every batch.

        Example:
            >>> import tempfile, numpy as np, gym_recording
            >>> d = tempfile.mkdtemp()
            >>> with gym_recording.TraceRecording(d, compression="zstd") as w:
            ...     w.add_reset(np.zeros(1000))
            >>> with gym_recording.load(d) as rec:
            ...     before = rec.codecs
            ...     _ = list(rec)
            ...     before, rec.codecs
            ([], ['zstd'])
        """
        return sorted(self._codecs)

    def _space(self, key: str) -> Any:
        for w in self._writers:
            d = getattr(w.manifest, key)
            if d is not None:
                path = os.path.join(self.directory, w.manifest.name)
                try:
                    return space_from_json(d, where=key)
                except TraceFormatError as exc:
                    raise TraceFormatError(str(exc), path) from None
        return None

    # ---------------------------------------------------------------- access

    def __len__(self) -> int:
        return self._cum[-1]

    @overload
    def __getitem__(self, i: int | np.integer[Any]) -> Episode: ...

    @overload
    def __getitem__(self, i: slice) -> list[Episode]: ...

    def __getitem__(self, i: int | np.integer[Any] | slice) -> Episode | list[Episode]:
        self._check_open()
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if not isinstance(i, (int, np.integer)) or isinstance(i, bool):
            msg = f"episode indices must be integers or slices, not {type(i).__name__}"
            raise TypeError(msg)
        n = len(self)
        idx = int(i) + n if i < 0 else int(i)
        if not 0 <= idx < n:
            msg = f"episode index {i} out of range for a recording of {n} episodes"
            raise IndexError(msg)
        w = bisect.bisect_right(self._cum, idx) - 1
        writer = self._writers[w]
        k = idx - self._cum[w]
        b = bisect.bisect_right(writer.cum, k) - 1  # the last batch starting at or before k
        return self._episode(idx, writer.manifest, b, writer.first_obj[b] + k - writer.cum[b])

    def __iter__(self) -> Iterator[Episode]:
        idx = 0
        for writer in list(self._writers):  # (those of when it began, even after a refresh)
            m = writer.manifest
            for b, (n, first) in enumerate(zip(writer.starts, writer.first_obj, strict=True)):
                if not n:
                    continue
                self._check_open()
                # Only a batch's last object continues (as its entry says): if it is this
                # batch's last episode, _episode joins it with its parts, after the others.
                entry, last = m.batches[b], first + n - 1
                k = n - (entry.continues and last == entry.len - 1)
                batch = self._batch(m, b, range(first, first + k), ahead=True)  # (once a batch)
                yield from _episodes(batch, m, first, k, idx)
                idx += k
                if k < n:
                    yield self._episode(idx, m, b, last, ahead=True)
                    idx += 1

    def _batch(
        self, m: Manifest, b: int, objs: Iterable[int], *, ahead: bool = False
    ) -> DecodedBatch:
        """Batch ``b`` of manifest ``m``, decoded whole and cached, for its objects ``objs``.

        Decoded again if an object of ``objs`` holding a container was handed out from the
        cached one.

        From a remote storage, with ``ahead`` (reading in order), its files and those of the
        next batches are fetched at once; not for reads out of order (``rec[i]``), which
        would fetch many batches to read one, and leave what was fetched ahead as it is.
        """
        key = (m.name, b)
        with self._guard():
            hit = self._cache.get(key)
            if hit is not None and all(_frozen(hit[0], j) for j in hit[1].intersection(objs)):
                self._cache.move_to_end(key)
                hit[1].update(objs)
                return hit[0]
            fetched = key in self._ahead
            self._ahead.discard(key)
        if not fetched and ahead and self._storage.parallel_reads > 1:
            self._read_ahead(m, b)
        batch = read_batch(self._storage, self.directory, m, b)  # (threads decode side by side)
        with self._guard():
            self._codecs |= batch.codecs
            self._cache[key] = (batch, set(objs))
            self._cache.move_to_end(key)  # (in place of one decoded before)
            while len(self._cache) > _BATCH_CACHE:
                self._cache.popitem(last=False)
        return batch

    def _guard(self) -> threading.Lock:
        """The lock of the cached batches, for reads from several threads.

        This process's: one made again in a forked child (a thread of the parent may have
        held it) or where the recording was unpickled.
        """
        if self._lock_pid != os.getpid():
            self._lock, self._lock_pid = threading.Lock(), os.getpid()
        return self._lock

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_lock"]  # (a lock cannot be pickled; the unpickled recording makes its own)
        state["_lock_pid"] = 0
        return state

    def _read_ahead(self, m: Manifest, b: int) -> None:
        """Have a remote storage fetch batch ``b`` of manifest ``m``, and the next ones.

        Those fetched already (by another iteration, say) are not fetched again.
        """
        keys: list[tuple[str, int]] = []
        ms = [w.manifest for w in self._writers]
        after = next((v + 1 for v, x in enumerate(ms) if x.name == m.name), len(ms))

        def order() -> Iterator[tuple[Manifest, int]]:
            for x, first in itertools.chain([(m, b)], ((x, 0) for x in ms[after:])):
                for c in range(first, len(x.batches)):
                    if (x.name, c) not in self._ahead:
                        keys.append((x.name, c))
                        yield x, c

        fetched = keys[: read_ahead(self._storage, order())]
        with self._guard():
            if len(self._ahead) > 100_000:  # (left by iterations given up: let go)
                self._ahead.clear()
            self._ahead.update(fetched[1:])  # (the first is read now)

    def _episode(self, idx: int, m: Manifest, b: int, j: int, *, ahead: bool = False) -> Episode:
        """Episode ``idx``: object ``j`` of batch ``b`` of manifest ``m``, joined with its parts."""
        batch = self._batch(m, b, (j,), ahead=ahead)
        parts = [(batch, j)]
        while parts[-1][0].continues[parts[-1][1]]:
            b += 1
            if b >= len(m.batches):  # (the manifest's check rules this out)
                msg = "an episode continues past the last batch listed"
                raise TraceFormatError(msg, os.path.join(self.directory, m.name))
            parts.append((self._batch(m, b, (0,), ahead=ahead), 0))
        if len(parts) > 1 or batch.part[j]:
            batch, j = join_parts(parts, os.path.join(self.directory, m.name)), 0
        return next(_episodes(batch, m, j, 1, idx))

    # ---------------------------------------------------------------- lifetime

    def _check_open(self) -> None:
        if self.closed:
            msg = f"the recording {self.directory!r} is closed; load() it again to read more"
            raise RecordingClosedError(msg)

    def close(self) -> None:
        """Drop the cached batches. Arrays already handed out stay valid."""
        with self._guard():
            self._cache.clear()
        self._storage.prefetch(())  # (files fetched ahead, not read)
        self.closed = True

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"<Recording {self.directory!r}: {len(self)} episodes from "
            f"{len({w.manifest.writer for w in self._writers})} writer(s)>"
        )

    # ---------------------------------------------------------------- notebook helpers

    def _repr_html_(self) -> str:
        """A compact HTML summary for Jupyter: counts from the manifests, the first episodes.

        Cheap on any size of recording: it reads the manifests (already loaded) and only the
        batches holding the first 10 episodes.
        """
        return notebook.recording_html(self)

    def summary(self) -> Any:
        """One row per episode as a pandas DataFrame (needs the ``notebook`` extra).

        Indexed by episode ``index``, with columns ``writer``, ``length``, ``total_reward``,
        ``terminated``, ``truncated``, ``seed`` (nullable int; Python ints where one is past
        int64) and, when the writer recorded wall-clock times, ``started_at``/``ended_at``
        (UTC timestamps) and ``duration`` (seconds). Reads every batch once.

        Returns:
            A ``pandas.DataFrame``.

        Example:
            >>> import tempfile, numpy as np, gym_recording
            >>> d = tempfile.mkdtemp()
            >>> with gym_recording.TraceRecording(d) as w:
            ...     w.add_reset(np.zeros(2), seed=3)
            ...     w.add_step(0, np.ones(2), 1.5, terminated=True)
            >>> gym_recording.load(d).summary()[["length", "total_reward", "seed"]]
                   length  total_reward  seed
            index
            0           1           1.5     3
        """
        return notebook.recording_summary(self)

    def steps(self, episodes: Any = None, *, next_obs: bool = False, max_columns: int = 16) -> Any:
        """Every step of the chosen episodes as one pandas DataFrame (``notebook`` extra).

        The columns of :meth:`Episode.to_pandas`, preceded by ``episode``. Reads every chosen
        episode: choose a few with ``episodes`` on a large recording.

        Args:
            episodes: An episode index, a slice, indices, or a mask (one bool per episode,
                such as ``rec.summary()["length"] > 100``); ``None`` for all.
            next_obs: Also add the observation each step led to.
            max_columns: The most components an array may have to be split into columns.

        Returns:
            A ``pandas.DataFrame``, one row per step.

        Example:
            >>> import tempfile, numpy as np, gym_recording
            >>> d = tempfile.mkdtemp()
            >>> with gym_recording.TraceRecording(d) as w:
            ...     w.add_reset(np.zeros(2, np.float32))
            ...     w.add_step(1, np.ones(2, np.float32), 0.5, terminated=True)
            >>> gym_recording.load(d).steps().columns.tolist()
            ['episode', 'step', 'obs_0', 'obs_1', 'action', 'reward', 'terminated', 'truncated']
        """
        return notebook.recording_steps(self, episodes, next_obs=next_obs, max_columns=max_columns)

    def plot_returns(self, window: int = 10, ax: Any = None) -> Any:
        """Plot each episode's return and their rolling mean (needs the ``notebook`` extra).

        Args:
            window: The episodes averaged by the rolling mean.
            ax: A matplotlib ``Axes`` to draw on; default a new figure.

        Returns:
            The matplotlib ``Axes`` (``ax.figure`` is the figure).

        Example:
            >>> import tempfile, numpy as np, gym_recording
            >>> d = tempfile.mkdtemp()
            >>> with gym_recording.TraceRecording(d) as w:
            ...     for r in (1.0, 3.0, 2.0):
            ...         w.add_reset(np.zeros(2))
            ...         w.add_step(0, np.ones(2), r, terminated=True)
            >>> ax = gym_recording.load(d).plot_returns(window=2)
            >>> ax.get_xlabel()
            'episode'
        """
        return notebook.recording_plot_returns(self, window=window, ax=ax)


def load(
    directory: str | os.PathLike[str],
    *,
    storage_options: dict[str, Any] | None = None,
    mmap: bool = True,
) -> Recording:
    """Open the recording in ``directory`` for reading.

    Arrays are read-only views of the files, memory-mapped. If another program may
    truncate or rewrite the files while their arrays are in use, pass ``mmap=False``:
    touching a mapped array whose bytes were cut from its file kills the process (SIGBUS).
    gym-recording's own writers never change a file once it is written.

    Args:
        directory: A directory written by :class:`~gym_recording.wrappers.TraceRecordingWrapper`,
            :class:`~gym_recording.TraceRecording` or the original gym-recording; or an fsspec
            URL such as ``"s3://bucket/run1"`` (needs the ``remote`` extra).
        storage_options: For a URL, options for its filesystem (``{"endpoint_url": ...}``);
            by default the standard configuration applies (``AWS_ENDPOINT_URL``, fsspec's
            config). Ignored for local paths.
        mmap: Map the blobs (zero-copy, the default), or read each into memory when its batch
            is read.

    Returns:
        A :class:`Recording`: a sequence of :class:`Episode`, usable as a context manager.

    Raises:
        TraceFormatError: the directory is missing or a manifest is damaged. Damaged batches
            raise when their episodes are read.
        TypeError: ``mmap`` is not a bool.
    """
    return Recording(directory, storage_options=storage_options, mmap=mmap)
