"""File names (FORMAT.md §1): writers' prefixes, the names of their files, and which is which.

Every rule about a trace file's name lives here, and every part of gym-recording that needs
one asks this module: the recorder names its files with :func:`batch_names` and
:func:`manifest_name`, readers and ``verify`` find writers with :func:`find_manifests` and
check a manifest's entries with :func:`batch_names`, the viewer's server serves only what
:func:`classify` recognises, and uploads order files by :func:`write_rank`.

Example:
    >>> prefix = writer_prefix("0.123.ab12")
    >>> manifest_name(prefix)
    'openaigym.trace.0.123.ab12.manifest.json'
    >>> batch_names(prefix, 5)[1]
    'openaigym.trace.0.123.ab12.ep000000005.bin'
    >>> classify("openaigym.trace.0.123.ab12.ep000000005.bin"), classify(".gymrec-tmp-0a1b")
    ('blob', 'temp')
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from typing import Literal, TypeGuard

__all__ = [
    "TEMP_PREFIX",
    "TRACE_PREFIX",
    "FileKind",
    "batch_names",
    "classify",
    "find_manifests",
    "holds_no_recording",
    "is_plain_name",
    "is_temp_name",
    "is_trace_name",
    "is_writer_id",
    "manifest_name",
    "manifest_writer",
    "misnamed_manifest",
    "misnamed_manifests",
    "no_recording",
    "segment_id",
    "write_rank",
    "writer_prefix",
]

#: Every trace file's name starts with this.
TRACE_PREFIX = "openaigym.trace."
#: Temporary files of atomic writes (FORMAT.md §2): tools report and remove leftovers.
TEMP_PREFIX = ".gymrec-tmp-"

_WRITER_ID = r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*"
_WRITER_ID_RE = re.compile(_WRITER_ID)
_MANIFEST = re.compile(rf"^openaigym\.trace\.({_WRITER_ID})\.manifest\.json\Z")
_BATCH = re.compile(rf"^openaigym\.trace\.({_WRITER_ID})\.ep\d{{9,}}\.(json|bin)\Z")
_MANIFEST_GLOB = re.compile(r"^openaigym\.trace\..*\.manifest\.json\Z", re.DOTALL)
_PLAIN = re.compile(r"^[^/\\\x00]+\Z")

FileKind = Literal["manifest", "batch", "blob", "temp"]


def is_plain_name(name: object) -> TypeGuard[str]:
    r"""Whether ``name`` is a plain file name: no directory part, not ``.``/``..``, no NUL.

    It must also encode to at most 255 bytes for the filesystem (no lone surrogates).

    Example:
        >>> is_plain_name("a.bin"), is_plain_name("../a.bin"), is_plain_name("\\ud800")
        (True, False, False)
    """
    if not (isinstance(name, str) and name not in (".", "..") and _PLAIN.fullmatch(name)):
        return False
    try:
        return len(os.fsencode(name)) <= 255
    except UnicodeError:
        return False


def is_trace_name(name: object) -> TypeGuard[str]:
    """Whether ``name`` is a plain name starting with ``openaigym.trace.``: a trace file's."""
    return is_plain_name(name) and name.startswith(TRACE_PREFIX)


def is_temp_name(name: str) -> bool:
    """Whether ``name`` is a temporary file of an atomic write (possibly a leftover)."""
    return name.startswith(TEMP_PREFIX)


def is_writer_id(writer_id: object) -> TypeGuard[str]:
    """Whether ``writer_id`` is a valid writer id: dot-separated runs of ``[A-Za-z0-9_-]``."""
    return isinstance(writer_id, str) and _WRITER_ID_RE.fullmatch(writer_id) is not None


def writer_prefix(writer_id: str) -> str:
    """The prefix of the files of the writer (or segment) ``writer_id``."""
    return f"{TRACE_PREFIX}{writer_id}"


def segment_id(writer_id: str, segment: int) -> str:
    """The writer id of ``segment`` of a writer (FORMAT.md §3): itself for segment 0."""
    return f"{writer_id}.s{segment}" if segment else writer_id


def manifest_name(prefix: str) -> str:
    """The manifest file name of the writer with file prefix ``prefix``."""
    return f"{prefix}.manifest.json"


def manifest_writer(name: str) -> str | None:
    """The writer (or segment) id whose manifest is ``name``, or ``None`` if not a manifest."""
    m = _MANIFEST.match(name)
    return None if m is None else m.group(1)


def batch_names(prefix: str, first: int) -> tuple[str, str]:
    """The batch JSON and blob names of the batch starting at episode object ``first``.

    A manifest's entries MUST use exactly these names (its own prefix, its own ``first``):
    that keeps one writer's batches from claiming another's files, or temporary files.
    """
    stem = f"{prefix}.ep{first:09}"
    return f"{stem}.json", f"{stem}.bin"


def classify(name: str) -> FileKind | None:
    """What kind of file ``name`` is, by its name alone; ``None`` for anything else."""
    if is_temp_name(name):
        return "temp"
    if _MANIFEST.match(name):
        return "manifest"
    m = _BATCH.match(name)
    if m is None:
        return None
    return "batch" if m.group(2) == "json" else "blob"


def find_manifests(names: Iterable[str]) -> list[str]:
    """The manifests among a directory's ``names``, sorted: how readers find writers (§1)."""
    return sorted(n for n in names if _MANIFEST.match(n))


def misnamed_manifests(names: Iterable[str]) -> list[str]:
    """The names that match ``openaigym.trace.*.manifest.json`` but break §1's writer id, sorted.

    Readers refuse them (§8) rather than skip a writer.
    """
    return sorted(n for n in names if _MANIFEST_GLOB.match(n) and not _MANIFEST.match(n))


def misnamed_manifest(name: str) -> str:
    """What to say of a manifest in :func:`misnamed_manifests`, after its path."""
    writer = name[len(TRACE_PREFIX) : -len(".manifest.json")]
    return (
        f"named as a writer's manifest, but its writer id {writer!r} breaks FORMAT.md §1 "
        "(dot-separated runs of A-Z, a-z, 0-9, _ and -), so no reader can tell which files "
        "are its own; rename the file to its writer's id, or move it out of the recording"
    )


def holds_no_recording(names: Iterable[str]) -> bool:
    """Whether a directory of ``names`` holds files, none of them a trace file (a wrong path)."""
    names = list(names)
    return bool(names) and all(classify(n) is None for n in names)


def no_recording(names: Sequence[str] = ()) -> str:
    """What to say of a directory that holds no recording, after its name.

    ``names``: the other entries it holds, if that is why (see :func:`holds_no_recording`).
    """
    msg = f"holds no recording (no {TRACE_PREFIX}*.manifest.json file)"
    if names:
        n, shown = len(names), ", ".join(sorted(names)[:3]) + (", ..." if len(names) > 3 else "")
        msg += f", only {n} other entr{'y' if n == 1 else 'ies'} ({shown}); pass the directory"
        msg += " the recorder wrote"
    return msg


def write_rank(name: str) -> int:
    """Where ``name`` goes in a copy that readers may watch: blobs, batches, manifests (§2)."""
    return {"blob": 1, "batch": 2, "manifest": 3}.get(classify(name) or "", 0)
