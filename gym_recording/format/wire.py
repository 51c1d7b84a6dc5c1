"""The documents of FORMAT.md as typed structures, and the one JSON codec for them.

Each :class:`msgspec.Struct` below is a JSON object of the format: a manifest (§3) and its
batch entries, a batch (§4) and its episode objects, and the field forms of §5 (ndarray
references, Dict and Tuple fields, per-step lists). The writer builds these and encodes them;
the reader decodes files into them, and msgspec checks every type and range on the way (a
``true`` is not an int, a shape has at most 32 non-negative dimensions, a dtype is on the
allow-list, ...), naming the place of any violation. What types cannot say (a size against a
shape, an offset against a blob, parts that join) is checked by the modules above this one.

Version 2 files are strict UTF-8 JSON. Version 1 files (the original gym-recording) may hold
``NaN``/``Infinity`` tokens: they are parsed by the ``json`` module and then checked against
the same structures (:func:`msgspec.convert`).

The structures are not tracked by the garbage collector (``gc=False``): they never refer to
themselves, and a batch makes thousands of them, which would otherwise set off collections
of the whole heap while a recording is written or read.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Annotated, Any, Literal, TypeVar, Union

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from gym_recording._errors import TraceFormatError
from gym_recording.format.limits import (
    COSTLY_JSON_BYTES,
    INTP_MAX,
    MAX_EPISODE_OBJECTS,
    MAX_JSON_COST,
    MAX_NDIM,
)

__all__ = [
    "DTYPES",
    "EPISODE_KEYS",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "ArrayRef",
    "Batch",
    "BatchEntry",
    "DictField",
    "EpisodeKeys",
    "EpisodeObject",
    "Field",
    "InfoColumn",
    "InfoColumns",
    "LegacyManifestDoc",
    "ManifestDoc",
    "TupleField",
    "convert",
    "decode",
    "encode",
    "json_cost",
    "manifest_version",
    "part_keys",
    "version_breach",
]

FORMAT_NAME = "gym-recording"
FORMAT_VERSION = "2.3"
#: The newest major version this reader knows.
KNOWN_MAJOR = 2

#: Array dtypes a blob may hold (§6.1), little-endian.
DTYPES = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
)

NonNeg = Annotated[int, Meta(ge=0, le=INTP_MAX)]
Shape = Annotated[list[NonNeg], Meta(max_length=MAX_NDIM)]
DType = Literal[DTYPES]  # type: ignore[valid-type]


class ArrayRef(Struct, tag_field="__type", tag="ndarray", gc=False):
    """An ndarray reference (§6.1): ``size`` bytes of ``npyfile`` at ``npyoff``, C order.

    A compressed one (§6.2) also names its ``codec``, and ``rawsize``, the array's bytes;
    ``size`` is then the compressed bytes in the blob. Both are omitted when unset.
    """

    shape: Shape
    dtype: DType
    npyfile: str
    npyoff: NonNeg
    size: NonNeg
    order: Literal["C"] = "C"
    codec: Annotated[str, Meta(min_length=1)] | UnsetType = UNSET
    rawsize: NonNeg | UnsetType = UNSET


class DictField(Struct, tag_field="__type", tag="dict", gc=False):
    """A Dict-space field (§5): one field per key."""

    fields: dict[str, Field]


class TupleField(Struct, tag_field="__type", tag="tuple", gc=False):
    """A Tuple-space field (§5): one field per position."""

    fields: list[Field]


#: A field (§5): an ndarray whose first axis is the step, a Dict or Tuple of fields, or a list
#: of per-step values (§6).
Field = Union[ArrayRef, DictField, TupleField, list[Any]]  # noqa: UP007 - msgspec reads it


class InfoColumn(Struct, gc=False):
    """One info key's values over an episode object's steps (§4, version 2.1).

    ``data[j]`` is step ``j + 1``'s; ``kind`` says what each was (a Python ``float``, ``int``,
    ``bool``, a numpy ``scalar`` of ``data``'s dtype, or an ``array`` of one shape).
    """

    kind: Literal["float", "int", "bool", "scalar", "array"]
    data: ArrayRef


class InfoColumns(Struct, gc=False):
    """The step infos' keys stored as columns (§4, version 2.1), and their order in each."""

    order: Annotated[list[str], Meta(max_length=65536)]
    columns: dict[str, InfoColumn]


