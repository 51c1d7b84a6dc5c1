"""Atomic file IO: the only module that writes trace bytes to a filesystem.

A :class:`Storage` is a flat namespace of files (a directory). Writers hand it whole files as
sequences of byte chunks; each file appears atomically (temporary file, fsync, rename, fsync of
the directory) through the ``atomicwrites`` package, or, where the optional C extension is built
(POSIX), through ``_speedups.write_files``: the same protocol with the GIL released once per call
instead of at every system call, which matters on the recording's background writer thread. A
batch's files go through it together (:meth:`LocalStorage.write_files`): all written and
fsynced, then renamed in order.
Readers get bytes or a read-only memory map.
"""

from __future__ import annotations

import mmap
import os
import random
import re
import secrets
import stat
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, TypeGuard

from atomicwrites import AtomicWriter

from gym_recording._cext import speedups as _speedups
from gym_recording._errors import RecordingError, TraceFormatError

__all__ = [
    "TEMP_PREFIX",
    "FileToWrite",
    "LocalStorage",
    "PendingWrite",
    "Storage",
    "is_plain_name",
    "is_url",
    "open_storage",
    "write_in_turn",
]

#: Prefix of the temporary files that atomic writes leave behind if the process dies mid-write.
TEMP_PREFIX = ".gymrec-tmp-"

_PLAIN_NAME = re.compile(r"^[^/\\\x00]+$")

# The permission bits a normal ``open()`` would give a new file (mkstemp uses 0600).
_UMASK = os.umask(0)
os.umask(_UMASK)
_FILE_MODE = 0o666 & ~_UMASK

BytesLike = bytes | bytearray | memoryview
#: A file for :meth:`Storage.write_files`: its name, its bytes in pieces, and whether the
#: directory is synced after its rename (see :meth:`LocalStorage.write_atomic`).
FileToWrite = tuple[str, Iterable[BytesLike], bool]


# Temporary names come from a generator seeded from the OS (reseeded in a forked child), not
# from secrets.token_hex: os.urandom releases the GIL, and on the background writer thread
# each release hands the GIL to the thread stepping the env, which may keep it for a while
# (up to the interpreter's switch interval) before the write can begin. A name is only a
# candidate: O_EXCL and O_NOFOLLOW refuse whatever holds it, and another is drawn.
_names = random.Random(secrets.randbits(128))
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _names.seed(secrets.randbits(128)))


def _temp_name() -> str:
    """A fresh temporary file name (``TEMP_PREFIX`` and 12 hex digits)."""
    return f"{TEMP_PREFIX}{_names.getrandbits(48):012x}"


def write_in_turn(storage: Storage, files: Sequence[FileToWrite], published: list[str]) -> None:
    """:meth:`Storage.write_files` as one :meth:`Storage.write_atomic` per file, in order."""
    for name, chunks, sync_directory in files:
        storage.write_atomic(name, chunks, sync_directory=sync_directory)
        published.append(name)


def is_plain_name(name: object) -> TypeGuard[str]:
    """Whether ``name`` is a plain file name: no directory part, not ``.``/``..``, no NUL.

    It must also encode to at most 255 bytes for the filesystem (no lone surrogates).
    """
    if not (isinstance(name, str) and name not in (".", "..") and _PLAIN_NAME.fullmatch(name)):
        return False
    try:
        return len(os.fsencode(name)) <= 255
    except UnicodeError:
        return False


# ``scheme://...``, or a chained URL such as ``simplecache::s3://...``.
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*(?:::[A-Za-z][A-Za-z0-9+.\-]*)*://")


def is_url(location: str) -> bool:
    """Whether ``location`` is an fsspec URL rather than a local path.

    Example:
        >>> is_url("s3://bucket/run1"), is_url("simplecache::s3://b/r"), is_url("memory://x")
        (True, True, True)
        >>> is_url("traces/run1"), is_url("run::1"), is_url("/tmp/s3://x")
        (False, False, False)
    """
    return _URL.match(location) is not None


