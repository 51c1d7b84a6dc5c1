"""What every storage offers: a flat namespace of files, written atomically, read whole or mapped.

The recorder and the readers see storage only through :class:`Storage`; where the bytes live
(a local directory, an object store) is the implementation's business.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Protocol

__all__ = ["BytesLike", "FileToWrite", "PendingWrite", "Storage", "ThreadedWrite"]

BytesLike = bytes | bytearray | memoryview
#: A file for :meth:`Storage.write_files`: its name, its bytes in pieces, and whether the
#: directory is synced after its rename (see :meth:`Storage.write_atomic`).
FileToWrite = tuple[str, Sequence[BytesLike], bool]


class Storage(Protocol):
    """A flat namespace of files, written atomically and read whole or mapped.

    This is the cut between the recording's logic and IO: nothing above it touches a file,
    and nothing here knows what the files mean.
    """

    @property
    def location(self) -> str:
        """Where the files are (a directory path or a URL), for messages."""
        ...

    def write_atomic(
        self, name: str, chunks: Iterable[BytesLike], *, sync_directory: bool = True
    ) -> int:
        """Write ``chunks`` as file ``name`` atomically; return the number of bytes written.

        Readers see either no file ``name`` (or its previous version) or the whole new one.
        With ``sync_directory`` false, a local file's rename may not be durable (survive a
        power loss) until the next write with it, or :meth:`sync`.

        Raises:
            RecordingError: the write failed; nothing of it became visible (or, when only
                the directory's fsync after the rename failed, the message says so).
        """
        ...

    def write_files(self, files: Sequence[FileToWrite], published: list[str]) -> None:
        """Write ``files`` (``(name, chunks, sync_directory)``), each atomically, in this order.

        Each file becomes visible after the ones before it (FORMAT.md §2), and its name is
        appended to ``published`` as it does, so that after a failure the caller knows which
        files to write again.

        Raises:
            RecordingError: as :meth:`write_atomic`, for the first file that failed.
        """
        ...

    def start_write_files(self, files: Sequence[FileToWrite]) -> PendingWrite:
        """:meth:`write_files` started in the background; its ``wait`` ends it.

        The thread that calls it goes on while the files are written (the env keeps
        stepping); the files become visible in order as with :meth:`write_files`.
        """
        ...

    def sync(self) -> None:
        """Make every file written so far durable (a local directory's fsync)."""
        ...

    def read_bytes(self, name: str, max_size: int) -> bytes:
        """Read a whole file, refusing one larger than ``max_size`` bytes.

        Raises:
            TraceFormatError: the file is missing, not a regular file, or too large.
        """
        ...

    def map(self, name: str) -> memoryview:
        """Read-only bytes of a whole file (memory-mapped where the storage allows it)."""
        ...

    def list_names(self) -> list[str]:
        """The plain names of the files present (no subdirectories)."""
        ...

    #: How many files are worth fetching at once (see :meth:`prefetch`): many for an object
    #: store, whose requests overlap; 1 for a local disk.
    parallel_reads: int

    def prefetch(self, reads: Sequence[tuple[str, int | None]]) -> None:
        """Fetch the files about to be read, at once.

        ``reads`` holds ``(name, max_size)`` for a :meth:`read_bytes` of that ``max_size`` to
        come, ``(name, None)`` for a :meth:`map`. Each of those calls then takes its file
        from memory, once. Files fetched and not read yet are kept up to a bound (the oldest
        let go first); an empty ``reads`` lets go of them all. A hint: nothing is checked or
        raised here, the calls still do so.
        """
        ...

    def remove(self, name: str) -> None:
        """Delete a file."""
        ...


class PendingWrite(Protocol):
    """A :meth:`Storage.write_files` running in the background."""

    def wait(self, published: list[str]) -> None:
        """Wait for the write; then as :meth:`Storage.write_files`.

        Waiting again (after an interrupted wait) reports nothing more.

        Raises:
            RecordingError: as :meth:`Storage.write_files`.
        """
        ...


class ThreadedWrite:
    """``storage.write_files(files)`` on a Python thread of its own: a :class:`PendingWrite`."""

    def __init__(self, storage: Storage, files: Sequence[FileToWrite]) -> None:
        self._published: list[str] = []
        self._error: BaseException | None = None
        # (Waited for, not joined: on CPython 3.11 an interrupted join may take the thread,
        # still writing, for stopped.)
        self._ended = threading.Event()

        def run() -> None:
            try:
                storage.write_files(files, self._published)
            except BaseException as exc:  # handed to the caller by wait()
                self._error = exc
            finally:
                self._ended.set()

        threading.Thread(target=run, name="gym-recording-writer", daemon=True).start()

    def wait(self, published: list[str]) -> None:
        """Wait for the write; then as :meth:`Storage.write_files`."""
        self._ended.wait()
        names, self._published = self._published, []
        published.extend(names)
        if self._error is not None:
            error, self._error = self._error, None
            raise error