class EpisodeObject(Struct, omit_defaults=True, gc=False):
    """An episode object (§4): one episode, or one part of an episode split across batches."""

    observations: Field
    actions: Field
    rewards: Field
    terminated: bool = False
    truncated: bool = False
    seed: int | None = None
    options: Any = None
    infos: list[Any] | None = None
    started_at: float | None = None
    ended_at: float | None = None
    part: NonNeg = 0
    continues: bool = False
    info_columns: InfoColumns | None = None
    render_frames: ArrayRef | None = None


@dataclasses.dataclass(frozen=True, eq=False, init=False, kw_only=True)
class EpisodeKeys:
    """An episode's keys that hold one JSON value each (§4), as a reader hands them out.

    This is the one place such a key is declared for readers: :class:`EpisodeObject` above
    holds it in the file, and ``Episode`` (which derives from this class) hands it out. The
    metadata of each says which part of an episode split across batches gives its value
    (§4): the ``"first"`` or the ``"last"``.

    Attributes:
        terminated: Whether the last step terminated the episode.
        truncated: Whether the last step truncated it (both false if cut by reset or close).
        seed: The seed passed to ``reset``, or ``None``.
        started_at: Unix time of the reset, if recorded.
        ended_at: Unix time the episode ended, if recorded.
    """

    terminated: bool = dataclasses.field(default=False, metadata={"part": "last"})
    truncated: bool = dataclasses.field(default=False, metadata={"part": "last"})
    seed: int | None = dataclasses.field(default=None, metadata={"part": "first"})
    started_at: float | None = dataclasses.field(default=None, metadata={"part": "first"})
    ended_at: float | None = dataclasses.field(default=None, metadata={"part": "last"})


#: The keys of :class:`EpisodeKeys`, each with the part that gives its value (§4).
EPISODE_KEYS: dict[str, str] = {f.name: f.metadata["part"] for f in dataclasses.fields(EpisodeKeys)}


def part_keys(keys: dict[str, Any], *, first: bool, last: bool) -> dict[str, Any]:
    """Which of an episode's ``keys`` a part of it stores when it is split across batches (§4).

    The first part holds the keys whose value is the first part's, the last part the keys
    whose value is the last's, and a part between them neither.
    """
    return {k: v for k, v in keys.items() if (first if EPISODE_KEYS[k] == "first" else last)}


class Batch(Struct, gc=False):
    """A batch file (§4)."""

    episodes: list[EpisodeObject]


class BatchEntry(Struct, omit_defaults=True, gc=False):
    """One entry of a manifest's ``batches`` (§3)."""

    first: NonNeg
    len: Annotated[int, Meta(ge=0, le=MAX_EPISODE_OBJECTS)]
    fn: str
    bin: str | None = None
    steps: NonNeg | None = None
    bytes: NonNeg | None = None
    continues: bool = False


class LegacyManifestDoc(Struct):
    """A version 1 manifest: its batches; every other key is ignored."""

    batches: list[BatchEntry]


class ManifestDoc(Struct):
    """A version 2 manifest (§3)."""

    batches: list[BatchEntry]
    format: str = FORMAT_NAME
    format_version: str = FORMAT_VERSION
    writer: str | None = None
    created: str | None = None
    env_id: str | None = None
    env_spec: Any = None
    observation_space: Any = None
    action_space: Any = None
    versions: dict[str, Any] = msgspec.field(default_factory=dict)
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    record_infos: bool = False
    segment: NonNeg = 0
    render_fps: Annotated[float, Meta(gt=0, le=1e6)] | None = None


_encoder = msgspec.json.Encoder()
# (made at import, so that building them is not part of reading a first batch)
_decoders: dict[Any, msgspec.json.Decoder[Any]] = {t: msgspec.json.Decoder(t) for t in (Batch, Any)}
_VERSION = re.compile(r"\d{1,9}(\.\d{1,9}){0,3}")
#: A version 2 manifest's ``format_version`` (§3): "2.<minor>", as "2.0" ... "2.3".
_VERSION_2 = re.compile(r"2\.(?:0|[1-9][0-9]{0,8})")
T = TypeVar("T")