class Storage(Protocol):
    """A flat namespace of files, written atomically and read whole or mapped."""

    @property
    def location(self) -> str:
        """Where the files are (a directory path or a URL), for messages."""
        ...

    def write_atomic(
        self, name: str, chunks: Iterable[BytesLike], *, sync_directory: bool = True
    ) -> int:
        """Write ``chunks`` as file ``name`` atomically; return the number of bytes written.

        With ``sync_directory`` false, a local file's rename may not be durable (survive a
        power loss) until the next write with it, or :meth:`sync`.
        """
        ...

    def write_files(self, files: Sequence[FileToWrite], published: list[str]) -> None:
        """Write ``files`` (``(name, chunks, sync_directory)``), each atomically, in order.

        Each name is appended to ``published`` as its file becomes visible, so that after a
        failure the caller knows which files to write again. See :func:`write_in_turn`.
        """
        ...

    def sync(self) -> None:
        """Make every file written so far durable (a local directory's fsync)."""
        ...

    def read_bytes(self, name: str, max_size: int) -> bytes:
        """Read a whole file, refusing one larger than ``max_size`` bytes."""
        ...

    def map(self, name: str) -> memoryview:
        """Read-only bytes of a whole file, memory-mapped where possible."""
        ...

    def list_names(self) -> list[str]:
        """The plain names of the files present (no subdirectories)."""
        ...

    def remove(self, name: str) -> None:
        """Delete a file."""
        ...


class _TraceAtomicWriter(AtomicWriter):
    """``AtomicWriter`` with recognisable temporary names and normal file permissions.

    With ``sync_directory=False`` the rename is not followed by an fsync of the directory.
    """

    def __init__(self, path: str, *, sync_directory: bool = True, **kwargs: Any) -> None:
        super().__init__(path, **kwargs)
        self.sync_directory = sync_directory

    def get_fileobject(self, suffix: str = "", prefix: str = TEMP_PREFIX, **kwargs: Any) -> Any:
        return super().get_fileobject(suffix=suffix, prefix=prefix, **kwargs)

    def sync(self, f: Any) -> None:
        f.flush()
        os.fchmod(f.fileno(), _FILE_MODE)
        super().sync(f)

    def commit(self, f: Any) -> None:
        if os.name == "nt":  # pragma: no cover - a write-through move there
            super().commit(f)
            return
        os.replace(f.name, self._path)
        if self.sync_directory:  # as atomicwrites does; a failure names the file renamed too
            try:
                _sync_directory(os.path.dirname(self._path))
            except OSError as exc:
                exc.filename2 = os.path.basename(self._path)
                raise


def _sync_directory(directory: str) -> None:
    """Fsync ``directory``: the renames in it so far survive a power loss.

    Raises:
        OSError: with ``filename`` the directory.
    """
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        if exc.filename is None:
            exc.filename = directory
        raise


def _write_error(path: str, directory: str, exc: OSError) -> RecordingError:
    """The error for a write of ``path`` that failed with ``exc``.

    A failed fsync of the directory after a rename is an OSError whose ``filename`` is the
    directory and ``filename2`` the file renamed (both write paths raise it so); any other
    failure left nothing visible.
    """
    reason = exc.strerror or exc
    failed = exc.filename
    if (
        isinstance(failed, str)
        and exc.filename2 is not None
        and os.path.normpath(failed) == os.path.normpath(directory)
    ):
        msg = (
            f"{path!r} was renamed into place, but the fsync of its directory failed "
            f"({reason}): the file is visible, but may not survive a power loss; writing it "
            "again makes it durable"
        )
    else:
        msg = f"could not write {path!r} ({reason}); nothing of it was published"
    return RecordingError(msg)


def _write_all(f: Any, chunks: list[BytesLike]) -> int:
    """Write ``chunks`` with as few system calls as possible (``writev``, up to IOV_MAX each).

    Fewer calls matter on the background writer thread: each call releases and retakes the
    GIL, and every retake can stall the thread stepping the env.
    """
    writev = getattr(os, "writev", None)
    if writev is None:  # pragma: no cover - not on POSIX
        return sum(f.write(c) for c in chunks)
    f.flush()
    fd = f.fileno()
    views = [memoryview(c).cast("B") for c in chunks if len(c)]
    total = 0
    i = 0
    while i < len(views):
        group = views[i : i + _IOV_MAX]
        n = writev(fd, group)
        total += n
        # A short write: skip what was written, keep the rest of the group.
        for v in group:
            if n >= len(v):
                n -= len(v)
                i += 1
            else:
                views[i] = v[n:]
                break
    return total


