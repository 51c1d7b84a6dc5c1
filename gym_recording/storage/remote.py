"""Storage on any fsspec filesystem (``s3://``, ``gs://``, ``az://``, ``memory://`` ...).

Object stores have no rename, so the atomic unit is one PUT: every file is assembled in memory
and handed to ``fs.pipe_file`` whole (S3 makes an object visible only once its PUT, or its
multipart upload, completes). With the write order of FORMAT.md §2 (blob, then batch JSON, then
manifest) a reader that lists a manifest finds every batch it names.

``fsspec`` (and the protocol's own package, e.g. ``s3fs``) is the optional ``remote`` extra and
is imported only when a URL is opened.
"""

from __future__ import annotations

import logging
import os
import re
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gym_recording._errors import (
    DependencyNotInstalled,
    ReadError,
    RecordingError,
    TraceFormatError,
    WriteError,
)
from gym_recording._optional import require
from gym_recording.format.names import is_plain_name
from gym_recording.storage.base import BytesLike, FileToWrite, ThreadedWrite

__all__ = ["FsspecStorage"]

logger = logging.getLogger(__name__)


#: How to mend a storage that failed a read or a write.
_CHECK = (
    "check the network, the endpoint and the credentials (storage_options, or for s3:// the "
    "AWS_ENDPOINT_URL and AWS_PROFILE environment variables)"
)


