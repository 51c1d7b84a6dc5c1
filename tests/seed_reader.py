"""An independent reader for the ORIGINAL (version 1) gym-recording trace format.

This module deliberately knows nothing of gym_recording and nothing of version 2. It reads what
OpenAI's original ``save_complete`` wrote (see ``shared/seed/recording_save_complete.txt``):

- every ``openaigym.trace.*.manifest.json`` in a directory is one writer; its ``batches`` list
  ``{"first", "len", "fn"}`` entries in order;
- each batch JSON is ``{"episodes": [...]}``; inside it, an object
  ``{"__type": "ndarray", "shape", "dtype", "npyfile", "npyoff", "size", "order"}`` stands for the
  raw C-order bytes ``npyfile[npyoff : npyoff + size]``; every other JSON value is left as is.

The tests use it to prove that files written by the new writer are still readable by a reader that
only knows the old format, so it MUST NOT learn any version 2 extension. It is stricter than the
original about the things version 1 did guarantee (names, sizes, offsets, batch bookkeeping) so that
a writer bug shows up here as an error rather than as garbage.
"""

from __future__ import annotations

import json
import math
import mmap
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["MANIFEST_GLOB", "read_seed_format", "seed_writer_id"]

MANIFEST_GLOB = "openaigym.trace.*.manifest.json"
_PREFIX = "openaigym.trace."
_MANIFEST_SUFFIX = ".manifest.json"


def seed_writer_id(manifest_name: str) -> str:
    """Return a manifest name's writer id: ``openaigym.trace.1.42.manifest.json`` -> ``1.42``."""
    if not (manifest_name.startswith(_PREFIX) and manifest_name.endswith(_MANIFEST_SUFFIX)):
        raise ValueError(f"not a manifest name: {manifest_name!r}")
    return manifest_name[len(_PREFIX) : -len(_MANIFEST_SUFFIX)]


def _plain_name(name: Any, where: str) -> str:
    if (
        not isinstance(name, str)
        or not name
        or name in (".", "..")
        or "/" in name
        or "\\" in name
        or "\0" in name
    ):
        raise ValueError(f"{where}: file name {name!r} is not a plain name in the directory")
    return name


def _nonneg_int(value: Any, what: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{where}: {what} must be a non-negative int, got {value!r}")
    return value


def _read_batch(directory: Path, batch_fn: str, blobs: dict[str, bytes]) -> Any:
    """JSON-load one batch file, turning ndarray references into (copied) numpy arrays."""

    def load_ndarray(ref: dict[str, Any]) -> np.ndarray:
        where = f"{batch_fn}: ndarray reference {ref!r}"
        npyfile = _plain_name(ref.get("npyfile"), where)
        shape_value = ref.get("shape")
        if not isinstance(shape_value, list):
            raise ValueError(f"{where}: shape must be a list")
        shape = tuple(_nonneg_int(n, "shape entry", where) for n in shape_value)
        if ref.get("order", "C") != "C":
            raise ValueError(f"{where}: only C order was ever written")
        try:
            # Version 1 wrote str(arr.dtype) and the host's (little-endian) bytes.
            dtype = np.dtype(ref["dtype"]).newbyteorder("<")
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{where}: bad dtype") from exc
        if dtype.hasobject:
            raise ValueError(f"{where}: object dtype cannot come from raw bytes")
        offset = _nonneg_int(ref.get("npyoff"), "npyoff", where)
        size = _nonneg_int(ref.get("size"), "size", where)
        count = math.prod(shape)
        if size != count * dtype.itemsize:
            raise ValueError(f"{where}: size {size} != prod(shape) * itemsize")
        if npyfile not in blobs:  # (mapped, as the original maps it: an empty file fails)
            with (
                open(directory / npyfile, "rb") as f,
                mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm,
            ):
                blobs[npyfile] = mm[:]
        blob = blobs[npyfile]
        if offset + size > len(blob):
            raise ValueError(f"{where}: bytes {offset}..{offset + size} past the end of {npyfile}")
        # Copy so that nothing keeps the file's bytes alive or mapped.
        return np.frombuffer(blob, dtype=dtype, count=count, offset=offset).reshape(shape).copy()

    def hook(obj: dict[str, Any]) -> Any:
        if obj.get("__type") == "ndarray":
            return load_ndarray(obj)
        return obj

    with open(directory / batch_fn, encoding="utf-8") as f:
        # json.load accepts NaN/Infinity tokens, which version 1 writers could emit.
        return json.load(f, object_hook=hook)


def _read_manifest(directory: Path, manifest_path: Path) -> list[dict[str, Any]]:
    where = manifest_path.name
    with open(manifest_path, encoding="utf-8") as f:
        manifest = json.load(f)
    if not isinstance(manifest, dict) or not isinstance(manifest.get("batches"), list):
        raise ValueError(f"{where}: manifest must be an object with a 'batches' list")
    episodes: list[dict[str, Any]] = []
    blobs: dict[str, bytes] = {}
    expected_first: int | None = None
    for i, entry in enumerate(manifest["batches"]):
        entry_where = f"{where}: batches[{i}]"
        if not isinstance(entry, dict):
            raise ValueError(f"{entry_where}: must be an object")
        first = _nonneg_int(entry.get("first"), "first", entry_where)
        length = _nonneg_int(entry.get("len"), "len", entry_where)
        batch_fn = _plain_name(entry.get("fn"), entry_where)
        if expected_first is not None and first != expected_first:
            raise ValueError(f"{entry_where}: first is {first}, expected {expected_first}")
        expected_first = first + length
        batch = _read_batch(directory, batch_fn, blobs)
        if not isinstance(batch, dict) or not isinstance(batch.get("episodes"), list):
            raise ValueError(f"{batch_fn}: batch must be an object with an 'episodes' list")
        if len(batch["episodes"]) != length:
            raise ValueError(
                f"{batch_fn}: {len(batch['episodes'])} episodes, manifest {where} says {length}"
            )
        for j, episode in enumerate(batch["episodes"]):
            if not isinstance(episode, dict):
                raise ValueError(f"{batch_fn}: episodes[{j}] must be an object")
            missing = {"observations", "actions", "rewards"} - episode.keys()
            if missing:
                raise ValueError(f"{batch_fn}: episodes[{j}] lacks {sorted(missing)}")
            episodes.append(episode)
        blobs.clear()  # one batch's blob is not needed by the next
    return episodes


def read_seed_format(directory: str | Path) -> dict[str, list[dict[str, Any]]]:
    """Read every writer in ``directory`` as the original gym-recording reader would.

    Args:
        directory: the recording directory.

    Returns:
        Manifest file name -> that writer's episode dicts in order, each as decoded from JSON with
        ndarray references replaced by owned, writeable numpy arrays. Manifests are in name order.

    Raises:
        ValueError: a manifest, batch or ndarray reference breaks the version 1 format.
    """
    directory = Path(directory)
    return {
        path.name: _read_manifest(directory, path)
        for path in sorted(directory.glob(MANIFEST_GLOB))
        if path.is_file()
    }
