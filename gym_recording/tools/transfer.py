"""Copy a recording to S3 and back, in the order readers expect (``gym_recording.storage_s3``).

Kept for code written against the original gym-recording; new code can record to and read from
``s3://`` URLs directly (``TraceRecordingWrapper(env, "s3://bucket/run1")``,
``gym_recording.load("s3://bucket/run1")``). Built on fsspec/s3fs (the ``remote`` extra);
endpoints and credentials come from the usual AWS configuration (``AWS_ENDPOINT_URL``,
``AWS_PROFILE``, ...) or from ``storage_options``.

Example::

    from gym_recording.storage_s3 import download_recording, upload_recording

    url = upload_recording("traces/", "CartPole-v1", "my-bucket")  # s3://my-bucket/recording/...
    local_dir = download_recording(url)  # a cached local copy
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import secrets
import shutil
import stat
import tempfile
import time
from typing import Any
from urllib.parse import urlsplit

from gym_recording._errors import RecordingError
from gym_recording.format.names import (
    TEMP_PREFIX,
    classify,
    find_manifests,
    is_temp_name,
    write_rank,
)
from gym_recording.storage.local import LocalStorage, directory_mode
from gym_recording.storage.remote import FsspecStorage

__all__ = ["download_recording", "upload_recording"]

logger = logging.getLogger(__name__)

_TOKEN_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_S3_URL = re.compile(r"^s3://([A-Za-z0-9][A-Za-z0-9.\-_]*)/([^\x00-\x1f\\]+?)/*$")
#: Where downloads are cached: ``<tmp>/gym-recording-s3-<uid>/<bucket>/<key prefix>`` (one
#: per user: another user's copies are not taken for one's own); a download from an
#: ``endpoint_url`` of ``storage_options`` goes to a directory of that endpoint's in it (see
#: :func:`download_recording`).
CACHE_DIR = os.path.join(tempfile.gettempdir(), f"gym-recording-s3-{getattr(os, 'getuid', str)()}")


def upload_recording(
    directory: str | os.PathLike[str],
    env_name: str,
    bucket: str,
    *,
    storage_options: dict[str, Any] | None = None,
) -> str:
    """Upload the recording in ``directory`` to ``bucket``; return its ``s3://`` URL.

    The files go to ``recording/<env_name>/<YYYY-mm-dd_HH-MM-SS>_<token>/`` as in the original
    helper, each in one PUT, blobs first and manifests last, so that a reader of the URL never
    sees a manifest before the batches it lists. Temporary files are skipped.

    Args:
        directory: A local recording directory.
        env_name: The environment name, used in the key (e.g. ``"CartPole-v1"``).
        bucket: The S3 bucket.
        storage_options: s3fs options (``endpoint_url``, ``key``, ``secret`` ...).

    Returns:
        The URL, e.g. ``"s3://bucket/recording/CartPole-v1/2024-01-31_12-00-00_x7Q"``.
    """
    source = LocalStorage(directory, create=False)
    token = "".join(secrets.choice(_TOKEN_ALPHABET) for _ in range(3))
    s3dir = f"recording/{env_name}/{time.strftime('%Y-%m-%d_%H-%M-%S')}_{token}"
    url = f"s3://{bucket}/{s3dir}"
    target = FsspecStorage(url, create=True, storage_options=storage_options)
    # The manifests as they are now, read first: every batch they list is written already,
    # and is in the listing taken after (a recording still being written is copied whole).
    manifests = {name: bytes(source.map(name)) for name in find_manifests(source.list_names())}
    names = sorted(
        (
            n
            for n in source.list_names()
            if not is_temp_name(n)
            and classify(n) != "manifest"
            and os.path.isfile(os.path.join(source.directory, n))
        ),
        key=lambda n: (write_rank(n), n),
    )
    logger.info("Uploading %d files from %s to %s", len(names), source.directory, url)
    for name in names:
        target.write_atomic(name, [source.map(name)])
    for name, data in manifests.items():  # (last)
        target.write_atomic(name, [data])
    return url


def _private(root: str) -> None:
    """Make the default cache, in the shared temporary directory, this user's alone.

    Raises:
        RecordingError: it is another user's (who could plant recordings there).
    """
    try:
        os.makedirs(root, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise _cache_error(root, exc) from exc
    st = os.lstat(root)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != getattr(os, "getuid", lambda: st.st_uid)():
        msg = (
            f"the download cache {root} is not a directory of this user's (owner uid "
            f"{st.st_uid}); remove it, or pass another cache_dir"
        )
        raise RecordingError(msg)
    if st.st_mode & 0o077:
        os.chmod(root, 0o700)


def _cache_error(root: str, exc: OSError) -> RecordingError:
    """The error of a download cache no directory can be made in."""
    of = f" ({exc.filename})" if exc.filename not in (None, root) else ""
    msg = (
        f"cannot make the download cache's directory in {root}{of}: {exc.strerror or exc}; "
        "pass a cache_dir you may write to"
    )
    return RecordingError(msg)


def _endpoint(storage_options: dict[str, Any] | None) -> str | None:
    """The ``endpoint_url`` that ``storage_options`` give s3fs, or ``None`` for the default.

    ``endpoint_url`` itself, else ``client_kwargs["endpoint_url"]`` (s3fs's precedence).
    """
    options = storage_options or {}
    client = options.get("client_kwargs")
    url = options.get("endpoint_url") or (
        client.get("endpoint_url") if isinstance(client, dict) else None
    )
    return str(url) if url else None


def _endpoint_dir(endpoint: str) -> str:
    """The cache's directory of the downloads from ``endpoint``: ``@<host>_<port>``.

    ``http://127.0.0.1:9000`` gives ``@127.0.0.1_9000`` (and ``https://s3.example.com``
    ``@s3.example.com_443``); an endpoint with a path gets a hash of it too
    (``@host_443-1a2b3c4d5e6f``). No bucket's name holds ``@``: the directory is never one
    of a bucket of the default endpoint.
    """
    text = endpoint.strip()
    parts = urlsplit(text)
    host = (parts.hostname or "").lower()
    try:
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower())
    except ValueError:  # (a port out of range)
        port = None
    if not (host and port):  # (no endpoint botocore takes: named by its hash)
        return f"@endpoint-{_digest(text)}"
    name = "@" + re.sub(r"[^A-Za-z0-9.\-]+", "_", f"{host}_{port}")  # ("[::1]": "_1")
    rest = parts.path.rstrip("/") + (f"?{parts.query}" if parts.query else "")
    return f"{name}-{_digest(rest)}" if rest else name


def _digest(text: str) -> str:
    """The first 12 hex digits of the SHA-256 of ``text``."""
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def download_recording(
    s3url: str, *, storage_options: dict[str, Any] | None = None, cache_dir: str | None = None
) -> str:
    """Download the recording at ``s3url`` into a cache directory and return the directory.

    As in the original helper, a recording already downloaded is reused. The download goes to a
    temporary directory renamed into place once complete, so the cache never holds half a
    recording (where the directory exists already, holding the download of a longer prefix,
    the files are moved in, manifests last). Manifests are fetched before the other files, so
    a recording still being written is downloaded consistently.

    Args:
        s3url: ``s3://bucket/prefix`` (as returned by :func:`upload_recording`).
        storage_options: s3fs options (``endpoint_url``, ``key``, ``secret`` ...).
        cache_dir: Where downloads are kept (default :data:`CACHE_DIR`).

    Returns:
        The local directory, ``<cache_dir>/<bucket>/<prefix>``; for an endpoint given in
        ``storage_options`` (``endpoint_url``, or ``client_kwargs["endpoint_url"]``),
        ``<cache_dir>/@<host>_<port>/<bucket>/<prefix>`` (``@127.0.0.1_9000`` for
        ``http://127.0.0.1:9000``; a hash of its path is appended to an endpoint with one),
        so that two servers holding the same bucket and prefix are not taken for one. An
        endpoint set by the environment (``AWS_ENDPOINT_URL``) or AWS's config files is the
        default one here.

    Raises:
        ValueError: ``s3url`` is not an ``s3://bucket/prefix`` URL.
        RecordingError: the default cache directory is another user's, or no directory
            can be made in the cache.
    """
    m = _S3_URL.match(s3url)
    parts = m.group(2).split("/") if m else []
    if m is None or any(p in ("", ".", "..") for p in parts):
        msg = f"expected an s3://bucket/prefix URL, got {s3url!r}"
        raise ValueError(msg)
    bucket = m.group(1)
    root = cache_dir or CACHE_DIR
    if os.path.abspath(root) == os.path.abspath(CACHE_DIR):
        _private(root)
    endpoint = _endpoint(storage_options)
    where = [root] if endpoint is None else [root, _endpoint_dir(endpoint)]
    directory = os.path.join(*where, bucket, *parts)
    if os.path.isdir(directory) and find_manifests(os.listdir(directory)):
        return directory
    source = FsspecStorage(
        f"s3://{bucket}/{'/'.join(parts)}", create=False, storage_options=storage_options
    )
    try:
        os.makedirs(os.path.dirname(directory), exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=os.path.dirname(directory))
    except OSError as exc:
        raise _cache_error(root, exc) from exc
    try:
        target = LocalStorage(tmp)
        manifests = find_manifests(source.list_names())
        for name in manifests:  # first: they list only batches already written
            target.write_atomic(name, [source.map(name)])
        for name in source.list_names():  # (no manifest: one that appeared since may list
            # batches written after this listing; nor a "folder" under the prefix)
            if classify(name) != "manifest" and not is_temp_name(name) and source.is_file(name):
                logger.info("Download %s/%s to %s", s3url.rstrip("/"), name, directory)
                target.write_atomic(name, [source.map(name)])
        os.chmod(tmp, directory_mode())  # (mkdtemp made it 0700: the mode mkdir would give)
        try:
            os.rename(tmp, directory)
        except OSError:  # it exists, with files
            if not os.path.isdir(directory):
                raise
            if not find_manifests(os.listdir(directory)):  # (not the same download, finished)
                for name in sorted(os.listdir(tmp), key=lambda n: (write_rank(n), n)):
                    os.replace(os.path.join(tmp, name), os.path.join(directory, name))
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return directory
