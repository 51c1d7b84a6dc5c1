"""Files in a local directory: atomic writes through ``atomicwrites``, reads that follow no link.

Each file is written to a temporary file (``.gymrec-tmp-*``) in the same directory, flushed
with ``writev``, fsynced and renamed into place, and the directory is fsynced where the
caller asks for it (FORMAT.md §2). Reads open without following symbolic links and without
blocking (a FIFO planted in a recording is refused, not waited on), check that the file is a
regular file, and either read it whole or map it read-only.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import secrets
import stat
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, BinaryIO

from atomicwrites import AtomicWriter

from gym_recording._accel import speedups
from gym_recording._errors import (
    OutputExistsError,
    ReadError,
    RecordingError,
    TraceFormatError,
    WriteError,
)
from gym_recording.format.names import TEMP_PREFIX, is_plain_name
from gym_recording.storage.base import BytesLike, FileToWrite, PendingWrite, ThreadedWrite

__all__ = ["LocalStorage", "atomic_output", "directory_mode", "make_parent", "output_error"]

_UMASK = os.umask(0)  # (at import: where the process's own cannot be read without setting it)
os.umask(_UMASK)
#: The mode a new file is opened with: the kernel takes the umask off, as for ``open()``.
_OPEN_MODE = 0o666


def _umask() -> int:
    """The process's umask now (Linux reports it; elsewhere, as it was at import)."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return _UMASK


def _file_mode() -> int:
    """The permission bits a normal ``open()`` would give a new file (mkstemp gives 0600)."""
    return 0o666 & ~_umask()


def directory_mode() -> int:
    """The permission bits ``os.mkdir`` would give a new directory (mkdtemp gives 0700)."""
    return 0o777 & ~_umask()


_IOV_MAX = min(os.sysconf("SC_IOV_MAX"), 1024) if hasattr(os, "sysconf") else 1024
#: The most files the C group write takes at once (a batch has three).
_C_GROUP_MAX = 64


class _Writer(AtomicWriter):
    """``AtomicWriter`` with recognisable temporary names and normal permissions.

    It fsyncs the directory after the rename only when asked for.
    """

    def __init__(self, path: str, *, sync_directory: bool) -> None:
        super().__init__(path, mode="wb", overwrite=True)
        self.sync_directory = sync_directory
        self.file_mode = _file_mode()

    def get_fileobject(self, suffix: str = "", prefix: str = TEMP_PREFIX, **kwargs: Any) -> Any:
        return super().get_fileobject(suffix=suffix, prefix=prefix, **kwargs)

    def sync(self, f: Any) -> None:
        f.flush()
        os.fchmod(f.fileno(), self.file_mode)
        super().sync(f)

    def commit(self, f: Any) -> None:
        if os.name == "nt":  # pragma: no cover - a write-through move there
            super().commit(f)
            return
        os.replace(f.name, self._path)
        if self.sync_directory:  # a failure names the file renamed too (see _write_error)
            try:
                _sync_directory(os.path.dirname(self._path))
            except OSError as exc:
                exc.filename2 = os.path.basename(self._path)
                raise


def make_parent(parent: str, out: str) -> None:
    """Make the directory ``parent`` of ``out`` (and its own parents) if missing.

    Raises:
        RecordingError: it cannot be made (a file stands in its way, or no permission).
    """
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as exc:
        why = "a file of that name is in the way" if isinstance(exc, FileExistsError) else ""
        msg = f"cannot make the directory {parent} for {out}: {why or exc.strerror or exc}"
        raise RecordingError(msg) from exc


def output_error(out: str, exc: OSError) -> RecordingError:
    """The error of an output ``out`` that cannot be written, named (not its temporary file)."""
    return RecordingError(f"cannot write {out}: {exc.strerror or exc}; choose another place")


@contextlib.contextmanager
def atomic_output(out: str, *, overwrite: bool = False, suffix: str = "") -> Iterator[str]:
    """A temporary path beside ``out``, renamed to ``out`` once the block succeeds.

    The path (``.gymrec-tmp-*``) is removed if the block fails: an export or a video
    appears whole or not at all.

    Raises:
        OutputExistsError: ``out`` exists (before or when the block ends), unless
            ``overwrite``.
        RecordingError: ``out``'s directory takes no file, or writing it failed (a full disk).
    """

    def refuse(when: str) -> None:
        if not overwrite and os.path.lexists(out):
            msg = f"{out} exists already{when}; remove it or choose another path"
            raise OutputExistsError(msg)

    refuse("")
    parent = os.path.dirname(os.path.abspath(out))
    make_parent(parent, out)
    try:
        fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=suffix, dir=parent)
    except OSError as exc:  # (a place that takes no file: /proc, a read-only disk)
        raise output_error(out, exc) from exc
    os.close(fd)
    try:
        yield tmp
        refuse(" (it appeared while it was written)")
        os.chmod(tmp, _file_mode())  # (mkstemp made it 0600: the mode open() would give)
        os.replace(tmp, out)
    except OSError as exc:  # (one of no file: a write's, a full disk)
        if exc.filename not in (tmp, out, None):
            raise
        raise output_error(out, exc) from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _sync_directory(directory: str) -> None:
    """Fsync ``directory``: the renames in it so far survive a power loss."""
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