def encode(obj: Any, *, legacy: bool = False) -> bytes:
    r"""Strict, compact ASCII JSON of ``obj`` (a structure of this module, or plain JSON data).

    Non-ASCII characters are ``\u`` escapes, as Python's ``json`` (and version 1 writers)
    wrote them. With ``legacy`` (version 1 JSON, kept as it was) ``NaN``/``Infinity`` tokens
    may be written.

    Raises:
        TypeError, ValueError: ``obj`` holds something JSON cannot represent.
    """
    if legacy:
        text = json.dumps(msgspec.to_builtins(obj), allow_nan=True, separators=(",", ":"))
        return text.encode("ascii")
    data = _encoder.encode(obj)
    # (Outside its strings JSON is ASCII, so each non-ASCII character is in a string.)
    return data if data.isascii() else _NON_ASCII.sub(_escape, data.decode()).encode("ascii")


_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def _escape(m: re.Match[str]) -> str:
    r"""One non-ASCII character as JSON's ``\u`` escape (a surrogate pair past U+FFFF)."""
    c = ord(m.group())
    if c < 0x10000:
        return f"\\u{c:04x}"
    c -= 0x10000
    return f"\\u{0xD800 | (c >> 10):04x}\\u{0xDC00 | (c & 0x3FF):04x}"


def _problem(exc: Exception) -> str:
    """Msgspec's message, worded as the rest of gym-recording's: what was expected, and where."""
    text = str(exc)
    if text[:1].isupper() and not text.startswith("JSON"):
        text = text[0].lower() + text[1:]
    return text.replace(" - at `", " at `")


def json_cost(data: bytes) -> int:
    """About the memory, in bytes, that the Python objects parsed from ``data`` take.

    Counted from the tokens that make objects (a list ~64 bytes, a dict ~240, each item or
    key ~32) and the bytes themselves (strings); brackets inside strings count too, so it
    errs high.
    """
    items = data.count(b",") + data.count(b":")
    return 64 * data.count(b"[") + 240 * data.count(b"{") + 32 * items + len(data)


def decode(data: bytes, typ: type[T] | Any, path: str, *, legacy: bool = False) -> T:
    """Parse a file's bytes as ``typ`` (a structure above, or ``Any``), checking every type.

    Args:
        data: The file's bytes.
        typ: What the file must hold.
        path: The file, for messages.
        legacy: The file is version 1: ``NaN``/``Infinity`` tokens are accepted.

    Raises:
        TraceFormatError: the bytes are not strict UTF-8 JSON (version 1 may hold the
            non-finite tokens) or do not have the structure ``typ`` says.
    """
    if len(data) > COSTLY_JSON_BYTES and json_cost(data) > MAX_JSON_COST:
        msg = (
            f"its JSON would take more than {MAX_JSON_COST >> 20} MiB of memory to parse "
            f"(FORMAT.md §9: counted from its {len(data)} bytes' brackets and separators)"
        )
        raise TraceFormatError(msg, path)
    try:
        if not data.isascii():
            data.decode("utf-8")  # every byte, even of keys msgspec skips (§2: UTF-8 only)
        if not legacy:
            dec = _decoders.get(typ)
            if dec is None:
                dec = _decoders[typ] = msgspec.json.Decoder(typ)
            return dec.decode(data)
        text = data.decode("utf-8")  # strict: no other encoding, no surrogates
        return msgspec.convert(json.loads(text), typ)
    except msgspec.ValidationError as exc:
        problem = _problem(exc)
        if legacy and problem.startswith("invalid enum value") and problem.endswith(".dtype`"):
            msg = (
                f"holds a version 1 array of a dtype gym-recording does not read: {problem} "
                "(FORMAT.md §6.1: the original writer stored arrays of any NumPy dtype, and "
                "this one is not among those gym-recording reads)"
            )
            raise TraceFormatError(msg, path) from None
        raise TraceFormatError(f"does not follow FORMAT.md: {problem}", path) from None
    except (msgspec.DecodeError, ValueError, UnicodeDecodeError) as exc:
        msg = f"expected a UTF-8 JSON document, but it does not parse: {_problem(exc)[:200]}"
        if (lone := _LONE_SURROGATE.search(data)) is not None:  # (msgspec: "truncated")
            msg += (
                f" (it holds {lone.group().decode()}, the \\u escape of a lone surrogate, "
                "which is no Unicode text: FORMAT.md §2)"
            )
        raise TraceFormatError(msg, path) from None
    except RecursionError:
        msg = "JSON nests too deeply to be a trace file"
        raise TraceFormatError(msg, path) from None
    except MemoryError:
        msg = "JSON is too large to parse in memory"
        raise TraceFormatError(msg, path) from None