class FsspecStorage:
    """The files under one prefix of an fsspec filesystem.

    Args:
        url: An fsspec URL, e.g. ``"s3://bucket/prefix"``.
        create: Create the location if missing (a writer); otherwise it must exist (a reader).
        storage_options: Passed to the filesystem (``endpoint_url``, ``key``, ``anon`` ...).
            Without them fsspec's configuration and the protocol's usual environment
            variables (``AWS_ENDPOINT_URL``, ``AWS_PROFILE`` ...) apply.

    Example:
        >>> st = FsspecStorage("memory://gym-recording-doctest")
        >>> st.write_atomic("a.bin", [b"abc", b"de"])
        5
        >>> bytes(st.map("a.bin")), st.list_names()
        (b'abcde', ['a.bin'])
        >>> st.remove("a.bin")
    """

    def __init__(
        self,
        url: str,
        *,
        create: bool = True,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        #: The URL as given (for fsspec), and as shown: with its password hidden.
        self.url, self.shown = url, redacted(url)
        shown = self.shown
        fsspec = require("fsspec", "remote", f"reading or writing {shown!r}")
        self._fetched: OrderedDict[tuple[str, int | None], bytes] = OrderedDict()  # (prefetch)
        self._fetched_bytes = 0
        try:
            self._fs, root = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
            self._pid = os.getpid()
        except ImportError as exc:  # the protocol's package (s3fs, gcsfs ...) is missing
            if getattr(exc, "name", None) == "s3fs" or "s3fs" in str(exc):
                raise DependencyNotInstalled.for_extra("s3fs", "remote", repr(shown)) from exc
            msg = f"{shown!r} needs a package that is not installed: {exc}"
            raise DependencyNotInstalled(msg) from exc
        except ValueError as exc:  # an unknown protocol
            msg = f"cannot open {shown!r}: {exc}"
            raise RecordingError(redacted(msg)) from exc
        except OSError as exc:  # a filesystem that connects as it is made (ftp://, sftp://)
            if not create:
                raise _read_error("cannot reach the recording location", shown, exc) from exc
            msg = f"cannot reach the recording location {shown!r}: {exc}; {_CHECK}"
            raise RecordingError(redacted(msg)) from exc
        self.root = root.rstrip("/")
        #: Files worth fetching at once (:meth:`prefetch`): 32 on an asynchronous filesystem.
        asyn = require("fsspec.asyn", "remote", f"reading {shown!r}")
        self.parallel_reads = 32 if isinstance(self.fs, asyn.AsyncFileSystem) else 1
        if create:
            try:
                # Object stores have no directories; s3fs creates a missing bucket here.
                self.fs.makedirs(self.root, exist_ok=True)
            except PermissionError as exc:
                # Credentials that may write objects but not inspect or create the bucket:
                # go on, and let the first write say whether writing is allowed.
                why = redacted(str(exc))
                logger.warning("could not check or create %s (%s); writing anyway", shown, why)
            except Exception as exc:  # any backend error: say where, keep the cause
                msg = f"cannot create the recording location {shown!r}: {exc}; {_CHECK}"
                raise RecordingError(redacted(msg)) from exc
        else:
            try:
                self.fs.invalidate_cache(self.root)
                ok = self.fs.isdir(self.root)
                a_file = not ok and self.fs.isfile(self.root)
            except Exception as exc:
                raise _read_error("cannot read the recording location", shown, exc) from exc
            if not ok:
                what = "it is a file: give the prefix of its recording" if a_file else ""
                msg = f"expected a recording at {shown!r}, but {what or 'nothing is stored there'}"
                raise TraceFormatError(msg, shown)

    @property
    def fs(self) -> Any:
        """The filesystem: this process's (made again, as it was made, in a forked child).

        An asynchronous filesystem (s3fs) refuses to run in a child forked from the process
        that made it, as a data loader's workers are.
        """
        if self._pid != os.getpid():
            fs = self._fs
            self._fs, self._pid = type(fs)(*fs.storage_args, **fs.storage_options), os.getpid()
        return self._fs

    @property
    def location(self) -> str:
        """The URL, its password hidden (:func:`redacted`)."""
        return self.shown

    def _path(self, name: str) -> str:
        if not is_plain_name(name):
            msg = f"expected a plain file name inside the recording, got {name!r}"
            raise TraceFormatError(msg, self.shown)
        return f"{self.root}/{name}"

    def _where(self, name: str) -> str:
        return f"{self.shown.rstrip('/')}/{name}"

    def write_atomic(
        self, name: str, chunks: Iterable[BytesLike], *, sync_directory: bool = True
    ) -> int:
        """Write ``chunks`` as object ``name`` with a single PUT of the joined bytes.

        ``sync_directory`` is for local directories: a PUT is durable once it returns.

        Raises:
            RecordingError: the upload failed; nothing becomes visible under ``name``.
        """
        path = self._path(name)
        data = b"".join(chunks)
        try:
            self.fs.pipe_file(path, data)
        except Exception as exc:  # botocore/aiohttp errors are not all OSError
            msg = f"could not write {self._where(name)!r} ({exc}); nothing of it was published"
            raise WriteError(redacted(f"{msg}; {_CHECK}")) from exc
        return len(data)

    def write_files(self, files: Sequence[FileToWrite], published: list[str]) -> None:
        """Write ``files`` in order, one PUT each (see :meth:`Storage.write_files`)."""
        for name, chunks, _ in files:
            self.write_atomic(name, chunks)
            published.append(name)

    def start_write_files(self, files: Sequence[FileToWrite]) -> ThreadedWrite:
        """:meth:`write_files` on a thread of its own (see ``Storage.start_write_files``)."""
        return ThreadedWrite(self, files)

    def sync(self) -> None:
        """Nothing to do: each PUT was durable when it returned."""

    def read_bytes(self, name: str, max_size: int) -> bytes:
        """Read object ``name`` whole, refusing it if it is larger than ``max_size`` bytes."""
        data = self._cat(name, "file is listed by the recording", max_size)
        if len(data) > max_size:
            msg = f"file is more than the limit of {max_size} bytes"
            raise TraceFormatError(msg, self._where(name))
        return data

    def map(self, name: str) -> memoryview:
        """The bytes of object ``name``, downloaded whole (read-only)."""
        return memoryview(self._cat(name, "array file is referenced by the recording"))

    #: Files kept fetched and not read yet, at most (the first fetched are let go first).
    MAX_FETCHED_BYTES = 128 * 1024 * 1024

    def prefetch(self, reads: Sequence[tuple[str, int | None]]) -> None:
        """Fetch ``reads`` at once (see ``Storage.prefetch``).

        An asynchronous filesystem's ``cat_ranges`` (s3fs, gcsfs ...) overlaps the requests;
        each file is fetched up to its ``max_size`` and a byte more, as :meth:`read_bytes`
        fetches it. Others (a caching one, whose ``cat_ranges`` may leave half-downloaded
        files in its cache when one fails) fetch nothing ahead: :attr:`parallel_reads` is 1.
        """
        if not reads:
            self._fetched.clear()
            self._fetched_bytes = 0
            return
        todo = list(dict.fromkeys(r for r in reads if r not in self._fetched))
        if self.parallel_reads <= 1 or not todo:
            return
        try:
            paths = [self._path(name) for name, _ in todo]
            ends = [None if size is None else size + 1 for _, size in todo]
            got = self.fs.cat_ranges(paths, [0] * len(paths), ends, on_error="return")
        except Exception:  # (each read fetches its own file again, and says what is wrong)
            return
        incoming = sum(len(d) for d in got if isinstance(d, bytes))
        # (the keys copied at once, as another thread's read may take one meanwhile)
        for read in [r for r in list(self._fetched) if r not in reads]:  # (the oldest first)
            if self._fetched_bytes + incoming <= self.MAX_FETCHED_BYTES:
                break
            self._fetched_bytes -= len(self._fetched.pop(read, b""))
        for read, data in zip(todo, got, strict=True):  # (kept, even past the bound: asked for)
            if isinstance(data, bytes):
                self._fetched[read] = data
                self._fetched_bytes += len(data)

    def _cat(self, name: str, listed: str, size: int | None = None) -> bytes:
        data = self._fetched.pop((name, size), None)
        if data is not None:
            self._fetched_bytes -= len(data)
            return data
        kwargs = {} if size is None else {"end": size + 1}
        try:
            return bytes(self.fs.cat_file(self._path(name), start=0, **kwargs))
        except FileNotFoundError as exc:
            raise TraceFormatError(f"{listed} but does not exist", self._where(name)) from exc
        except Exception as exc:
            raise _read_error("cannot read the file", self._where(name), exc) from exc

    def list_names(self) -> list[str]:
        """Plain names of the objects and "folders" directly under the prefix (fresh)."""
        try:
            self.fs.invalidate_cache(self.root)
            entries = self.fs.ls(self.root, detail=True)
        except FileNotFoundError:
            return []
        except Exception as exc:
            raise _read_error("cannot list the recording location", self.shown, exc) from exc
        names = []
        for e in entries:
            path = str(e["name"])
            # (not a "folder" marker, an empty key ending in "/" that S3 consoles make)
            if path.endswith("/") or path.rstrip("/") == self.root:
                continue
            name = path.rsplit("/", 1)[-1]
            if is_plain_name(name):
                names.append(name)
        return names

    def is_file(self, name: str) -> bool:
        """Whether ``name`` is an object, not a "folder" under the prefix."""
        try:
            return bool(self.fs.isfile(self._path(name)))
        except Exception as exc:
            raise _read_error("cannot read the file", self._where(name), exc) from exc

    def remove(self, name: str) -> None:
        """Delete object ``name``."""
        self.fs.rm_file(self._path(name))

    def __repr__(self) -> str:
        return f"<FsspecStorage {self.shown!r}>"


def _read_error(what: str, where: str, exc: BaseException) -> ReadError:
    """The error of a read the storage failed (not a damaged file): what, where, and why."""
    msg = f"{where}: {what}: {type(exc).__name__}: {exc}; {_CHECK}, then read again"
    return ReadError(redacted(msg))


_PASSWORD = re.compile(r"(?<=//)([^/?#@:\s]*):[^/?#\s]*@")  # (to the last @: fsspec's split)


def redacted(text: str) -> str:
    """``text`` with the password of each URL in it hidden (``ftp://user:***@host/...``).

    Messages and logs name a recording by its URL, and a backend's error may quote the URL
    it was given; a password written into the URL stays out of them.

    Example:
        >>> redacted("cannot read 'ftp://ann:s3cret@host/run1': timed out")
        "cannot read 'ftp://ann:***@host/run1': timed out"
        >>> redacted("ftp://ann:p@ss@host/run@1")
        'ftp://ann:***@host/run@1'
    """
    return _PASSWORD.sub(r"\1:***@", text)
