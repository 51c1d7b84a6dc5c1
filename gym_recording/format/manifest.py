"""Manifests (FORMAT.md §3): a writer's batches in order, and what it recorded.

:func:`decode_manifest` checks a manifest once, whole, for every reader (``load``, ``verify``,
the legacy reader, uploads): its version, its structure, its nesting, and that its batch
entries name exactly the writer's own files, one after the other. :func:`encode_manifest` is
the writer's side.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass, field, fields
from typing import Any

from gym_recording._errors import TraceFormatError
from gym_recording.format.arrays import brief
from gym_recording.format.limits import MAX_JSON_DEPTH
from gym_recording.format.names import (
    batch_names,
    is_writer_id,
    manifest_name,
    manifest_writer,
    segment_id,
    writer_prefix,
)
from gym_recording.format.wire import (
    BatchEntry,
    LegacyManifestDoc,
    ManifestDoc,
    convert,
    decode,
    encode,
    manifest_version,
)

__all__ = ["Manifest", "decode_manifest", "encode_manifest", "segment_breach"]


@dataclass(frozen=True)
class Manifest:
    """A checked manifest.

    Attributes:
        name: Its file name. ``prefix``: the file prefix of its writer (or segment).
        writer: The writer id (without a segment's suffix).
        version: The format version (``"1"`` for the original gym-recording's).
        batches: Its batch entries, in order.

    Each attribute after ``batches`` is the version 2 manifest key of its name (§3), with
    that key's default (what a version 1 manifest has).
    """

    name: str
    prefix: str
    writer: str
    version: str
    batches: tuple[BatchEntry, ...]
    created: str | None = None
    env_id: str | None = None
    env_spec: Any = None
    observation_space: Any = None
    action_space: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, Any] = field(default_factory=dict)
    record_infos: bool = False
    segment: int = 0
    render_fps: float | None = None

    @property
    def legacy(self) -> bool:
        """Whether this is a version 1 (original gym-recording) manifest."""
        return self.version == "1"

    @property
    def sort_key(self) -> tuple[float, str, str, int, str]:
        """Readers order writers by creation, writer id, segment, then file name (§8).

        By the time ``created`` names (``...Z`` and ``...+00:00`` alike; none first, one that
        is not a time last), then its text.
        """
        return (_seconds(self.created), self.created or "", self.writer, self.segment, self.name)

    def blob_name(self, i: int) -> str:
        """The name of the blob of batch ``i``: the only blob its arrays may be in (§9)."""
        return batch_names(self.prefix, self.batches[i].first)[1]


def _seconds(created: str | None) -> float:
    """The unix time an ISO 8601 ``created`` names (naive: UTC); -inf for none, inf for text."""
    if not created:
        return -math.inf
    try:
        t = datetime.datetime.fromisoformat(
            created[:-1] + "+00:00" if created[-1:] in "Zz" else created
        )
        if t.tzinfo is None:
            t = t.replace(tzinfo=datetime.timezone.utc)
        return t.timestamp()
    except (ValueError, OverflowError, OSError):
        return math.inf


def _check_depth(obj: Any, path: str) -> None:
    """Refuse parsed JSON whose lists and objects nest deeper than MAX_JSON_DEPTH (no recursion)."""
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        v, d = stack.pop()
        if d > MAX_JSON_DEPTH:
            msg = f"JSON nests deeper than {MAX_JSON_DEPTH} levels"
            raise TraceFormatError(msg, path)
        for c in v.values() if type(v) is dict else v:
            if type(c) is list or type(c) is dict:
                stack.append((c, d + 1))


def decode_manifest(data: bytes, name: str, path: str) -> Manifest:
    """Parse and check a manifest file's bytes (FORMAT.md §2, §3, §9).

    Version 1 manifests may hold ``NaN``/``Infinity`` tokens; later versions are strict JSON.

    Raises:
        TraceFormatError: the manifest breaks the format; the message names the file.
    """
    writer_id = manifest_writer(name)
    if writer_id is None:
        msg = "expected a manifest named openaigym.trace.<writer-id>.manifest.json"
        raise TraceFormatError(msg, path)
    prefix = writer_prefix(writer_id)
    doc: Any
    try:
        doc = decode(data, Any, path)
    except TraceFormatError as strict_error:
        doc = decode(data, Any, path, legacy=True)  # version 1 may hold NaN tokens
        if manifest_version(doc, path) != "1":
            raise strict_error from None
    version = manifest_version(doc, path)
    _check_depth(doc, path)
    typ: type[LegacyManifestDoc | ManifestDoc] = (
        LegacyManifestDoc if version == "1" else ManifestDoc
    )
    m: LegacyManifestDoc | ManifestDoc = convert(doc, typ, path)
    entries = tuple(m.batches)
    expect_first = 0
    seen: set[str] = set()
    after_continues = False
    for i, b in enumerate(entries):
        if b.first != expect_first:
            why = "the first batch starts at 0" if i == 0 else "previous first + len"
            msg = f"batches[{i}]: expected first == {expect_first} ({why}), got {b.first}"
            raise TraceFormatError(msg, path)
        expect_first = b.first + b.len
        want_fn, want_bin = batch_names(prefix, b.first)
        if b.fn != want_fn or b.bin not in (None, want_bin):
            msg = (
                f"batches[{i}]: expected the files {want_fn} and {want_bin} of this writer "
                f"(FORMAT.md §1), got {brief(b.fn)} and {brief(b.bin)}"
            )
            raise TraceFormatError(msg, path)
        if b.fn in seen:
            msg = f"batches[{i}]: batch file {b.fn!r} is listed twice"
            raise TraceFormatError(msg, path)
        seen.add(b.fn)
        if (b.continues or after_continues) and b.len < 1:
            msg = f"batches[{i}]: {b.fn} is listed as holding part of an episode but holds none"
            raise TraceFormatError(msg, path)
        after_continues = b.continues
    if isinstance(m, LegacyManifestDoc):
        return Manifest(name, prefix, writer_id, version, entries)
    writer = m.writer if is_writer_id(m.writer) else writer_id
    return Manifest(name, prefix, writer, version, entries, **{k: getattr(m, k) for k in _KEPT})


def segment_breach(m: Manifest) -> str | None:
    """What FORMAT.md §3 says against the name of ``m`` for its ``segment``, if anything.

    Segment ``k`` of writer ``w`` (its ``writer``) is the writer id ``w.s<k>``, segment 0
    ``w`` itself, and its files are named by that id (§1). Readers read a manifest named
    otherwise all the same (they order a writer's segments by ``segment``); ``verify``
    reports it. Without a valid ``writer`` key, only the ``.s<k>`` a segment ``k`` > 0 ends
    its name with is checked.

    Returns:
        The problem, naming the key and how to fix it; ``None`` if the name fits.
    """
    own = m.prefix[len(writer_prefix("")) :]  # (the writer id of the file name)
    k = m.segment
    expected = segment_id(m.writer, k)
    if own == expected or (m.writer == own and k > 0 and own.endswith(f".s{k}")):
        return None
    if m.writer == own:  # (no writer key, or one that says nothing else)
        what = f"the writer id in its name to end with .s{k}"
    else:
        what = f"its name to be {manifest_name(writer_prefix(expected))}"
    return (
        f"segment: expected segment {k} of writer {m.writer!r} to be named by the writer id "
        f"<writer>.s<k> (FORMAT.md §3; the writer's own id for segment 0), so {what}; got "
        f"{m.name}. Readers read it all the same; set `segment` to the k of the .s<k> its "
        "name ends with (0 for none) and `writer` to the id before it"
    )


#: The keys of a version 2 manifest that :class:`Manifest` holds as they are: its attributes
#: after ``name``, ``prefix``, ``writer``, ``version`` and ``batches``.
_KEPT = [f.name for f in fields(Manifest)][5:]


def encode_manifest(doc: ManifestDoc) -> bytes:
    """A manifest's bytes, as the writer writes them."""
    return encode(doc)