#: A ``\\u`` escape of a high surrogate that no low one follows, or of a low one alone.
_LONE_SURROGATE = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)


def convert(obj: Any, typ: type[T] | Any, path: str) -> T:
    """Parsed JSON ``obj`` checked as ``typ`` (as :func:`decode` checks a file's bytes).

    Raises:
        TraceFormatError: ``obj`` does not have the structure ``typ`` says.
    """
    try:
        return msgspec.convert(obj, typ)
    except msgspec.ValidationError as exc:
        raise TraceFormatError(f"does not follow FORMAT.md: {_problem(exc)}", path) from None


def manifest_version(doc: Any, path: str) -> str:
    """The format version of a parsed manifest (``"1"`` without one), checked (§3).

    Raises:
        TraceFormatError: not a JSON object, a malformed version, a major version this
            reader does not know (newer, or other than 1 and 2), or a version 2 manifest
            whose ``format`` is not ``"gym-recording"``.
    """
    if not isinstance(doc, dict):
        msg = f"expected a JSON object at the top of a manifest, got {type(doc).__name__}"
        raise TraceFormatError(msg, path)
    version = doc.get("format_version", "1")
    if not (isinstance(version, str) and _VERSION.fullmatch(version)):
        msg = f'expected format_version to be a string like "2.0", got {_shown(version)}'
        raise TraceFormatError(msg, path)
    major = int(version.split(".")[0])
    if major > KNOWN_MAJOR:
        msg = (
            f"format version {version} is newer than this reader knows ({FORMAT_VERSION}); "
            "upgrade gym-recording to read it"
        )
        raise TraceFormatError(msg, path)
    if major < 1 or (major == 1 and version != "1"):  # (version 1 has no minor versions)
        msg = f"expected format_version '1' or '2.<minor>', got unknown version {version!r}"
        raise TraceFormatError(msg, path)
    if major > 1 and doc.get("format") != FORMAT_NAME:  # (writers MUST write it)
        got = _shown(doc["format"]) if "format" in doc else "no format"
        msg = f'expected format "{FORMAT_NAME}" beside format_version {version}, got {got}'
        raise TraceFormatError(msg, path)
    return version


def version_breach(version: str) -> str | None:
    """What FORMAT.md §3 says against a ``format_version`` that :func:`manifest_version` took.

    A version 2 manifest's ``format_version`` is ``"2.<minor>"`` (``"2.3"``, or ``"2.2"``,
    ``"2.1"``, ``"2.0"``). The reader reads another of major version 2 (``"2"``,
    ``"2.3.1"``) all the same, as §3 asks it to refuse only a major version it does not
    know; ``verify`` reports it.

    Args:
        version: What :func:`manifest_version` returned (``"1"`` for a version 1 manifest).

    Returns:
        The problem, naming the key and how to fix it; ``None`` for a version §3 names.

    Example:
        >>> version_breach("2.3") is None, version_breach("1") is None
        (True, True)
        >>> version_breach("2")[:48]
        'format_version: expected "2.<minor>" (FORMAT.md '
    """
    if version == "1" or _VERSION_2.fullmatch(version):
        return None
    return (
        f'format_version: expected "2.<minor>" (FORMAT.md §3: "{FORMAT_VERSION}", or "2.2", '
        f'"2.1", "2.0"), got {version!r}; gym-recording reads it as version 2, other readers '
        "may refuse it: set it to the version the writer follows (gym-recording "
        f'{FORMAT_VERSION} writes "{FORMAT_VERSION}")'
    )


def _shown(value: Any) -> str:
    """A parsed JSON value as its JSON text (a number is not a string), cut to 40 characters."""
    return json.dumps(value, ensure_ascii=False)[:40]
