"""Write scheduling: a writer's batches named, encoded and written in order, and its manifest.

:class:`BatchWriter` owns everything about a writer's files: the names of its batches and
segments, its manifest, the size its batches aim at, and when and where each batch is
written. A batch's three files are published in FORMAT.md §2's order (blob, batch JSON,
manifest), each atomically; one batch is in flight at a time, which keeps that order across
batches.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from gym_recording._errors import RecordingError, WriteError
from gym_recording.format.batch import Span, finish_batch, lay_out_batch
from gym_recording.format.codec import Compressor
from gym_recording.format.manifest import encode_manifest
from gym_recording.format.names import batch_names, manifest_name, segment_id, writer_prefix
from gym_recording.format.wire import BatchEntry, ManifestDoc
from gym_recording.record.lifetime import uninterrupted
from gym_recording.storage.base import BytesLike, PendingWrite, Storage

__all__ = ["MAX_BATCH_EPISODES", "MAX_BATCH_STEPS", "BatchWriter", "checked_batch_bytes"]

#: Steps per batch are clamped to this range (as in the original writer).
MIN_BATCH_STEPS = 1
MAX_BATCH_STEPS = 50_000
#: A batch of only zero-step episodes is flushed at this many episodes.
MAX_BATCH_EPISODES = 50_000
#: An episode split across batches has parts of at least this many steps: each part repeats
#: the observation (and rendered frame) the previous one ended with (FORMAT.md §4), which
#: steps larger than ``batch_bytes`` would otherwise store twice.
MIN_PART_STEPS = 8
#: A writer starts a new manifest (segment) after this many batches.
SEGMENT_BATCHES = 1000
#: A batch is written in the recording thread when its write is expected to take less than
#: this share of the time the batch took to fill: a thread would cost more than it saves.
FOREGROUND_WRITE_SHARE = 0.02
#: While batches go to the background, every this many is written in the foreground to
#: measure what a write costs now.
FOREGROUND_PROBE_EVERY = 32
#: With compression, a batch holds at most this many bytes of arrays before they are
#: compressed (what the writer buffers, and a reader decompresses at once).
MAX_RAW_BATCH_BYTES = 64 * 1024 * 1024

Files = list[tuple[str, list[BytesLike], bool]]


def checked_batch_bytes(batch_bytes: Any) -> int:
    """``batch_bytes``, the size batches aim at, as an int (a NumPy integer too).

    Raises:
        ValueError: it is not a positive integer.
    """
    integer = isinstance(batch_bytes, (int, np.integer)) and not isinstance(batch_bytes, bool)
    if not integer or batch_bytes < 1:
        msg = f"expected batch_bytes to be a positive int, got {batch_bytes!r}"
        raise ValueError(msg)
    return int(batch_bytes)


class _WriteJob:
    """A batch's files (``(name, chunks, sync_directory)``), published in order.

    Run in the caller's thread (:meth:`run`) or in the background (:meth:`start`, the
    storage's ``start_write_files``). With ``prepare``, the files are made first, by
    ``prepare()`` (a compressed batch), and the job runs in the background on a Python
    thread. An error is kept and raised by :meth:`wait`; the job owns its bytes, so it can
    be run again.
    """

    def __init__(
        self, storage: Storage, files: Files, prepare: Callable[[], Files] | None = None
    ) -> None:
        self.storage = storage
        self.files = files
        self.prepare = prepare
        self.done = 0  # files written
        self.error: Exception | None = None
        self.pending: PendingWrite | None = None
        self.thread: threading.Thread | None = None
        #: Set once :meth:`run` ends: what :meth:`wait` waits for. Not ``Thread.join()``:
        #: on CPython 3.11 an interrupted join may take a thread still writing for stopped,
        #: and the job would then run twice at once (an older manifest renamed last).
        self.ended = threading.Event()
        self.seconds = 0.0

    def run(self) -> None:
        """Write the files not written yet; keep an error for :meth:`wait`."""
        t = time.perf_counter()
        published: list[str] = []
        try:
            if self.prepare is not None:
                try:
                    self.files = self.prepare()
                except RecordingError:
                    raise
                except Exception as exc:  # (zstd's, or memory: the batch stays, as a write's)
                    msg = f"could not encode or compress the batch ({exc!r}); it is tried again"
                    raise WriteError(msg) from exc
                self.prepare = None
            self.storage.write_files(self.files[self.done :], published)
        except Exception as exc:  # raised by wait()
            self.error = exc
        finally:
            self.done += len(published)
            self.seconds = time.perf_counter() - t
            self.ended.set()

    def start(self) -> None:
        if self.prepare is None:
            self.pending = self.storage.start_write_files(self.files[self.done :])
            return
        thread = threading.Thread(target=self.run, name="gym-recording-writer", daemon=True)
        self.ended.clear()
        try:
            with uninterrupted():  # (started and known, or neither: else it would run twice)
                thread.start()
                self.thread = thread
        except RuntimeError:  # (no thread can start: the write is done here)
            self.run()

    def wait(self) -> None:
        """Wait for the write; raise its error (the job can then be run again)."""
        if self.thread is not None:
            self.ended.wait()  # (interrupted: the next wait waits again, for the same run)
            self.thread = None
        if self.pending is not None:
            published: list[str] = []
            try:
                self.pending.wait(published)
            except Exception as exc:
                self.error = exc
            finally:  # (what was published counts, even if the wait is interrupted)
                self.done += len(published)
            self.pending = None
        if self.error is not None:
            error, self.error = self.error, None
            raise error

    @property
    def finished(self) -> bool:
        return self.prepare is None and self.done == len(self.files)


class BatchWriter:
    """Names, encodes and writes one writer's batches, and keeps its manifest.

    Args:
        storage: Where the files go.
        writer_id: The writer's id (segments add ``.s<k>``).
        head: The manifest's keys other than ``batches`` and ``segment`` (§3).
        batch_bytes: The size a batch (blob plus JSON) aims at.
        compressor: Compresses every array (FORMAT.md §6.2), on a writer thread; a batch then
            also holds at most :data:`MAX_RAW_BATCH_BYTES` of arrays before compression.
    """

    def __init__(
        self,
        storage: Storage,
        writer_id: str,
        head: dict[str, Any],
        batch_bytes: int,
        compressor: Compressor | None = None,
    ) -> None:
        self.storage = storage
        self.writer_id = writer_id
        self.batch_bytes = batch_bytes
        self.compressor = compressor
        # The sizes per step of the last batch encoded on the writer's thread: on disk, of
        # its arrays, and before compression (for size_for).
        self._measured: tuple[float, float, float] | None = None
        self._head = head
        #: Batches written, all segments.
        self.batch_count = 0
        #: Steps per batch, adapted after each batch; an episode alone is split at
        #: ``split_steps``.
        self.target_steps = MAX_BATCH_STEPS
        self.split_steps = MAX_BATCH_STEPS
        self._segment = -1
        self._job: _WriteJob | None = None
        #: A write failed (twice): its error, for the caller to raise once it has recorded
        #: what it brought (:meth:`raise_kept`); tried again once ``retry_at`` rows are kept.
        self.failed: WriteError | None = None
        self.retry_at = 0
        self._unsynced = False  # a manifest was renamed without the directory's fsync
        # What a write costs, measured in the foreground (None: not yet), when the current
        # batch began to fill, and background writes since the last measurement.
        self._write_seconds: float | None = None
        self._filling_since = time.perf_counter()
        self._background = 0
        self._start_segment()

    # ------------------------------------------------------------------ naming and sizing

    @property
    def file_prefix(self) -> str:
        """The prefix of the current segment's files."""
        return writer_prefix(segment_id(self.writer_id, self._segment))

    def _start_segment(self) -> None:
        """Continue in a new manifest, so that no flush rewrites an ever-growing manifest."""
        self._segment += 1
        self._manifest = ManifestDoc([], segment=self._segment, **self._head)
        self._objects = 0  # episode objects in this segment (parts count one each)

    def size_for(
        self, bytes_per_step: float, row_bytes: float, raw_per_step: float | None = None
    ) -> None:
        """Aim batches at ``batch_bytes``, for steps of ``bytes_per_step`` on disk.

        An episode alone is split once its arrays (``row_bytes`` a step) pass 1.25x. With
        compression, batches also hold at most :data:`MAX_RAW_BATCH_BYTES` of arrays before
        compression (``raw_per_step`` a step; default ``bytes_per_step``).
        """
        limit = self.array_limit
        if self.compressor is not None:
            raw = bytes_per_step if raw_per_step is None else raw_per_step
            bytes_per_step = max(bytes_per_step, raw * self.batch_bytes / limit)
        target = int(self.batch_bytes / max(bytes_per_step, 1.0) + 1)
        self.target_steps = max(MIN_BATCH_STEPS, min(MAX_BATCH_STEPS, target))
        split = int(1.25 * limit / max(row_bytes, 1.0))
        self.split_steps = max(self.target_steps, min(MAX_BATCH_STEPS, split), MIN_PART_STEPS)

    @property
    def array_limit(self) -> int:
        """The bytes of arrays a batch aims at.

        ``batch_bytes``; with compression, :data:`MAX_RAW_BATCH_BYTES` before compression if
        that is more.
        """
        if self.compressor is not None:
            return max(self.batch_bytes, MAX_RAW_BATCH_BYTES)
        return self.batch_bytes

    def rows_within(self, row_bytes: int) -> int:
        """How many rows of ``row_bytes`` a batch holds before an episode is split (1.25x).

        At least a part's :data:`MIN_PART_STEPS` steps, and the row before them.
        """
        rows = int(1.25 * self.array_limit / max(row_bytes, 1))
        return max(MIN_PART_STEPS + 1, min(MAX_BATCH_STEPS, rows))

    # ------------------------------------------------------------------ writing

    def submit(
        self,
        observations: Any,
        actions: Any,
        rewards: np.ndarray,
        spans: Sequence[Span],
        frames: Any = None,
    ) -> None:
        """Take a batch into the writer's books (and encode it, or have :meth:`launch` do it).

        ``frames`` are the rendered frames the spans' ``frame_start:frame_stop`` index (an
        array, or a compressed recording's :class:`~gym_recording.record.frames.StreamedFrames`
        taken). Then :meth:`launch` writes it; until it does, the next :meth:`wait` would.

        Waits for the previous batch's write first (one in flight keeps the order).

        Raises:
            RecordingError: the previous batch's write failed twice (see :meth:`wait`).
        """
        first = self._objects
        batch_fn, bin_fn = batch_names(self.file_prefix, first)
        steps = sum(sp.act_stop - sp.act_start for sp in spans)
        entry = BatchEntry(first, len(spans), batch_fn, bin_fn, steps, None, spans[-1].continues)
        manifest_fn = manifest_name(self.file_prefix)
        compressor = self.compressor
        # A batch with infos (values encoded one by one) or to compress is encoded on the
        # writer's thread; the others here (their encoding costs less than a thread).
        deferred = compressor is not None or any(sp.infos is not None for sp in spans)
        laid_out = None
        if not deferred:
            try:
                laid_out = lay_out_batch(observations, actions, rewards, spans, bin_fn, frames)
            except Exception:  # (made again on the writer's thread, below)
                deferred = True
        self.wait()
        if self._measured is not None:  # (the last deferred batch's sizes)
            self.size_for(*self._measured)
            self._measured = None
        manifest = self._manifest
        manifest.batches.append(entry)

        def files() -> Files:
            # The three files are renamed in order, the directory fsynced once, after the
            # batch JSON: that makes the blob's and its own rename durable before the
            # manifest names them. The manifest's rename is made durable by the next
            # batch's, or by save().
            batch, layout = laid_out or lay_out_batch(
                observations, actions, rewards, spans, bin_fn, frames
            )
            raw = layout.size + layout.precompressed
            json_bytes, chunks, blob_size = finish_batch(batch, layout, compressor)
            entry.bytes = blob_size + len(json_bytes)
            if steps:
                sizes = (entry.bytes / steps, raw / steps, (raw + len(json_bytes)) / steps)
                if deferred:
                    self._measured = sizes
                else:
                    self.size_for(*sizes)
            return [
                (bin_fn, chunks, False),
                (batch_fn, [json_bytes], True),
                (manifest_fn, [encode_manifest(manifest)], False),
            ]

        # (deferred: the files are made on the writer's thread, by files(); as they are if
        # making them here fails, so that the batch is kept and its error raised as a write's)
        job = None
        if not deferred:
            with contextlib.suppress(Exception):
                job = _WriteJob(self.storage, files())
        if job is None:
            deferred = True  # (files() then keeps its sizes for the next batch, as deferred)
            job = _WriteJob(self.storage, [], files)
        self._job = job
        self._unsynced = True
        self._objects += len(spans)
        self.batch_count += 1
        if len(manifest.batches) >= SEGMENT_BATCHES and not entry.continues:
            self._start_segment()

    def launch(self, *, background: bool = False) -> None:
        """Write the batch :meth:`submit` took: here, or in the background when it is costly.

        A write that costs little next to the time the batch took to fill is done in this
        thread; a costly one (large frames, a slow disk, object storage) goes to a thread of
        its own, and every :data:`FOREGROUND_PROBE_EVERY`-th is done here again to see
        whether that still holds. With ``background`` it goes to the background whatever it
        costs.
        """
        job = self._job
        if job is None or job.done or job.thread is not None or job.pending is not None:
            return
        deferred = job.prepare is not None
        now = time.perf_counter()
        filled_in, self._filling_since = now - self._filling_since, now
        cost = self._write_seconds
        if not (deferred or background) and (
            cost is None
            or cost < FOREGROUND_WRITE_SHARE * filled_in
            or (self._background >= FOREGROUND_PROBE_EVERY)
        ):
            self._background = 0
            job.run()  # an error is raised by the next wait(), as for a thread
            if job.error is None:
                self._write_seconds = job.seconds
        else:
            self._background += 1
            job.start()

    @property
    def entries(self) -> list[BatchEntry]:
        """The current segment's batch entries."""
        return self._manifest.batches

    @property
    def busy(self) -> bool:
        """Whether a batch's write is in flight or failed (not yet waited for)."""
        return self._job is not None

    def wait(self) -> None:
        """Wait for the batch being written; if its write failed, retry it once, here.

        Raises:
            WriteError: the write failed again. Nothing of that batch is visible to
                readers; it is retried at the next wait.
        """
        job = self._job
        if job is None:
            return
        try:
            job.wait()
            if not job.finished:  # an earlier attempt failed and said so: try again
                job.run()
                job.wait()
        except RecordingError:
            job.run()  # the files written already are not written again
            try:
                job.wait()
            except WriteError as exc:  # (its message says so: it read as data lost)
                kept = f"{exc}; the batch stays buffered: the next flush or close() writes it"
                # (caused by what the write met, as it was; exc is its __context__)
                raise WriteError(f"{kept} (free space first, if the disk is full)") from (
                    exc.__cause__
                )
        self._job, self.retry_at = None, 0

    def wait_or_keep(self, buffered: int) -> bool:
        """:meth:`wait`; ``False`` if the write failed again, its error kept in :attr:`failed`.

        It is tried again once twice the ``buffered`` rows (steps and resets) are:
        :attr:`retry_at`.
        """
        try:
            self.wait()
        except WriteError as exc:
            self.failed, self.retry_at = exc, 2 * buffered + 1
            return False
        return True

    def write_after(self, steps: int) -> int:
        """The room of a batch full at ``steps`` steps: the next step.

        It is written then or, while writes fail, kept as a batch by itself.
        """
        return steps + 1

    def raise_kept(self) -> None:
        """Raise the error :meth:`wait_or_keep` kept, if any (once)."""
        if self.failed is not None:
            exc, self.failed = self.failed, None
            raise exc

    def refusal(self, what: str) -> RecordingError:
        """``what`` refused, as it needs the kept failed write written first (kept no longer)."""
        exc, self.failed = self.failed, None
        msg = f"{what} is refused until a batch before it is written ({exc}): nothing is recorded"
        error = RecordingError(f"{msg}. It is tried again at the next flush or close")
        error.__cause__ = exc
        return error

    def save(self) -> None:
        """Wait for the writes, and make the last manifest's rename durable."""
        self.wait()
        if self._unsynced:
            self.storage.sync()
            self._unsynced = False

    def finish(self, *, empty_manifest: bool = True) -> None:
        """:meth:`save`; a writer that wrote no batch still writes its manifest.

        With ``empty_manifest`` false it writes none then.
        """
        self.save()
        if not self.batch_count and empty_manifest:
            self.storage.write_atomic(
                manifest_name(self.file_prefix), [encode_manifest(self._manifest)]
            )