_IOV_MAX = min(os.sysconf("SC_IOV_MAX"), 1024) if hasattr(os, "sysconf") else 1024


def _write_files_c(
    write_files: Any,
    directory: str,
    files: list[tuple[str, list[BytesLike], bool]],
    published: list[str],
) -> int:
    """``_speedups.write_files`` under fresh temporary names; others if one is taken.

    Returns the bytes written; raises what it raises (OSError), after which ``published``
    lists the files that became visible.
    """
    for _ in range(100):
        tmps = [_temp_name() for _ in files]
        try:
            group = [(t, n, c, s) for t, (n, c, s) in zip(tmps, files, strict=True)]
            return int(write_files(directory, group, _FILE_MODE, published))
        except FileExistsError as exc:
            if exc.filename not in tmps:  # not a temporary name: a real failure
                raise
    raise FileExistsError(f"no free temporary file names in {directory!r}")  # pragma: no cover


def _open_nofollow(path: str) -> Any:
    """Open ``path`` for reading without following a symbolic link (which could lead outside)."""
    # O_NONBLOCK: opening a FIFO planted in a recording must not hang (it is then refused
    # as not a regular file); it changes nothing for regular files.
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        if os.path.islink(path):
            msg = "refusing to follow a symbolic link in a recording"
            raise TraceFormatError(msg, path) from exc
        raise
    return os.fdopen(fd, "rb")


