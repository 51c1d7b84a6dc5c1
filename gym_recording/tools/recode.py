"""``gym-recording compress`` and ``decompress``: a recording copied with its arrays recoded.

Every writer's files are copied under the same names, batch by batch, each batch checked as
the reader checks it, its arrays stored again compressed (FORMAT.md §6.2) or raw, and every
other byte of meaning kept: writers, metadata, spaces, episodes and their parts. The copy
is written as a writer writes (blob, batch JSON, then the manifest, each atomically), with
every manifest last: a reader finds the whole copy or none of it, and a copy that does not
finish (an error, Ctrl-C) is removed.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from gym_recording._errors import RecordingError
from gym_recording._optional import require
from gym_recording._progress import progress
from gym_recording.format.arrays import BatchBlob
from gym_recording.format.batch import recode_batch
from gym_recording.format.codec import make_compressor
from gym_recording.format.limits import MAX_BATCH_JSON_BYTES, MAX_MANIFEST_BYTES
from gym_recording.format.manifest import Manifest
from gym_recording.format.names import find_manifests, holds_no_recording, no_recording
from gym_recording.format.wire import FORMAT_VERSION, decode, encode
from gym_recording.read.recording import read_batch, read_manifests
from gym_recording.record.lifetime import uninterrupted
from gym_recording.storage import Storage, local_path, open_storage

__all__ = ["recode"]


def recode(
    directory: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    compression: str | None,
    compression_level: int | None = None,
) -> str:
    """Copy the recording ``directory`` to ``out`` with its arrays compressed, or raw.

    Args:
        directory: The recording to read.
        out: Where to write the copy: a directory that does not exist yet or holds no
            trace files, apart from ``directory``: neither it (by another path), nor inside
            it, nor holding it.
        compression: ``"zstd"`` to compress each array that shrinks, ``None`` to store
            every array raw (arrays any version 1 or 2.0 reader reads; recorded infos keep
            their columns, which a 2.0 reader does not see: FORMAT.md's opening).
        compression_level: zstd's level, 1 to 22 (default 3).

    Returns:
        ``out``, as a string.

    Raises:
        TraceFormatError: a file of ``directory`` is damaged (nothing of it is copied).
        RecordingError: ``directory`` holds no recording, or ``out`` already holds one; or
            ``out`` is ``directory``, inside it or holds it (nothing is written).

    Example:
        >>> import tempfile, numpy as np, gym_recording
        >>> d, z = tempfile.mkdtemp(), tempfile.mkdtemp()
        >>> with gym_recording.TraceRecording(d) as rec:
        ...     rec.add_reset(np.zeros(1000, np.uint8))
        ...     rec.add_step(0, np.zeros(1000, np.uint8), 1.0, terminated=True)
        >>> _ = recode(d, z, compression="zstd")
        >>> with gym_recording.load(z) as r:
        ...     r[0].observations.shape
        (2, 1000)
    """
    compressor = make_compressor(compression, compression_level)
    src_dir, out_dir = os.fspath(directory), os.fspath(out)
    _check_apart(src_dir, out_dir)
    src = open_storage(src_dir, create=False)
    manifests = read_manifests(src, src_dir)
    if not manifests:
        names = src.list_names()
        msg = f"{src_dir} {no_recording(names if holds_no_recording(names) else ())}"
        raise RecordingError(msg)
    work = [(m, i) for m in manifests for i in range(len(m.batches))]
    for m, i in progress(work, total=len(work), desc="checking"):
        read_batch(src, src_dir, m, i)  # (every rule of every batch, before a file is written)
    out_path = local_path(out_dir)
    made = out_path is not None and not os.path.lexists(out_path)  # (removed if left empty)
    dst = open_storage(out_dir, create=True)
    if find_manifests(dst.list_names()):
        msg = f"{out_dir} already holds a recording: give a new directory to write the copy to"
        raise RecordingError(msg)
    docs = {m.name: _read_doc(src, m) for m in manifests}
    desc = "compressing" if compressor else "decompressing"
    written: list[str] = []  # (the copy's files so far: removed if it does not finish)
    try:
        for m, i in progress(work, total=len(work), desc=desc):
            entry = m.batches[i]
            data = src.read_bytes(entry.fn, MAX_BATCH_JSON_BYTES)
            name = m.blob_name(i)
            blob = BatchBlob(name, src.map, os.path.join(src_dir, entry.fn), MAX_BATCH_JSON_BYTES)
            json_bytes, chunks, size = recode_batch(
                data, blob, name, legacy=m.legacy, compressor=compressor
            )
            doc = docs[m.name]
            has_blob = "bin" in doc["batches"][i] or blob.arrays  # (else none: FORMAT.md §9)
            if has_blob:
                written.append(name)
                dst.write_atomic(name, chunks, sync_directory=False)
            written.append(entry.fn)
            dst.write_atomic(entry.fn, [json_bytes])
            if "bytes" in doc["batches"][i]:
                doc["batches"][i]["bytes"] = (size if has_blob else 0) + len(json_bytes)
        # The manifests last, together: a reader finds the whole copy, or none of it.
        with uninterrupted():
            for m in manifests:
                written.append(m.name)
                _write_doc(dst, m, docs[m.name])
            dst.sync()
    except BaseException:
        _remove(dst, written[::-1], out_path if made else None)  # (manifests first)
        raise
    return out_dir


def _remove(dst: Storage, names: list[str], made: str | None) -> None:
    """Remove a copy's files that a failure or an interrupt left (and ``made``, if empty)."""
    with uninterrupted():  # (a second Ctrl-C waits until all of it is removed)
        for name in names:
            with contextlib.suppress(Exception):  # (not in place of what is raised)
                dst.remove(name)
        if made is not None:
            with contextlib.suppress(OSError):  # (not empty: files of its own came)
                os.rmdir(made)


def _check_apart(src_dir: str, out_dir: str) -> None:
    """Refuse an ``out_dir`` that is ``src_dir``, is inside it, or holds it.

    Local paths (``file://`` URLs too) are compared resolved: symbolic links, ``.``, ``..``
    and trailing slashes do not hide that two are one. Other URLs are compared by the
    filesystem they name (``s3a://`` and ``simplecache::s3://`` are ``s3://``) and their
    path as text, trailing slashes aside (an object store takes ``.`` and ``//`` in a key
    as they are).

    Raises:
        RecordingError: they overlap.
    """
    src_path, out_path = local_path(src_dir), local_path(out_dir)
    if src_path is not None and out_path is not None:
        src, out, sep = os.path.realpath(src_path), os.path.realpath(out_path), os.sep
    elif src_path is None and out_path is None:
        src, out, sep = _remote_key(src_dir), _remote_key(out_dir), "/"
    else:  # (one local, one remote)
        return
    if out == src:
        how = "is that same directory"
    elif out.startswith(src.rstrip(sep) + sep):
        how = "is inside it"
    elif src.startswith(out.rstrip(sep) + sep):
        how = "holds it"
    else:
        return
    msg = (
        f"expected the copy's directory to be apart from the recording {src_dir}, but "
        f"{out_dir} {how}; give a new directory that neither is inside it nor holds it"
    )
    raise RecordingError(msg)


def _remote_key(url: str) -> str:
    """``url`` by its filesystem's first protocol name and its path, for comparisons."""
    fsspec = require("fsspec", "remote", f"reading or writing {url!r}")  # (before opening)
    protocol, _, path = url.rsplit("::", 1)[-1].partition("://")  # (the chain's target)
    try:
        names = fsspec.get_filesystem_class(protocol).protocol
    except (ImportError, ValueError):  # (opening it will say why)
        names = protocol
    return f"{names if isinstance(names, str) else names[0]}://{path.rstrip('/')}"


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))  # (checked by the reader: §3)


def _read_doc(storage: Storage, m: Manifest) -> Any:
    """A manifest's JSON, parsed as it is (checked already by ``read_manifests``).

    It keeps the batches ``m`` lists, those copied, when a writer has added more since.
    """
    doc: Any = decode(storage.read_bytes(m.name, MAX_MANIFEST_BYTES), Any, m.name, legacy=m.legacy)
    doc["batches"] = doc["batches"][: len(m.batches)]
    return doc


def _write_doc(storage: Storage, m: Manifest, doc: Any) -> None:
    """Write the copy's manifest: version 1 JSON as version 1 wrote it, else strict JSON.

    A version 2 copy is labelled with this writer's version, or the source's if later (a
    newer minor version's keys are copied as they are).
    """
    if not m.legacy:
        doc["format_version"] = max(m.version, FORMAT_VERSION, key=_version_key)
    storage.write_atomic(m.name, [encode(doc, legacy=m.legacy)])