def _write_all(f: BinaryIO, chunks: list[BytesLike]) -> int:
    """Write ``chunks`` with as few system calls as ``writev`` allows."""
    writev = getattr(os, "writev", None)
    if writev is None:  # pragma: no cover - not on POSIX
        return sum(f.write(memoryview(c).cast("B")) for c in chunks)
    f.flush()
    return _writev_all(f.fileno(), chunks)


def _writev_all(fd: int, chunks: Sequence[BytesLike]) -> int:
    """Write ``chunks`` to ``fd`` whole, with as few ``writev`` calls as allowed."""
    views = [memoryview(c).cast("B") for c in chunks if len(c)]
    total = i = 0
    while i < len(views):
        group = views[i : i + _IOV_MAX]
        n = os.writev(fd, group)
        total += n
        for v in group:  # a short write: skip what was written, keep the rest
            if n >= len(v):
                n -= len(v)
                i += 1
            else:
                views[i] = v[n:]
                break
    return total


def _write_error(path: str, directory: str, exc: OSError) -> WriteError:
    """The error for a write of ``path`` that failed with ``exc``.

    A failed fsync of the directory after the rename is an OSError whose ``filename`` is the
    directory and ``filename2`` the file renamed; any other failure left nothing visible.
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
    return WriteError(msg)


def _not_a_directory(path: str) -> str | None:
    """The nearest existing part of ``path`` (itself or a parent), if it is not a directory."""
    at = os.path.abspath(path)
    while not os.path.lexists(at):
        parent = os.path.dirname(at)
        if parent == at:
            return None
        at = parent
    return None if os.path.isdir(at) else at


#: Why this process cannot read a file now, its contents aside: a ReadError, not a damaged file.
_UNREADABLE = {
    errno.EACCES: "",
    errno.EPERM: "",
    errno.ENAMETOOLONG: " (a path past the system's limit: read it from a nearer directory)",
    errno.EMFILE: (
        " (each batch whose arrays are held keeps its file open while it is mapped: raise "
        "the limit, `ulimit -n`, or load(..., mmap=False), which reads the files instead)"
    ),
    errno.ENFILE: "",
    errno.ENOMEM: "",
    errno.EIO: "",
}


def _unreadable(what: str, path: str, exc: OSError) -> RecordingError:
    """The error of an ``OSError`` reading ``path``.

    A :class:`ReadError` where the file may be whole (permissions, too many open files, a
    path too long, the disk), else a :class:`TraceFormatError`.
    """
    msg = f"{what}: {exc.strerror or exc}"
    hint = _UNREADABLE.get(exc.errno or 0)
    if hint is None:
        return TraceFormatError(msg, path)
    return ReadError(f"{path}: {msg}{hint}")


class LocalStorage:
    """Files in a local directory, created if missing.

    Args:
        directory: The directory.
        create: Create it if missing (a writer); otherwise it must exist (a reader).
        mmap: Map files read with :meth:`map` (zero-copy). ``False`` reads them into memory
            instead, for directories another program may truncate while arrays are in use
            (a mapped file cut short kills the process with SIGBUS when its lost bytes are
            touched).

    Example:
        >>> import tempfile
        >>> st = LocalStorage(tempfile.mkdtemp())
        >>> st.write_atomic("a.bin", [b"abc", b"de"])
        5
        >>> bytes(st.map("a.bin"))
        b'abcde'
    """

    def __init__(
        self, directory: str | os.PathLike[str], *, create: bool = True, mmap: bool = True
    ) -> None:
        # (absolute, so that a process that changes its directory keeps writing and reading
        # here; joined, not normalised: "link/.." is where the link leads, as the OS has it)
        given = os.fspath(directory)
        relative = given and not os.path.isabs(given)  # (an empty one: refused below)
        self.directory = os.path.join(os.getcwd(), given) if relative else given
        self.mmap = mmap
        if create:
            try:
                os.makedirs(self.directory, exist_ok=True)
            except OSError as exc:
                msg = f"cannot create the recording directory {self.directory!r}: "
                way = _not_a_directory(self.directory)
                if way is None:  # (the parent's permissions, a read-only disk, a full one)
                    msg += f"{exc.strerror or exc}; give a directory you may write to"
                else:
                    what = "it" if way == os.path.abspath(self.directory) else repr(way)
                    msg += (
                        f"{what} exists and is not a directory; give the path of a directory "
                        "(new or existing), or move that file away"
                    )
                raise RecordingError(msg) from exc
            try:  # (a refusal now, not at close: a file made there, unnamed where Linux can)
                with tempfile.TemporaryFile(prefix=TEMP_PREFIX, dir=self.directory):
                    pass
            except OSError as exc:
                msg = (
                    f"cannot write in the recording directory {self.directory!r} "
                    f"({exc.strerror or exc}); give a directory you may write to"
                )
                raise RecordingError(msg) from exc
        elif not os.path.isdir(self.directory):
            what = "is not a directory" if os.path.exists(self.directory) else "does not exist"
            msg = f"expected a recording directory, but {self.directory!r} {what}"
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
        try:
            with _Writer(path, sync_directory=sync_directory).open() as f:
                return _write_all(f, list(chunks))
        except OSError as exc:
            raise _write_error(path, self.directory, exc) from exc

    #: The C drop-in for the group write (see :mod:`gym_recording._accel`), or ``None``.
    _start_write_c = getattr(speedups, "start_write", None)

    def write_files(self, files: Sequence[FileToWrite], published: list[str]) -> None:
        """Write ``files`` (``(name, chunks, sync_directory)``) atomically, in this order.

        A batch's files go as a group (FORMAT.md §2 allows it): every temporary file is
        written, then all are fsynced, then each is renamed in order, the directory fsynced
        after those that ask for it. What becomes visible, and when it is durable, is as with
        :meth:`write_atomic` per file; a group makes one journal commit cover all its files.

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
        if not files:
            return
        if self._start_write_c is not None and len(files) <= _C_GROUP_MAX:
            _CWrite(self, files).wait(published)
            return
        paths = [self._path(name) for name, _, _ in files]  # (every name checked first)
        flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
        temps: list[tuple[int, str]] = []  # (descriptor, or -1 once closed; name)
        at = done = 0  # the file the next call is about; the files renamed
        try:
            dir_fd = os.open(self.directory, flags)
        except OSError as exc:
            raise _write_error(paths[0], self.directory, exc) from exc
        try:
            for i, (_, chunks, _) in enumerate(files):
                at = i
                temps.append(self._new_temp(dir_fd))
                _writev_all(temps[-1][0], chunks)
            for i, (fd, tmp) in enumerate(temps):
                at = i
                os.fsync(fd)
                temps[i] = (-1, tmp)
                os.close(fd)
            for i, ((name, _, sync_directory), (_, tmp)) in enumerate(
                zip(files, temps, strict=True)
            ):
                at = i
                os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                done += 1
                if sync_directory:
                    try:
                        os.fsync(dir_fd)
                    except OSError as exc:
                        exc.filename, exc.filename2 = self.directory, name
                        raise
                published.append(name)
        except BaseException as exc:
            for fd, tmp in temps[done:]:  # nothing more is published
                with contextlib.suppress(OSError):
                    if fd >= 0:
                        os.close(fd)
                    os.unlink(tmp, dir_fd=dir_fd)
            if isinstance(exc, OSError):
                raise _write_error(paths[at], self.directory, exc) from exc
            raise
        finally:
            os.close(dir_fd)

    def start_write_files(self, files: Sequence[FileToWrite]) -> PendingWrite:
        """:meth:`write_files` in the background.

        On a thread of the C extension's, which never takes the GIL, else on a Python thread.
        """
        if self._start_write_c is None or not files or len(files) > _C_GROUP_MAX:
            return ThreadedWrite(self, files)
        return _CWrite(self, files)

    def _new_temp(self, dir_fd: int) -> tuple[int, str]:
        """A new temporary file in the directory: its descriptor and name."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
        flags |= getattr(os, "O_NOFOLLOW", 0)
        while True:
            name = f"{TEMP_PREFIX}{secrets.token_hex(6)}"
            try:
                return os.open(name, flags, _OPEN_MODE, dir_fd=dir_fd), name
            except FileExistsError:
                continue

    def sync(self) -> None:
        """Fsync the directory: every rename so far survives a power loss.

        Raises:
            RecordingError: the directory could not be synced.
        """
        if os.name == "nt":  # pragma: no cover - renames there are write-through
            return
        try:
            _sync_directory(self.directory)
        except OSError as exc:
            msg = f"could not sync the directory {self.directory!r} ({exc.strerror or exc})"
            raise WriteError(msg) from exc

    def _open(self, name: str, what: str) -> tuple[str, BinaryIO, os.stat_result]:
        """Open file ``name`` without following a symbolic link or blocking; a regular file."""
        path = self._path(name)
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0))
        except OSError as exc:
            if os.path.islink(path):
                msg = "refusing to follow a symbolic link in a recording"
            elif isinstance(exc, FileNotFoundError):
                msg = f"{what} is listed by the recording but does not exist"
            else:
                raise _unreadable(f"cannot open {what}", path, exc) from exc
            raise TraceFormatError(msg, path) from exc
        try:  # (the descriptor is closed on any way out but the file object's)
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):  # (a directory, a FIFO: before fdopen refuses
                msg = "expected a regular file"  # a directory, leaving it open)
                raise TraceFormatError(msg, path)
            return path, os.fdopen(fd, "rb"), st
        except BaseException:
            os.close(fd)
            raise

    def read_bytes(self, name: str, max_size: int) -> bytes:
        """Read file ``name`` whole, refusing it if it is larger than ``max_size`` bytes."""
        path, f, st = self._open(name, "file")
        with f:
            if st.st_size > max_size:
                msg = f"file is {st.st_size} bytes, more than the limit of {max_size} bytes"
                raise TraceFormatError(msg, path)
            try:
                # What fstat says is there, and a byte more to see it grow (never max_size
                # bytes up front).
                data = f.read(st.st_size + 1)
                if len(data) > st.st_size:
                    data += f.read(max_size + 1 - len(data))
            except OSError as exc:
                raise _unreadable("cannot read file", path, exc) from exc
        if len(data) > max_size:
            msg = f"file is more than the limit of {max_size} bytes"
            raise TraceFormatError(msg, path)
        return data

    def map(self, name: str) -> memoryview:
        """File ``name``'s bytes, read-only: memory-mapped, or read whole with ``mmap=False``.

        A map stays open for as long as any memoryview or numpy array made from it is alive,
        so arrays handed to users never dangle.
        """
        path, f, st = self._open(name, "array file")
        with f:
            try:
                if not st.st_size:
                    return memoryview(b"")
                if not self.mmap:
                    return memoryview(f.read())
                return memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
            except OSError as exc:
                raise _unreadable("cannot read file", path, exc) from exc

    #: Files worth reading at once: one (a local disk's reads are not fetched ahead).
    parallel_reads = 1

    def prefetch(self, reads: Sequence[tuple[str, int | None]]) -> None:
        """Nothing: a local file is read (or mapped) when it is needed."""

    def list_names(self) -> list[str]:
        """Plain names of the entries of the directory."""
        try:
            return os.listdir(self.directory)
        except OSError as exc:
            raise _unreadable("cannot list the recording directory", self.directory, exc) from exc

    def remove(self, name: str) -> None:
        """Delete file ``name``."""
        os.unlink(self._path(name))

    def __repr__(self) -> str:
        return f"<LocalStorage {self.directory!r}>"


class _CWrite:
    """A group write on a thread of the C extension's (``start_write``): a PendingWrite."""

    def __init__(self, storage: LocalStorage, files: Sequence[FileToWrite]) -> None:
        for name, _, _ in files:
            storage._path(name)  # (every name checked first)
        self._storage = storage
        self._files = [(name, list(chunks), sync) for name, chunks, sync in files]
        self._start()

    def _start(self) -> None:
        self._tmps = [f"{TEMP_PREFIX}{secrets.token_hex(6)}" for _ in self._files]
        group = [(t, n, c, s) for t, (n, c, s) in zip(self._tmps, self._files, strict=True)]
        start = self._storage._start_write_c
        assert start is not None  # (only made when the extension is built)
        self._done: list[str] = []  # (what the task published, kept across an interrupt)
        self._task: Any = start(self._storage.directory, group, _OPEN_MODE)

    def wait(self, published: list[str]) -> None:
        """Wait for the write; then as :meth:`LocalStorage.write_files`."""
        if self._task is None:  # waited for already
            return
        while True:
            done = self._done
            try:
                self._task.wait(done)
            except ValueError:  # (waited for once: a Ctrl-C landed as that wait returned)
                pass
            except OSError as exc:
                if isinstance(exc, FileExistsError) and exc.filename in self._tmps:
                    self._start()  # a temporary name was taken (nothing was renamed): again
                    continue
                self._task = None
                published.extend(done)
                raise self._error(exc) from exc
            self._task = None
            published.extend(done)
            return

    def _error(self, exc: OSError) -> RecordingError:
        """The error of the write, which failed after publishing the files in ``_done``.

        It names the file the failing call was about (``exc.filename``: its name, or its
        temporary name), else the first file not published.
        """
        names = [name for name, _, _ in self._files]
        at = min(len(self._done), len(names) - 1)
        if exc.filename in names:
            at = names.index(exc.filename)
        elif exc.filename in self._tmps:
            at = self._tmps.index(exc.filename)
        return _write_error(self._storage._path(names[at]), self._storage.directory, exc)