class LocalStorage:
    """Files in a local directory, created if missing.

    Example:
        >>> import tempfile
        >>> st = LocalStorage(tempfile.mkdtemp())
        >>> st.write_atomic("a.bin", [b"abc", b"de"])
        5
        >>> bytes(st.map("a.bin"))
        b'abcde'
    """

    def __init__(self, directory: str | os.PathLike[str], *, create: bool = True) -> None:
        self.directory = os.fspath(directory)
        if create:
            try:
                os.makedirs(self.directory, exist_ok=True)
            except OSError as exc:
                msg = f"cannot create the recording directory {self.directory!r}: {exc}"
                raise RecordingError(msg) from exc
        elif not os.path.isdir(self.directory):
            msg = (
                f"expected a recording directory, but {self.directory!r} "
                f"{'is not a directory' if os.path.exists(self.directory) else 'does not exist'}"
            )
            raise TraceFormatError(msg, self.directory)

    @property
    def location(self) -> str:
        """The directory path."""
        return self.directory

    def _path(self, name: str) -> str:
        if not is_plain_name(name):
            msg = f"expected a plain file name inside the recording, got {name!r}"
            raise TraceFormatError(msg, self.directory)
        return os.path.join(self.directory, name)

    def write_atomic(
        self, name: str, chunks: Iterable[BytesLike], *, sync_directory: bool = True
    ) -> int:
        """Write ``chunks`` as file ``name``: temporary file, fsync, rename, fsync directory.

        Args:
            name: The file's plain name.
            chunks: Its bytes, in pieces.
            sync_directory: Whether to fsync the directory after the rename. Without it the
                file is complete and visible, but its name may not survive a power loss
                until the directory is synced (by a later write with it, or :meth:`sync`).

        Raises:
            RecordingError: the write failed (disk full, file too large, permission denied...);
                nothing becomes visible under ``name`` and the temporary file is removed. Or
                the directory's fsync after the rename failed: the file is then visible, but
                not durable (the message says which).
        """
        path = self._path(name)
        total = 0
        write_files = getattr(_speedups, "write_files", None)
        try:
            if write_files is not None:
                files = [(name, list(chunks), sync_directory)]
                return _write_files_c(write_files, self.directory, files, [])
            writer = _TraceAtomicWriter(
                path, mode="wb", overwrite=True, sync_directory=sync_directory
            )
            with writer.open() as f:
                total = _write_all(f, list(chunks))
        except OSError as exc:
            raise _write_error(path, self.directory, exc) from exc
        return total

    def write_files(self, files: Sequence[FileToWrite], published: list[str]) -> None:
        """Write ``files`` (``(name, chunks, sync_directory)``), each atomically, in order.

        With the C extension, a batch's files are written as a group: every temporary file
        is written and fsynced before the first rename (on Linux their writeback starts
        together, so that one journal commit covers them all, where one per file was made),
        then each is renamed in order, the directory fsynced after those that ask for it.
        What becomes visible, and when it is durable, is as with :meth:`write_atomic` per
        file. Without the extension it is :meth:`write_atomic` per file.

        Args:
            files: The files, in the order they must become visible.
            published: Each name is appended as its file becomes visible (and durable, with
                ``sync_directory``).

        Raises:
            RecordingError: a write failed; the files after those in ``published`` are not
                visible, and their temporary files are removed. Or the directory's fsync after
                a rename failed: that file is visible but not durable, and not in
                ``published`` (the message says which).
        """
        write_files = getattr(_speedups, "write_files", None)
        if write_files is None or not files:
            self._check_names(files)
            write_in_turn(self, files, published)
            return
        group = self._group(files)
        try:
            _write_files_c(write_files, self.directory, group, published)
        except OSError as exc:
            raise self._group_error(files, published, exc) from exc

    def _check_names(self, files: Sequence[FileToWrite]) -> None:
        for name, _, _ in files:
            self._path(name)  # (checks the name: none is written if one is not plain)

    def _group(self, files: Sequence[FileToWrite]) -> list[tuple[str, list[BytesLike], bool]]:
        """``files`` with their names checked and their chunks listed, for the C writer."""
        self._check_names(files)
        return [(name, list(chunks), sync) for name, chunks, sync in files]

    def _group_error(
        self, files: Sequence[FileToWrite], published: list[str], exc: OSError
    ) -> RecordingError:
        # The file it failed at: the first not published (the last, if the directory could
        # not be closed after all were).
        path = self._path(files[min(len(published), len(files) - 1)][0])
        return _write_error(path, self.directory, exc)

    def start_write_files(self, files: Sequence[FileToWrite]) -> PendingWrite | None:
        """Start :meth:`write_files` on a thread of the C extension's, which never takes the GIL.

        A Python thread needs the GIL to start, to reach its first system call and to end,
        and the thread stepping the env may keep it for up to the interpreter's switch
        interval each time; this one costs that thread nothing. ``None`` where it cannot be
        used (no extension, or :meth:`write_files` overridden): run :meth:`write_files` then.

        Returns:
            The write in flight; its :meth:`PendingWrite.wait` ends it as
            :meth:`write_files` would have.
        """
        start = getattr(_speedups, "start_write_files", None)
        if start is None or not files or type(self).write_files is not _LOCAL_WRITE_FILES:
            return None
        group = self._group(files)
        tmps = [_temp_name() for _ in group]
        task = start(
            self.directory,
            [(t, n, c, s) for t, (n, c, s) in zip(tmps, group, strict=True)],
            _FILE_MODE,
        )
        return PendingWrite(self, group, tmps, task)

    def sync(self) -> None:
        """Fsync the directory: every rename so far survives a power loss.

        Raises:
            RecordingError: the directory could not be synced.
        """
        if os.name == "nt":  # pragma: no cover - renames there are write-through (atomicwrites)
            return
        try:
            _sync_directory(self.directory)
        except OSError as exc:
            msg = f"could not sync the directory {self.directory!r} ({exc.strerror or exc})"
            raise RecordingError(msg) from exc

    def read_bytes(self, name: str, max_size: int) -> bytes:
        """Read file ``name`` whole, refusing it if it is larger than ``max_size`` bytes."""
        path = self._path(name)
        try:
            with _open_nofollow(path) as f:
                st = os.fstat(f.fileno())
                if not stat.S_ISREG(st.st_mode):
                    msg = "expected a regular file"
                    raise TraceFormatError(msg, path)
                if st.st_size > max_size:
                    msg = f"file is {st.st_size} bytes, more than the limit of {max_size} bytes"
                    raise TraceFormatError(msg, path)
                # Read what fstat says is there (and one byte more, to see it grow), rather
                # than asking for max_size + 1 bytes, which allocates that much up front.
                data = f.read(min(st.st_size, max_size) + 1)
                if len(data) > st.st_size:  # it grew since fstat: read on, within the limit
                    data += f.read(max_size + 1 - len(data))
                if len(data) > max_size:
                    msg = f"file is more than the limit of {max_size} bytes"
                    raise TraceFormatError(msg, path)
                return data
        except FileNotFoundError as exc:
            msg = "file is listed by the recording but does not exist"
            raise TraceFormatError(msg, path) from exc
        except OSError as exc:
            msg = f"cannot read file: {exc.strerror or exc}"
            raise TraceFormatError(msg, path) from exc

    def map(self, name: str) -> memoryview:
        """Memory-map file ``name`` read-only.

        The map stays open for as long as any memoryview or numpy array made from it is alive,
        so arrays handed to users never dangle.
        """
        path = self._path(name)
        try:
            with _open_nofollow(path) as f:
                st = os.fstat(f.fileno())
                if not stat.S_ISREG(st.st_mode):
                    msg = "expected a regular file"
                    raise TraceFormatError(msg, path)
                if st.st_size == 0:
                    return memoryview(b"")
                mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except FileNotFoundError as exc:
            msg = "array file is referenced by the recording but does not exist"
            raise TraceFormatError(msg, path) from exc
        except OSError as exc:
            msg = f"cannot map file: {exc.strerror or exc}"
            raise TraceFormatError(msg, path) from exc
        return memoryview(mm)

    def list_names(self) -> list[str]:
        """Plain names of the entries of the directory."""
        try:
            return os.listdir(self.directory)
        except OSError as exc:
            msg = f"cannot list the recording directory: {exc.strerror or exc}"
            raise TraceFormatError(msg, self.directory) from exc

    def remove(self, name: str) -> None:
        """Delete file ``name``."""
        os.unlink(self._path(name))


