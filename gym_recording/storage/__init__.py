"""The storage layer: atomic bytes in a local directory or under an object-store prefix.

:func:`open_storage` picks the implementation from the location's form. Everything above this
layer reads and writes through the :class:`~gym_recording.storage.base.Storage` protocol.
"""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import unquote, urlsplit

from gym_recording._errors import RecordingError
from gym_recording.storage.base import BytesLike, Storage
from gym_recording.storage.local import LocalStorage

__all__ = [
    "BytesLike",
    "LocalStorage",
    "Storage",
    "is_url",
    "local_path",
    "open_storage",
    "to_open_again",
]

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


def open_storage(
    location: str | os.PathLike[str],
    *,
    create: bool,
    storage_options: dict[str, Any] | None = None,
    mmap: bool = True,
) -> Storage:
    """The storage for ``location``, chosen by its form; created when ``create`` is true.

    A local path, or a ``file://`` (``local://``) URL, is a :class:`LocalStorage` (atomic
    rename and fsync; ``mmap`` says whether reads map files); any other fsspec URL
    (``s3://``, ``gs://``, ``memory://``, ``simplecache::s3://`` ...) an
    :class:`~gym_recording.storage.remote.FsspecStorage` opened with ``storage_options``,
    which are ignored for local paths.
    """
    loc = os.fspath(location)
    path = local_path(loc)
    if path is None:
        from gym_recording.storage.remote import FsspecStorage  # imports fsspec: URLs only

        return FsspecStorage(loc, create=create, storage_options=storage_options)
    return LocalStorage(path, create=create, mmap=mmap)


def local_path(location: str | os.PathLike[str]) -> str | None:
    """The local path :func:`open_storage` opens for ``location``; ``None`` for other URLs.

    A local path is itself; a ``file://`` or ``local://`` URL gives its path.

    Raises:
        RecordingError: a ``file://`` URL names another host.
        TypeError: ``location`` is not a str or ``os.PathLike[str]`` (bytes, say).

    Example:
        >>> local_path("traces/run1"), local_path("file:///tmp/a%20b"), local_path("s3://b/r")
        ('traces/run1', '/tmp/a b', None)
    """
    loc = os.fspath(location)
    if not isinstance(loc, str):
        msg = f"expected a directory as a str or os.PathLike[str], got {type(loc).__name__}"
        raise TypeError(f"{msg} {loc!r:.60}")
    if loc.startswith("local://") and "::" not in loc:  # (the rest is the path, as fsspec has it)
        return loc[len("local://") :]
    if loc.startswith("file://") and "::" not in loc:
        parts = urlsplit(loc)
        if parts.netloc not in ("", "localhost"):
            msg = f"expected a file:// URL on this host, got {loc!r}"
            raise RecordingError(msg)
        return unquote(parts.path)
    return None if is_url(loc) else loc


def to_open_again(given: str | os.PathLike[str], opened: str) -> str:
    """Where to open a recording again, from a later working directory or another call.

    ``given`` is the location as it was given, ``opened`` the storage's ``location`` (a
    local path made absolute; a URL with its password hidden): a URL as given, else
    ``opened``.

    Example:
        >>> to_open_again("traces", "/home/ann/traces"), to_open_again("ftp://a:pw@h/r", "")
        ('/home/ann/traces', 'ftp://a:pw@h/r')
    """
    return os.fspath(given) if local_path(given) is None else opened