_LOCAL_WRITE_FILES = LocalStorage.write_files


class PendingWrite:
    """A :meth:`LocalStorage.write_files` running on a thread of the C extension's."""

    def __init__(
        self,
        storage: LocalStorage,
        files: list[tuple[str, list[BytesLike], bool]],
        tmps: list[str],
        task: Any,
    ) -> None:
        self._storage = storage
        self._files = files
        self._tmps = tmps
        self._task = task  # a _speedups.WriteTask

    def wait(self, published: list[str]) -> None:
        """Wait for the write; then as :meth:`LocalStorage.write_files` (once only).

        Args:
            published: Each name is appended as its file became visible (and durable, with
                ``sync_directory``).

        Raises:
            RecordingError: as :meth:`LocalStorage.write_files`.
        """
        try:
            self._task.wait(published)
        except OSError as exc:
            if not (isinstance(exc, FileExistsError) and exc.filename in self._tmps):
                raise self._storage._group_error(self._files, published, exc) from exc
            # A temporary name was taken (nothing was renamed yet): the rest is written here,
            # under other names.
            self._storage.write_files(self._files[len(published) :], published)


def open_storage(
    location: str | os.PathLike[str],
    *,
    create: bool,
    storage_options: dict[str, Any] | None = None,
) -> Storage:
    """The storage for ``location``, chosen by its form; created when ``create`` is true.

    A local path, or a ``file://`` URL, is a :class:`LocalStorage` (atomic rename and fsync);
    any other fsspec URL (``s3://``, ``gs://``, ``memory://``, ``simplecache::s3://`` ...) is an
    :class:`~gym_recording._storage_fsspec.FsspecStorage` opened with ``storage_options``.
    ``storage_options`` are ignored for local paths.
    """
    loc = os.fspath(location)
    if loc.startswith("file://") and "::" not in loc:
        from urllib.parse import unquote, urlsplit

        parts = urlsplit(loc)
        if parts.netloc not in ("", "localhost"):
            msg = f"expected a file:// URL on this host, got {loc!r}"
            raise RecordingError(msg)
        return LocalStorage(unquote(parts.path), create=create)
    if is_url(loc):
        from gym_recording._storage_fsspec import FsspecStorage  # only for URLs: it imports fsspec

        return FsspecStorage(loc, create=create, storage_options=storage_options)
    return LocalStorage(loc, create=create)
