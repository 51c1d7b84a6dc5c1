"""The on-disk format (FORMAT.md): file names, encoding and validated decoding.

This module owns every byte layout decision. It does no IO of its own: encoders return bytes
and lists of buffers for :mod:`gym_recording._storage` to write, and decoders take bytes and a
callable that returns a blob's bytes.
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import copy
import itertools
import json
import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

import numpy as np

from gym_recording._cext import speedups as _speedups
from gym_recording._errors import TraceFormatError
from gym_recording._storage import is_plain_name

try:  # optional (the `fast` extra): parses batch files about 2.5x faster than the json module
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on what is installed
    _orjson = None  # type: ignore[assignment]

#: The batch-level fast path in C (:func:`decode_batch_plain`), or ``None``.
_decode_plain_c = getattr(_speedups, "decode_plain", None)

# Every digit to "0", every other byte to " ": a run of 19 digits is then a plain substring,
# found at memory speed (a regex takes longer than orjson's whole parse).
_DIGITS_TO_ZERO = bytes(48 if 48 <= i <= 57 else 32 for i in range(256))
_LONG_DIGITS = b"0" * 19
_NOT_PARSED = object()

__all__ = [
    "ALLOWED_DTYPES",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "MANIFEST_RE",
    "MAX_BATCH_JSON_BYTES",
    "MAX_DECODED_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_MANIFEST_BYTES",
    "MAX_NDIM",
    "MAX_NESTING",
    "BatchEntry",
    "BlobBuilder",
    "DecodeContext",
    "EpisodeRecord",
    "FieldDict",
    "FieldTuple",
    "Manifest",
    "PerStep",
    "batch_names",
    "check_batch_entry",
    "check_json_depth",
    "decode_batch_episodes",
    "decode_episode",
    "decode_field",
    "decode_manifest",
    "decode_value",
    "dtype_name",
    "dumps",
    "encode_batch",
    "encode_value",
    "field_length",
    "manifest_name",
    "parse_json",
    "parse_manifest",
    "snapshot",
]

FORMAT_NAME = "gym-recording"
FORMAT_VERSION = "2.0"
_KNOWN_MAJOR = 2

#: ``openaigym.trace.<writer-id>.manifest.json``; group 1 is the writer id.
MANIFEST_RE = re.compile(
    r"^openaigym\.trace\.([A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*)\.manifest\.json$"
)

#: Array dtypes that may be stored in a blob (FORMAT.md §6.1), little-endian.
ALLOWED_DTYPES: frozenset[str] = frozenset(
    [
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
    ]
)

#: The little-endian dtype of each allowed name, made once.
_LE_DTYPES: dict[str, np.dtype[Any]] = {n: np.dtype(n).newbyteorder("<") for n in ALLOWED_DTYPES}

MAX_MANIFEST_BYTES = 64 * 1024 * 1024
MAX_BATCH_JSON_BYTES = 512 * 1024 * 1024
#: How deeply values may nest (JSON containers plus ``__type`` wrappers).
MAX_NESTING = 100
#: How deeply a manifest's JSON may nest (its metadata and spec reach users as they are).
MAX_JSON_DEPTH = 512
#: The most dimensions an array may have.
MAX_NDIM = 32
#: Bytes that decoding one episode object may allocate for arrays built from JSON values
#: (``jsonarray``); arrays from blobs are zero-copy views and cost nothing here.
MAX_DECODED_BYTES = 256 * 1024 * 1024
_INTP_MAX = 2**63 - 1
#: numpy kinds a ``jsonarray`` may have: numbers, strings, bytes, dates, and plain objects.
_JSONARRAY_KINDS = frozenset("biufcUSMmO")


def manifest_name(prefix: str) -> str:
    """The manifest file name of the writer with file prefix ``prefix``."""
    return f"{prefix}.manifest.json"


def batch_names(prefix: str, first: int) -> tuple[str, str]:
    """The batch JSON and blob file names of the batch starting at episode object ``first``."""
    stem = f"{prefix}.ep{first:09}"
    return f"{stem}.json", f"{stem}.bin"


def dumps(obj: Any) -> bytes:
    """Strict, compact JSON as UTF-8 bytes (no NaN/Infinity: those are encoded as values)."""
    return json.dumps(obj, allow_nan=False, separators=(",", ":"), ensure_ascii=False).encode()


# --------------------------------------------------------------------------------------------
# Encoding
# --------------------------------------------------------------------------------------------


class PerStep(list[Any]):
    """A field stored as a JSON list of per-step values (FORMAT.md §5)."""


class FieldDict(dict[str, Any]):
    """A Dict-space field: a mapping of key to field, stored leaf by leaf."""


class FieldTuple(tuple[Any, ...]):
    """A Tuple-space field: a tuple of fields, stored leaf by leaf."""


class BlobBuilder:
    """Lays arrays out in a blob at 8-byte-aligned offsets without copying them.

    Args:
        name: The blob's file name, written into every reference.
    """

    _PAD = b"\x00" * 8

    def __init__(self, name: str) -> None:
        self.name = name
        self._name_json = json.dumps(name)
        self.chunks: list[Any] = []
        self.size = 0

    def add(self, arr: np.ndarray) -> dict[str, Any]:
        """Append ``arr`` (C-contiguous, little-endian, allowed dtype) and return its reference."""
        offset, nbytes, arr = self.add_raw(arr)
        return {
            "__type": "ndarray",
            "shape": list(arr.shape),
            "order": "C",
            "dtype": dtype_name(arr.dtype),
            "npyfile": self.name,
            "npyoff": offset,
            "size": nbytes,
        }

    def add_json(self, arr: np.ndarray) -> str:
        """Append ``arr`` like :meth:`add`; return its reference as JSON text (the fast path)."""
        offset, nbytes, arr = self.add_raw(arr)
        return (
            '{"__type":"ndarray","shape":['
            + ",".join([str(d) for d in arr.shape])
            + '],"order":"C","dtype":"'
            + dtype_name(arr.dtype)
            + '","npyfile":'
            + self._name_json
            + ',"npyoff":'
            + str(offset)
            + ',"size":'
            + str(nbytes)
            + "}"
        )

    def add_raw(self, arr: np.ndarray) -> tuple[int, int, np.ndarray]:
        """Append ``arr``'s bytes at the next 8-byte boundary: ``(offset, nbytes, array)``."""
        pad = -self.size % 8
        if pad:
            self.chunks.append(self._PAD[:pad])
            self.size += pad
        offset = self.size
        nbytes = arr.nbytes
        if nbytes:
            try:
                view = arr.data.cast("B")  # no copy; refused unless C-contiguous
            except (TypeError, ValueError):
                arr = np.ascontiguousarray(arr)
                view = arr.data.cast("B")
            self.chunks.append(view)
            self.size += nbytes
        return offset, nbytes, arr


# dtype.name is computed anew on every access, and hashing a dtype is slow too: cache both
# answers by the dtype object's identity (the object is kept, so its id is never reused).
_DTYPE_INFO: dict[int, tuple[np.dtype[Any], str, bool]] = {}


def _dtype_info(dtype: np.dtype[Any]) -> tuple[np.dtype[Any], str, bool]:
    info = _DTYPE_INFO.get(id(dtype))
    if info is None or info[0] is not dtype:
        name = dtype.name
        info = (dtype, name, name in ALLOWED_DTYPES and dtype.byteorder in "=<|")
        if len(_DTYPE_INFO) < 1024:
            _DTYPE_INFO[id(dtype)] = info
    return info


def dtype_name(dtype: np.dtype[Any]) -> str:
    """``dtype.name``, cached."""
    return _dtype_info(dtype)[1]


def blob_dtype_ok(dtype: np.dtype[Any]) -> bool:
    """Whether arrays of ``dtype`` can be stored raw in a blob as they are."""
    return _dtype_info(dtype)[2]


def snapshot(value: Any, _depth: int = 0) -> Any:
    """A copy of ``value`` that later mutation by the env cannot change.

    Arrays are copied, containers rebuilt, immutable scalars shared; other objects are
    deep-copied when possible.
    """
    if value is None or isinstance(value, (bool, int, float, str, bytes, complex, np.generic)):
        return value
    if _depth > MAX_NESTING:
        msg = f"value nests deeper than {MAX_NESTING} levels and cannot be recorded"
        raise ValueError(msg)
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, list):
        return [snapshot(v, _depth + 1) for v in value]
    if isinstance(value, tuple) and type(value) is tuple:
        return tuple(snapshot(v, _depth + 1) for v in value)
    if isinstance(value, Mapping):
        return {k: snapshot(v, _depth + 1) for k, v in value.items()}
    try:
        return copy.deepcopy(value)
    except Exception:  # an object that refuses copying is recorded as it is at flush time
        return value


def _encode_float(x: float) -> Any:
    if math.isfinite(x):
        return x
    return {"__type": "float", "value": "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")}


def encode_value(value: Any, blob: BlobBuilder, _depth: int = 0) -> Any:
    """Encode one value (FORMAT.md §6) into JSON-able form, arrays going into ``blob``."""
    if _depth > MAX_NESTING:
        msg = f"value nests deeper than {MAX_NESTING} levels"
        raise ValueError(msg)
    if value is None or type(value) in (bool, str):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, np.generic):
        dt = value.dtype
        if dt.name in ALLOWED_DTYPES:
            return {
                "__type": "scalar",
                "dtype": dt.name,
                "value": encode_value(value.item(), blob, _depth + 1),
            }
        return {"__type": "repr", "repr": repr(value)}
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return _encode_float(float(value))
    if isinstance(value, complex):
        return {
            "__type": "complex",
            "real": _encode_float(value.real),
            "imag": _encode_float(value.imag),
        }
    if isinstance(value, np.ndarray):
        if blob_dtype_ok(value.dtype):
            return blob.add(np.ascontiguousarray(value))
        if dtype_name(value.dtype) in ALLOWED_DTYPES:  # big-endian: store little-endian
            return blob.add(np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("<")))
        return {
            "__type": "jsonarray",
            "dtype": value.dtype.str,
            "shape": list(value.shape),
            "data": encode_value(value.tolist(), blob, _depth + 1),
        }
    if isinstance(value, list):
        return [encode_value(v, blob, _depth + 1) for v in value]
    if isinstance(value, tuple):
        return {"__type": "tuple", "items": [encode_value(v, blob, _depth + 1) for v in value]}
    if isinstance(value, Mapping):
        if all(type(k) is str for k in value) and "__type" not in value:
            return {k: encode_value(v, blob, _depth + 1) for k, v in value.items()}
        return {
            "__type": "mapping",
            "items": [
                [encode_value(k, blob, _depth + 1), encode_value(v, blob, _depth + 1)]
                for k, v in value.items()
            ],
        }
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"__type": "bytes", "base64": base64.b64encode(bytes(value)).decode("ascii")}
    return {"__type": "repr", "repr": repr(value)}


def slice_taken(value: Any, start: int, stop: int) -> Any:
    """Steps ``start:stop`` of a field to encode, keeping its kind (views, no copies)."""
    if isinstance(value, FieldDict):
        return FieldDict((k, slice_taken(v, start, stop)) for k, v in value.items())
    if isinstance(value, FieldTuple):
        return FieldTuple(slice_taken(v, start, stop) for v in value)
    if isinstance(value, PerStep):
        return PerStep(value[start:stop])
    return value[start:stop]


def encode_field(value: Any, blob: BlobBuilder) -> Any:
    """Encode a field (FORMAT.md §5): a stacked array, a FieldDict/FieldTuple or a PerStep list."""
    if type(value) is np.ndarray and blob_dtype_ok(value.dtype):  # the common case
        return blob.add(value)
    if isinstance(value, np.ndarray):
        return encode_value(value, blob)
    if isinstance(value, FieldDict):
        return {"__type": "dict", "fields": {k: encode_field(v, blob) for k, v in value.items()}}
    if isinstance(value, FieldTuple):
        return {"__type": "tuple", "fields": [encode_field(v, blob) for v in value]}
    if isinstance(value, list):
        return [encode_value(v, blob) for v in value]
    msg = f"cannot encode a field of type {type(value).__name__}"
    raise TypeError(msg)


@dataclass
class EpisodeRecord:
    """One episode object (or one part of a split episode) ready to be encoded."""

    observations: Any
    actions: Any
    rewards: np.ndarray
    terminated: bool = False
    truncated: bool = False
    seed: int | None = None
    options: Any = None
    infos: list[Any] | None = None
    started_at: float | None = None
    ended_at: float | None = None
    part: int = 0
    continues: bool = False
    steps: int = 0


def _plain_array(x: Any) -> bool:
    return type(x) is np.ndarray and blob_dtype_ok(x.dtype)


def _episode_json_fast(ep: EpisodeRecord, blob: BlobBuilder) -> str:
    """The episode object as JSON text, for the common case: plain array fields, no options.

    The same document :func:`_episode_obj` gives, built without intermediate dicts.
    """
    parts = [
        '{"actions":',
        blob.add_json(ep.actions),
        ',"observations":',
        blob.add_json(ep.observations),
        ',"rewards":',
        blob.add_json(
            ep.rewards if ep.rewards.dtype == np.float64 else ep.rewards.astype(np.float64)
        ),
        ',"terminated":',
        "true" if ep.terminated else "false",
        ',"truncated":',
        "true" if ep.truncated else "false",
        ',"seed":',
        "null" if ep.seed is None else str(int(ep.seed)),
        ',"options":null',
    ]
    for key, t in (("started_at", ep.started_at), ("ended_at", ep.ended_at)):
        if t is not None:
            parts.append(f',"{key}":{float(t)!r}')
    if ep.part:
        parts.append(f',"part":{int(ep.part)}')
    if ep.continues:
        parts.append(',"continues":true')
    parts.append("}")
    return "".join(parts)


def _episode_obj(ep: EpisodeRecord, blob: BlobBuilder) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "actions": encode_field(ep.actions, blob),
        "observations": encode_field(ep.observations, blob),
        "rewards": blob.add(
            ep.rewards if ep.rewards.dtype == np.float64 else ep.rewards.astype(np.float64)
        ),
        "terminated": bool(ep.terminated),
        "truncated": bool(ep.truncated),
        "seed": ep.seed,
        "options": encode_value(ep.options, blob),
    }
    if ep.infos is not None:
        obj["infos"] = [encode_value(i, blob) for i in ep.infos]
    if ep.started_at is not None:
        obj["started_at"] = ep.started_at
    if ep.ended_at is not None:
        obj["ended_at"] = ep.ended_at
    if ep.part:
        obj["part"] = ep.part
    if ep.continues:
        obj["continues"] = True
    return obj


def encode_batch(episodes: list[EpisodeRecord], bin_name: str) -> tuple[bytes, list[Any], int]:
    """Encode a batch: returns the batch JSON bytes, the blob's chunks and the blob's size.

    Per episode, the arrays are laid out actions, observations, rewards (the original's order).
    """
    blob = BlobBuilder(bin_name)
    out = []
    for ep in episodes:
        if (
            ep.options is None
            and ep.infos is None
            and _plain_array(ep.observations)
            and _plain_array(ep.actions)
            and ep.rewards.ndim == 1
        ):
            out.append(_episode_json_fast(ep, blob))
        else:
            out.append(dumps(_episode_obj(ep, blob)).decode())
    return ('{"episodes":[' + ",".join(out) + "]}").encode(), blob.chunks, blob.size


@dataclass(slots=True)
class EpisodeSpan:
    """An episode object (or a part) whose steps are rows of the batch's fields."""

    obs_start: int
    obs_stop: int
    act_start: int
    act_stop: int
    terminated: bool
    truncated: bool
    seed: int | None
    options: Any
    infos: list[Any] | None
    started_at: float | None
    ended_at: float | None
    part: int = 0
    continues: bool = False


def episode_records(
    obs: Any, act: Any, rewards: np.ndarray, spans: list[EpisodeSpan]
) -> list[EpisodeRecord]:
    """The episodes of a batch as :class:`EpisodeRecord` views, for :func:`encode_batch`."""
    return [
        EpisodeRecord(
            observations=slice_taken(obs, sp.obs_start, sp.obs_stop),
            actions=slice_taken(act, sp.act_start, sp.act_stop),
            rewards=rewards[sp.act_start : sp.act_stop],
            terminated=sp.terminated,
            truncated=sp.truncated,
            seed=sp.seed,
            options=sp.options,
            infos=sp.infos,
            started_at=sp.started_at,
            ended_at=sp.ended_at,
            part=sp.part,
            continues=sp.continues,
        )
        for sp in spans
    ]


def _json_float(t: float | None) -> str:
    return "" if t is None else repr(float(t))


def _columns_json_parts(
    bin_name: str, a_dtype: str, a_tail: str, o_dtype: str, o_tail: str
) -> tuple[str, ...]:
    """The 13 constant pieces of an episode object in :func:`encode_columns`' batch JSON.

    Between the first ten go the nine numbers of the three references (shape[0], npyoff and
    size of the actions, observations and rewards); then the two flags, the seed, and the
    optional keys (times, part, continues) and ``}``.
    """
    fn = json.dumps(bin_name)
    return (
        '{"actions":{"__type":"ndarray","shape":[',
        f'{a_tail}],"order":"C","dtype":"{a_dtype}","npyfile":{fn},"npyoff":',
        ',"size":',
        '},"observations":{"__type":"ndarray","shape":[',
        f'{o_tail}],"order":"C","dtype":"{o_dtype}","npyfile":{fn},"npyoff":',
        ',"size":',
        '},"rewards":{"__type":"ndarray","shape":[',
        f'],"order":"C","dtype":"float64","npyfile":{fn},"npyoff":',
        ',"size":',
        '},"terminated":',
        ',"truncated":',
        ',"seed":',
        ',"options":null',
    )


def encode_columns(
    obs: Any, act: Any, rewards: np.ndarray, spans: list[EpisodeSpan], bin_name: str
) -> tuple[bytes, list[Any], int] | None:
    """Encode a batch whose episodes are row ranges of three plain arrays, or ``None``.

    The common batch: Box/Discrete-like observations and actions (one array each, rows a
    multiple of 8 bytes), float64 rewards, no options or infos. The blob is then the three
    arrays as they are (actions, observations, rewards: three chunks, no copy), and each
    episode's references point at its rows, which are 8-byte aligned because the rows are.
    Anything else returns ``None``: the caller encodes episode by episode.
    """
    if not (_plain_array(obs) and _plain_array(act) and obs.ndim >= 1 and act.ndim >= 1):
        return None
    if rewards.dtype != np.float64 or rewards.ndim != 1:
        return None
    o_row = obs.itemsize * (obs.size // obs.shape[0] if obs.shape[0] else math.prod(obs.shape[1:]))
    a_row = act.itemsize * (act.size // act.shape[0] if act.shape[0] else math.prod(act.shape[1:]))
    if o_row % 8 or a_row % 8 or not (o_row and a_row):
        return None
    for sp in spans:
        if sp.options is not None or sp.infos is not None:
            return None
    try:
        chunks = [act.data.cast("B"), obs.data.cast("B"), rewards.data.cast("B")]
    except (TypeError, ValueError):  # not C-contiguous
        return None
    a_base, o_base = 0, act.nbytes
    r_base = o_base + obs.nbytes
    size = r_base + rewards.nbytes
    o_tail = "".join("," + str(d) for d in obs.shape[1:])
    a_tail = "".join("," + str(d) for d in act.shape[1:])
    parts = _columns_json_parts(
        bin_name, dtype_name(act.dtype), a_tail, dtype_name(obs.dtype), o_tail
    )
    if _speedups is not None:  # the per-episode loop in C: the same bytes
        encoded = tuple(p.encode() for p in parts)
        json_bytes = _speedups.encode_spans(spans, encoded, a_base, a_row, o_base, o_row, r_base)
        return json_bytes, chunks, size
    # One %-template per batch (the pieces escaped); per episode, one %-format of its values.
    esc = [p.replace("%", "%%") for p in parts]
    template = "%d".join(esc[:10]) + "%s" + esc[10] + "%s" + esc[11] + "%s" + esc[12]
    template += "%s%s%s%s}"
    out = []
    for sp in spans:
        n_act = sp.act_stop - sp.act_start
        n_obs = sp.obs_stop - sp.obs_start
        out.append(
            template
            % (
                n_act,
                a_base + sp.act_start * a_row,
                n_act * a_row,
                n_obs,
                o_base + sp.obs_start * o_row,
                n_obs * o_row,
                n_act,
                r_base + sp.act_start * 8,
                n_act * 8,
                "true" if sp.terminated else "false",
                "true" if sp.truncated else "false",
                "null" if sp.seed is None else int(sp.seed),
                "" if sp.started_at is None else ',"started_at":' + _json_float(sp.started_at),
                "" if sp.ended_at is None else ',"ended_at":' + _json_float(sp.ended_at),
                f',"part":{int(sp.part)}' if sp.part else "",
                ',"continues":true' if sp.continues else "",
            )
        )
    return ('{"episodes":[' + ",".join(out) + "]}").encode(), chunks, size


# --------------------------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------------------------


def _brief(x: Any) -> str:
    """Describe an untrusted value for a message: short, never deep, never a huge number."""
    if x is None or isinstance(x, (bool, float)):
        return repr(x)
    if isinstance(x, int):
        return repr(x) if -(10**30) < x < 10**30 else f"an integer of {x.bit_length()} bits"
    if isinstance(x, str):
        return repr(x[:60]) + ("..." if len(x) > 60 else "")
    if isinstance(x, list):
        if len(x) <= 8 and not any(isinstance(i, (list, dict)) for i in x):
            return "[" + ", ".join(_brief(i) for i in x) + "]"
        return f"a list of {len(x)} items"
    if isinstance(x, dict):
        return f"an object of {len(x)} keys"
    return type(x).__name__


def _refuse_constant(token: str) -> Any:
    msg = f"the token {token} is not strict JSON (version 2 files are strict, FORMAT.md §2)"
    raise ValueError(msg)


def parse_json(data: bytes, path: str, *, strict: bool = False) -> Any:
    """Parse a JSON file's bytes, turning every failure into a :class:`TraceFormatError`.

    JSON nested deeper than Python's recursion limit is refused (never a RecursionError);
    callers bound the size with the storage's ``max_size`` before reading. With ``strict``,
    the non-standard tokens ``NaN``/``Infinity`` are refused (version 2 files, §2).
    """
    # orjson turns integers beyond 64 bits into floats: a run of 19 digits goes to json, which
    # keeps every int exact. Whatever orjson refuses (NaN, lone surrogates, deep nesting...)
    # the json module judges too, and words the error.
    if strict and _orjson is not None and _LONG_DIGITS not in data.translate(_DIGITS_TO_ZERO):
        try:
            return _orjson.loads(data)
        except Exception:
            pass
    try:
        if strict:
            return json.loads(data, parse_constant=_refuse_constant)
        return json.loads(data)
    except RecursionError:
        msg = "JSON nests too deeply to be a trace file"
        raise TraceFormatError(msg, path) from None
    except MemoryError:
        msg = "JSON is too large to parse in memory"
        raise TraceFormatError(msg, path) from None
    except (ValueError, UnicodeDecodeError) as exc:
        msg = f"expected a JSON document, but it does not parse: {str(exc)[:200]}"
        raise TraceFormatError(msg, path) from None


def check_json_depth(obj: Any, path: str, limit: int = MAX_JSON_DEPTH) -> None:
    """Refuse parsed JSON whose lists and objects nest deeper than ``limit`` (no recursion).

    Raises:
        TraceFormatError: ``obj`` nests too deeply.
    """
    if type(obj) is not list and type(obj) is not dict:
        return
    stack: list[tuple[Any, int]] = [(obj, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        v, d = pop()
        if d > limit:
            msg = f"JSON nests deeper than {limit} levels"
            raise TraceFormatError(msg, path)
        for c in v.values() if type(v) is dict else v:
            if type(c) is list or type(c) is dict:
                push((c, d + 1))


def _is_int(x: Any) -> TypeGuard[int]:
    return type(x) is int


def _is_shape(x: Any) -> TypeGuard[list[int]]:
    """A list of at most MAX_NDIM ints, each within 0..2**63-1 (bools are not ints here)."""
    return (
        isinstance(x, list)
        and len(x) <= MAX_NDIM
        and all(_is_int(d) and 0 <= d <= _INTP_MAX for d in x)
    )


@dataclass(frozen=True)
class BatchEntry:
    """One entry of a manifest's ``batches`` list."""

    first: int
    len: int
    fn: str
    steps: int | None = None
    continues: bool = False
    bin: str | None = None
    bytes: int | None = None


@dataclass(frozen=True)
class Manifest:
    """A validated manifest."""

    name: str
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
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def sort_key(self) -> tuple[str, str, int, str]:
        """Readers order writers by creation, writer id, segment, then file name (§8)."""
        return (self.created or "", self.writer, self.segment, self.name)

    @property
    def legacy(self) -> bool:
        """Whether this is a version 1 (original gym-recording) manifest."""
        return self.version == "1"


def decode_manifest(obj: Any, name: str, path: str) -> Manifest:
    """Validate a parsed manifest (FORMAT.md §3)."""
    m = MANIFEST_RE.match(name)
    if m is None:
        msg = "expected a manifest named openaigym.trace.<writer-id>.manifest.json"
        raise TraceFormatError(msg, path)
    if not isinstance(obj, dict):
        msg = f"expected a JSON object at the top of a manifest, got {type(obj).__name__}"
        raise TraceFormatError(msg, path)
    check_json_depth(obj, path)
    version = obj.get("format_version", "1")
    if (
        not isinstance(version, str)
        or len(version) > 20
        or not re.fullmatch(r"\d+(\.\d+)*", version)
    ):
        msg = f"expected format_version to be a string like '2.0', got {_brief(version)}"
        raise TraceFormatError(msg, path)
    major = int(version.split(".")[0])
    if major > _KNOWN_MAJOR:
        msg = (
            f"format version {version} is newer than this reader knows ({FORMAT_VERSION}); "
            "upgrade gym-recording to read it"
        )
        raise TraceFormatError(msg, path)
    batches = obj.get("batches")
    if not isinstance(batches, list):
        msg = f"expected 'batches' to be a list, got {type(batches).__name__}"
        raise TraceFormatError(msg, path)
    entries = []
    expect_first = 0
    seen: set[str] = set()
    for i, b in enumerate(batches):
        if not isinstance(b, dict):
            msg = f"batches[{i}]: expected an object, got {type(b).__name__}"
            raise TraceFormatError(msg, path)
        first, n, fn = b.get("first"), b.get("len"), b.get("fn")
        if not (_is_int(first) and first >= 0 and _is_int(n) and n >= 0):
            msg = (
                f"batches[{i}]: expected non-negative integers first and len, "
                f"got {_brief(first)}, {_brief(n)}"
            )
            raise TraceFormatError(msg, path)
        if first != expect_first:
            msg = (
                f"batches[{i}]: expected first == {expect_first} "
                f"({'the first batch starts at 0' if i == 0 else 'previous first + len'}), "
                f"got {_brief(first)}"
            )
            raise TraceFormatError(msg, path)
        expect_first = first + n
        if not is_plain_name(fn):
            msg = (
                f"batches[{i}]: expected 'fn' to be a plain file name in the directory, "
                f"got {_brief(fn)}"
            )
            raise TraceFormatError(msg, path)
        if fn in seen:
            msg = f"batches[{i}]: batch file {fn!r} is listed twice"
            raise TraceFormatError(msg, path)
        seen.add(fn)
        bin_ = b.get("bin")
        if bin_ is not None and not is_plain_name(bin_):
            msg = (
                f"batches[{i}]: expected 'bin' to be a plain file name in the directory, "
                f"got {_brief(bin_)}"
            )
            raise TraceFormatError(msg, path)
        steps, nbytes, continues = b.get("steps"), b.get("bytes"), b.get("continues", False)
        for key, val in (("steps", steps), ("bytes", nbytes)):
            if val is not None and not (_is_int(val) and val >= 0):
                msg = f"batches[{i}]: expected {key!r} to be a non-negative int, got {_brief(val)}"
                raise TraceFormatError(msg, path)
        if not isinstance(continues, bool):
            msg = f"batches[{i}]: expected 'continues' to be true or false, got {_brief(continues)}"
            raise TraceFormatError(msg, path)
        entries.append(
            BatchEntry(
                first=first,
                len=n,
                fn=fn,
                steps=steps,
                continues=continues,
                bin=bin_,
                bytes=nbytes,
            )
        )
    metadata = obj.get("metadata")
    versions = obj.get("versions")
    created = obj.get("created")
    env_id = obj.get("env_id")
    writer = obj.get("writer")
    if not (
        isinstance(writer, str) and MANIFEST_RE.match(f"openaigym.trace.{writer}.manifest.json")
    ):
        writer = m.group(1)
    segment = obj.get("segment", 0)
    return Manifest(
        name=name,
        writer=writer,
        segment=segment if _is_int(segment) and segment >= 0 else 0,
        version=version,
        batches=tuple(entries),
        created=created if isinstance(created, str) else None,
        env_id=env_id if isinstance(env_id, str) else None,
        env_spec=obj.get("env_spec"),
        observation_space=obj.get("observation_space"),
        action_space=obj.get("action_space"),
        metadata=metadata if isinstance(metadata, dict) else {},
        versions=versions if isinstance(versions, dict) else {},
        record_infos=obj.get("record_infos") is True,
        raw=obj,
    )


def parse_manifest(data: bytes, name: str, path: str) -> Manifest:
    """Parse and validate a manifest file's bytes (FORMAT.md §2, §3, §9).

    Version 1 manifests may hold ``NaN``/``Infinity`` tokens; later versions are strict JSON.

    Raises:
        TraceFormatError: the manifest breaks the format; the message names the file.
    """
    m = decode_manifest(parse_json(data, path), name, path)
    if not m.legacy and (b"NaN" in data or b"Infinity" in data):
        parse_json(data, path, strict=True)  # refuses the tokens, not the words in strings
    return m


#: Each allowed dtype name's little-endian dtype and its itemsize, for the decoding fast path.
_LE_DTYPE_SIZES: dict[str, tuple[np.dtype[Any], int]] = {
    n: (dt, dt.itemsize) for n, dt in _LE_DTYPES.items()
}


class DecodeContext:
    """What decoding needs: the file being decoded and a way to get a blob's bytes.

    Args:
        path: The batch JSON's path, for messages.
        get_blob: Returns the bytes of a blob given its plain file name.
    """

    def __init__(self, path: str, get_blob: Callable[[str], memoryview]) -> None:
        self.path = path
        self._get_blob = get_blob
        self._blobs: dict[str, memoryview] = {}
        #: Array references validated so far (for ``gym-recording verify``'s counts).
        self.arrays = 0
        # Per episode object: the byte spans of its arrays in each blob (sorted, disjoint),
        # and the bytes allocated for arrays built from JSON.
        self.spans: dict[str, list[tuple[int, int]]] = {}
        self._decoded_bytes = 0
        # Per blob opened: its bytes, their length, and whether views of it must be made
        # read-only by hand (a writable buffer); for :meth:`_fast_array`.
        self._opened: dict[str, tuple[memoryview, int, bool]] = {}

    def begin_episode(self) -> None:
        """Start decoding a new episode object: forget its predecessor's spans and budget."""
        self.spans = {}
        self._decoded_bytes = 0

    def charge(self, nbytes: int, where: str) -> None:
        """Account for ``nbytes`` about to be allocated; refuse past :data:`MAX_DECODED_BYTES`."""
        self._decoded_bytes += nbytes
        if self._decoded_bytes > MAX_DECODED_BYTES:
            raise self.fail(
                where,
                f"the episode's JSON-encoded arrays need more than {MAX_DECODED_BYTES} bytes",
            )

    def _claim(self, fn: str, off: int, nbytes: int, where: str) -> None:
        """Record the span of an array; refuse one that shares bytes with another array."""
        spans = self.spans.setdefault(fn, [])
        end = off + nbytes
        if not spans or off >= spans[-1][1]:  # arrays come in file order: the common case
            spans.append((off, end))
            return
        i = bisect.bisect_left(spans, (off, end))
        if (i > 0 and spans[i - 1][1] > off) or (i < len(spans) and spans[i][0] < end):
            raise self.fail(
                where,
                f"array bytes {off}..{end} of {fn} overlap another array of the same episode",
            )
        spans.insert(i, (off, end))

    def fail(self, where: str, problem: str) -> TraceFormatError:
        """An error naming this file, the place in it and the problem."""
        return TraceFormatError(f"{where}: {problem}", self.path)

    def blob(self, name: str) -> memoryview:
        """The bytes of blob ``name`` (cached)."""
        b = self._blobs.get(name)
        if b is None:
            b = self._blobs[name] = self._get_blob(name)
            self._opened[name] = (b, len(b), not memoryview(b).readonly)
        return b

    def _open_plain(self, fn: str) -> tuple[memoryview, int, bool] | None:
        """Blob ``fn`` opened for the batch path: its bytes, their length, whether writable.

        ``None`` if ``fn`` is not a plain name or the blob cannot be opened (the general path
        then reports why).
        """
        opened = self._opened.get(fn)
        if opened is None:
            if not is_plain_name(fn):
                return None
            try:
                self.blob(fn)
            except TraceFormatError:
                return None
            opened = self._opened[fn]
        return opened

    def _fast_array(
        self,
        ref: Any,
        *,
        _frombuffer: Callable[..., np.ndarray] = np.frombuffer,
        _dtypes: dict[str, tuple[np.dtype[Any], int]] = _LE_DTYPE_SIZES,
    ) -> np.ndarray | None:
        """The view of a well-formed ndarray reference, or ``None`` for the general path.

        Takes only the common case: an object ``{"__type": "ndarray"}`` of exact ints and
        lists, a C-order array of 1 to :data:`MAX_NDIM` dimensions and no zero dimension, of an
        allowed dtype, in a blob already opened (so its name was checked), whose size is
        exactly ``prod(shape) * itemsize``, within the blob, sharing no byte with the arrays
        claimed so far in the episode. For anything else (any value at all) it returns
        ``None`` without changing any state, and :meth:`array` or :func:`decode_field` then
        checks the value in full and gives the precise message: nothing is accepted here that
        the general path would refuse. (The keyword arguments only bind globals as locals.)
        """
        try:
            if ref["__type"] != "ndarray" or ref["order"] != "C":  # (no order: general path)
                return None
            shape, off, size = ref["shape"], ref["npyoff"], ref["size"]
            # Only str keys are in these tables: any other value raises KeyError or TypeError.
            dt, itemsize = _dtypes[ref["dtype"]]
            fn = ref["npyfile"]
            blob, blob_len, writable = self._opened[fn]
        except (KeyError, TypeError):
            return None
        if (
            type(shape) is not list
            or type(off) is not int
            or type(size) is not int
            or off < 0
            or not 0 < len(shape) <= MAX_NDIM
        ):
            return None
        count = 1
        for d in shape:
            if type(d) is not int or d <= 0:
                return None
            count *= d
        nbytes = count * itemsize
        end = off + nbytes
        if nbytes != size or end > blob_len:
            return None
        spans = self.spans.get(fn)
        if spans is None:
            self.spans[fn] = [(off, end)]
        elif off >= spans[-1][1]:  # after every array claimed so far
            spans.append((off, end))
        else:  # as :meth:`_claim`, but an overlap goes to the general path for its message
            i = bisect.bisect_left(spans, (off, end))
            if (i > 0 and spans[i - 1][1] > off) or (i < len(spans) and spans[i][0] < end):
                return None
            spans.insert(i, (off, end))
        self.arrays += 1
        arr = _frombuffer(blob, dt, count, off)  # (positional arguments: parsed faster)
        if len(shape) > 1:
            arr = arr.reshape(shape)
        if writable:  # keep the promise of read-only views
            arr.flags.writeable = False
        return arr

    def array(self, ref: dict[str, Any], where: str) -> np.ndarray:
        """Validate an ndarray reference and return a read-only view of its bytes.

        The name, dtype, shape, size and offset are all checked before the blob is opened,
        and the offset and size against the blob's length before any byte is read
        (FORMAT.md §6.1, §8). Within one episode object no two arrays may share bytes.
        """
        arr = self._fast_array(ref)
        if arr is not None:
            return arr
        shape, dtype, off, size, fn = (
            ref.get("shape"),
            ref.get("dtype"),
            ref.get("npyoff"),
            ref.get("size"),
            ref.get("npyfile"),
        )
        if not _is_shape(shape):
            raise self.fail(
                where,
                f"expected shape to be a list of at most {MAX_NDIM} non-negative ints, "
                f"got {_brief(shape)}",
            )
        if not isinstance(dtype, str) or dtype not in ALLOWED_DTYPES:
            raise self.fail(
                where, f"expected dtype to be one of {sorted(ALLOWED_DTYPES)}, got {_brief(dtype)}"
            )
        order = ref.get("order", "C")
        if order != "C":
            raise self.fail(where, f"expected order 'C', got {_brief(order)}")
        # A blob opened is a checked name (and only a str may be looked up: a list is unhashable).
        if not (type(fn) is str and fn in self._blobs) and not is_plain_name(fn):
            raise self.fail(where, f"expected npyfile to be a plain file name, got {_brief(fn)}")
        if not (_is_int(off) and off >= 0):
            raise self.fail(where, f"expected npyoff to be a non-negative int, got {_brief(off)}")
        if not (_is_int(size) and size >= 0):
            raise self.fail(where, f"expected size to be a non-negative int, got {_brief(size)}")
        dt = _LE_DTYPES[dtype]
        # The byte size, computed without ever forming a product beyond 2**63.
        nonzero = 1
        for d in shape:
            if d:
                nonzero *= d
                if nonzero * dt.itemsize > _INTP_MAX:
                    raise self.fail(
                        where, f"shape {_brief(shape)} of {dtype} overflows: more than 2**63 bytes"
                    )
        count = 0 if 0 in shape else nonzero
        nbytes = count * dt.itemsize
        if size != nbytes:
            raise self.fail(
                where,
                f"size {size} does not equal prod(shape {_brief(shape)}) * itemsize "
                f"{dt.itemsize} = {nbytes}",
            )
        blob = self.blob(fn)
        if off > len(blob) or off + nbytes > len(blob):
            raise self.fail(
                where,
                f"array bytes {_brief(off)}..+{nbytes} run past the end of {fn} "
                f"({len(blob)} bytes)",
            )
        self.arrays += 1
        if count == 0:
            try:
                arr = np.empty(shape, dtype=dt)
            except (ValueError, OverflowError, MemoryError):
                raise self.fail(
                    where, f"cannot make an empty array of shape {_brief(shape)}"
                ) from None
            arr.flags.writeable = False
            return arr
        self._claim(fn, off, nbytes, where)
        arr = np.frombuffer(blob, dtype=dt, count=count, offset=off).reshape(shape)
        if arr.flags.writeable:  # a bytes-backed blob; keep the promise of read-only views
            arr.flags.writeable = False
        return arr


def decode_value(v: Any, ctx: DecodeContext, where: str, _depth: int = 0) -> Any:
    """Decode one value (FORMAT.md §6)."""
    if _depth > MAX_NESTING:
        raise ctx.fail(where, f"values nest deeper than {MAX_NESTING} levels")
    if isinstance(v, list):
        return [decode_value(x, ctx, where, _depth + 1) for x in v]
    if not isinstance(v, dict):
        return v
    t = v.get("__type")
    if t is None:
        return {k: decode_value(x, ctx, where, _depth + 1) for k, x in v.items()}
    if t == "ndarray":
        return ctx.array(v, where)
    if t == "float":
        val = v.get("value")
        if val not in ("nan", "inf", "-inf"):
            raise ctx.fail(
                where, f"expected a non-finite float 'nan', 'inf' or '-inf', got {_brief(val)}"
            )
        return float(val)
    if t == "scalar":
        dt = v.get("dtype")
        if not isinstance(dt, str) or dt not in ALLOWED_DTYPES:
            raise ctx.fail(where, f"expected a scalar dtype from the allow-list, got {_brief(dt)}")
        inner = decode_value(v.get("value"), ctx, where, _depth + 1)
        if not isinstance(inner, (bool, int, float, complex)):
            raise ctx.fail(where, f"expected a number for a {dt} scalar, got {_brief(inner)}")
        try:
            return np.dtype(dt).type(inner)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ctx.fail(where, f"scalar {_brief(inner)} is not a valid {dt}: {exc}") from None
    if t == "complex":
        re_ = decode_value(v.get("real"), ctx, where, _depth + 1)
        im = decode_value(v.get("imag"), ctx, where, _depth + 1)
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (re_, im)):
            raise ctx.fail(where, "expected numbers for a complex value's real and imag")
        try:
            return complex(re_, im)
        except OverflowError:
            raise ctx.fail(where, "a complex value's real or imag is out of range") from None
    if t == "tuple":
        items = v.get("items")
        if not isinstance(items, list):
            raise ctx.fail(where, f"expected a tuple's items to be a list, got {_brief(items)}")
        return tuple(decode_value(x, ctx, where, _depth + 1) for x in items)
    if t == "mapping":
        items = v.get("items")
        if not isinstance(items, list) or not all(
            isinstance(p, list) and len(p) == 2 for p in items
        ):
            raise ctx.fail(where, "expected a mapping's items to be a list of [key, value] pairs")
        out = {}
        for k, x in items:
            key = decode_value(k, ctx, where, _depth + 1)
            if isinstance(key, list):
                key = tuple(key)
            try:
                out[key] = decode_value(x, ctx, where, _depth + 1)
            except TypeError:
                raise ctx.fail(where, f"mapping key {_brief(key)} is not hashable") from None
        return out
    if t == "bytes":
        data = v.get("base64")
        try:
            return base64.b64decode(data, validate=True) if isinstance(data, str) else None
        except ValueError:
            raise ctx.fail(where, "expected base64 data for bytes") from None
    if t == "jsonarray":
        return _decode_jsonarray(v, ctx, where, _depth)
    if t == "repr":
        r = v.get("repr")
        if not isinstance(r, str):
            raise ctx.fail(where, "expected a string in a repr value")
        return r
    raise ctx.fail(where, f"unknown value type {_brief(t)}")


def _decode_jsonarray(v: dict[str, Any], ctx: DecodeContext, where: str, depth: int) -> Any:
    """Decode ``{"__type": "jsonarray"}``: an array of a dtype that has no blob form.

    The dtype must be a plain numeric, string, bytes, date or object dtype (no structured or
    void dtypes); the nested lists must match the shape exactly; the array's byte size is
    charged to the episode's budget before it is allocated. An object array holds decoded
    values (§6) only, placed element by element: nothing but JSON data reaches it.
    """
    dt, shape = v.get("dtype"), v.get("shape")
    if not isinstance(dt, str) or len(dt) > 32:
        raise ctx.fail(where, f"expected a jsonarray dtype string, got {_brief(dt)}")
    if not _is_shape(shape):
        raise ctx.fail(
            where,
            f"expected a jsonarray shape of at most {MAX_NDIM} non-negative ints, "
            f"got {_brief(shape)}",
        )
    try:
        npdt = np.dtype(dt)
    except Exception:  # numpy's dtype parser raises TypeError, ValueError, ...
        raise ctx.fail(where, f"jsonarray dtype {_brief(dt)} is not a numpy dtype") from None
    if npdt.kind not in _JSONARRAY_KINDS or npdt.fields is not None or npdt.subdtype is not None:
        raise ctx.fail(where, f"jsonarray dtype {_brief(dt)} is not allowed")
    # Walk the nested lists along the shape: exact lengths, no guessing by numpy.
    level = [v.get("data")]
    for n in shape:
        nxt: list[Any] = []
        for item in level:
            if not isinstance(item, list) or len(item) != n:
                raise ctx.fail(
                    where, f"jsonarray data does not have the shape {_brief(shape)} it declares"
                )
            nxt.extend(item)
        level = nxt
    ctx.charge(len(level) * max(npdt.itemsize, 8), where)
    values = [decode_value(x, ctx, where, depth + 1) for x in level]
    try:
        if npdt.kind == "O":
            arr = np.empty(len(values), dtype=object)
            for i, x in enumerate(values):
                arr[i] = x
        else:
            if any(isinstance(x, (list, dict, tuple, np.ndarray)) for x in values):
                raise ValueError("expected a scalar for every element")
            arr = np.array(values, dtype=npdt)
        return arr.reshape(shape)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ctx.fail(where, f"bad jsonarray of {_brief(dt)}: {str(exc)[:120]}") from None


def _stack_if_uniform(values: list[Any]) -> Any:
    """Stack a list of same-shape, same-dtype arrays into one array (version 1 image lists)."""
    if values and all(isinstance(x, np.ndarray) for x in values):
        first = values[0]
        if all(x.dtype == first.dtype and x.shape == first.shape for x in values):
            out = np.stack(values)
            out.flags.writeable = False
            return out
    return values


def decode_field(v: Any, ctx: DecodeContext, where: str, _depth: int = 0) -> Any:
    """Decode a field (FORMAT.md §5) into arrays (steps first), dicts/tuples of them, or a list."""
    if _depth > MAX_NESTING:
        raise ctx.fail(where, f"fields nest deeper than {MAX_NESTING} levels")
    if isinstance(v, list):
        return _stack_if_uniform([decode_value(x, ctx, where, _depth + 1) for x in v])
    if isinstance(v, dict):
        t = v.get("__type")
        if t == "ndarray":
            arr = ctx.array(v, where)
            if arr.ndim == 0:
                raise ctx.fail(where, "expected a field array with a step axis, got a 0-d array")
            return arr
        if t == "dict":
            fields = v.get("fields")
            if not isinstance(fields, dict):
                raise ctx.fail(where, "expected a dict field's 'fields' to be an object")
            return {k: decode_field(x, ctx, f"{where}.{k}", _depth + 1) for k, x in fields.items()}
        if t == "tuple":
            fields = v.get("fields")
            if not isinstance(fields, list):
                raise ctx.fail(where, "expected a tuple field's 'fields' to be a list")
            return tuple(
                decode_field(x, ctx, f"{where}[{i}]", _depth + 1) for i, x in enumerate(fields)
            )
    raise ctx.fail(
        where,
        f"expected an ndarray reference, a dict/tuple field or a list, got {type(v).__name__}",
    )


def field_length(f: Any) -> int | None:
    """The number of steps in a decoded field, or ``None`` if its parts disagree."""
    if isinstance(f, np.ndarray):
        return int(f.shape[0])
    if isinstance(f, list):
        return len(f)
    children = list(f.values()) if isinstance(f, dict) else list(f)
    lengths = {field_length(c) for c in children}
    if len(lengths) != 1:
        return None if lengths else 0
    return lengths.pop()


def _empty_quirk(a: Any) -> Any:
    """Version 1 stored a zero-step episode's actions/rewards as float64 ``[1, 0]``."""
    if isinstance(a, np.ndarray) and a.shape == (1, 0):
        return a.reshape(0)
    return a


def _unix_time(t: Any, key: str, ctx: DecodeContext, where: str) -> float | None:
    """An episode's ``started_at``/``ended_at`` as a float, or ``None`` if not a number."""
    try:
        return float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else None
    except OverflowError:
        raise ctx.fail(where, f"expected {key!r} to be a unix time, got {_brief(t)}") from None


def decode_episode(obj: Any, ctx: DecodeContext, where: str) -> dict[str, Any]:
    """Decode and check one episode object; returns a dict of its decoded keys.

    Plain ndarray references take :meth:`DecodeContext._fast_array`; anything it declines,
    and every value that is not plain, takes the general path, which gives the messages.
    """
    if not isinstance(obj, dict):
        raise ctx.fail(where, f"expected an episode object, got {type(obj).__name__}")
    ctx.begin_episode()
    if not ("observations" in obj and "actions" in obj and "rewards" in obj):
        for key in ("observations", "actions", "rewards"):
            if key not in obj:
                raise ctx.fail(where, f"expected key {key!r} in the episode object")
    fast = ctx._fast_array
    obs = fast(obj["observations"])
    if obs is None:
        obs = decode_field(obj["observations"], ctx, f"{where}.observations")
    acts = fast(obj["actions"])
    if acts is None:  # (a fast array has no zero dimension: no quirk to undo)
        acts = _empty_quirk(decode_field(obj["actions"], ctx, f"{where}.actions"))
    rew = fast(obj["rewards"])
    if rew is None:
        rew = _empty_quirk(decode_field(obj["rewards"], ctx, f"{where}.rewards"))
        if isinstance(rew, list):
            try:
                rew = np.asarray(rew, dtype=np.float64)
            except (TypeError, ValueError, OverflowError):
                raise ctx.fail(where, "expected rewards to be numbers") from None
        if not isinstance(rew, np.ndarray):
            raise ctx.fail(where, "expected rewards to be a 1-D numeric array")
    if rew.ndim != 1 or rew.dtype.kind not in "biuf":
        raise ctx.fail(where, "expected rewards to be a 1-D numeric array")
    n = len(rew)
    n_obs = len(obs) if type(obs) is np.ndarray else field_length(obs)  # (never 0-d)
    n_act = len(acts) if type(acts) is np.ndarray else field_length(acts)
    if n_act != n or n_obs != n + 1:
        raise ctx.fail(
            where,
            f"expected N+1 observations and N actions for N={n} rewards, "
            f"got {n_obs} observations and {n_act} actions",
        )
    get = obj.get
    terminated, truncated, continues = (
        get("terminated", False),
        get("truncated", False),
        get("continues", False),
    )
    if not (type(terminated) is bool and type(truncated) is bool and type(continues) is bool):
        for key, val in (
            ("terminated", terminated),
            ("truncated", truncated),
            ("continues", continues),
        ):
            if not isinstance(val, bool):
                raise ctx.fail(where, f"expected {key!r} to be true or false, got {_brief(val)}")
    part = get("part", 0)
    if not (_is_int(part) and part >= 0):
        raise ctx.fail(where, f"expected 'part' to be a non-negative int, got {_brief(part)}")
    seed = get("seed")
    if seed is not None and not _is_int(seed):
        raise ctx.fail(where, f"expected 'seed' to be an int or null, got {_brief(seed)}")
    options = get("options")
    if isinstance(options, (list, dict)):
        options = decode_value(options, ctx, f"{where}.options")
    infos = get("infos")
    if infos is not None:
        if not isinstance(infos, list) or len(infos) != n + 1:
            raise ctx.fail(where, f"expected 'infos' to be a list of N+1 = {n + 1} values")
        infos = [decode_value(i, ctx, f"{where}.infos") for i in infos]
    started_at, ended_at = get("started_at"), get("ended_at")
    if type(started_at) is not float:
        started_at = _unix_time(started_at, "started_at", ctx, where)
    if type(ended_at) is not float:
        ended_at = _unix_time(ended_at, "ended_at", ctx, where)
    return _decoded_episode(
        obs,
        acts,
        rew,
        terminated,
        truncated,
        continues,
        part,
        seed,
        options,
        infos,
        started_at,
        ended_at,
    )


def _decoded_episode(
    obs: Any,
    acts: Any,
    rew: Any,
    terminated: bool,
    truncated: bool,
    continues: bool,
    part: int,
    seed: Any,
    options: Any,
    infos: Any,
    started_at: Any,
    ended_at: Any,
) -> dict[str, Any]:
    """The dict :func:`decode_episode` returns (and :func:`plain_decoded` for the batch path)."""
    return {
        "observations": obs,
        "actions": acts,
        "rewards": rew,
        "terminated": terminated,
        "truncated": truncated,
        "continues": continues,
        "part": part,
        "seed": seed,
        "options": options,
        "infos": infos,
        "started_at": started_at,
        "ended_at": ended_at,
    }


# ---------------------------------------------------------------- batch-level decoding

#: The keys of an episode object that the batch path looks up all at once (all required).
_get_plain_keys = operator.itemgetter(
    "observations", "actions", "rewards", "terminated", "truncated", "seed", "options"
)
_get_plain_keys_and_times = operator.itemgetter(
    "observations",
    "actions",
    "rewards",
    "terminated",
    "truncated",
    "seed",
    "options",
    "started_at",
    "ended_at",
)
_get_ref = operator.itemgetter("__type", "order", "dtype", "npyfile", "npyoff", "size", "shape")
_get_first = operator.itemgetter(0)
_NONE_TYPE = type(None)
#: A float this large may be an integer literal beyond 64 bits that orjson parsed inexactly.
_FLOAT_EXACT_BELOW = 2.0**63

#: What :func:`decode_episode` gives for a plain episode object: its observations, actions,
#: rewards, terminated, truncated, seed, options, started_at and ended_at.
PlainEpisode = tuple[np.ndarray, np.ndarray, np.ndarray, bool, bool, Any, Any, Any, Any]


@dataclass
class _Column:
    """One key's arrays over a batch (see :func:`_batch_column`)."""

    views: list[np.ndarray]
    ok: np.ndarray | None  # per episode object, whether its view is right (None: all are)
    start: list[int] | np.ndarray  # byte ranges in the blob
    end: list[int] | np.ndarray
    rows: list[int]  # first dimensions
    fn: str
    dtype: np.dtype[Any]
    ndim: int


def _batch_column(refs: tuple[Any, ...], ctx: DecodeContext) -> _Column | None:
    """Check one key's ndarray references over a batch at once; views of the good ones.

    Takes what :meth:`DecodeContext._fast_array` takes, and empty arrays of such references,
    with the checks shared by the batch done once: every reference an object ``{"__type":
    "ndarray", "order": "C"}`` of one allowed dtype and one blob, with the same positive
    dimensions after the first, and exact ints. Per reference: a first dimension of 0 or
    more, ``size`` equal to ``prod(shape) * itemsize``, the bytes within the blob, at an
    offset congruent to the others' modulo a row's bytes, so that one view of the blob,
    sliced, gives every array (an empty one for no rows: as read-only, and as empty, as the
    general path's). ``None`` when the batch does not fit as a whole. Never raises, whatever
    the JSON holds, and opens only a blob with a plain name (its errors are left to the
    general path, which reports them).
    """
    n = len(refs)
    try:
        flat = list(itertools.chain.from_iterable(map(_get_ref, refs)))
    except (KeyError, TypeError):  # not objects, or keys missing
        return None
    kind, order, dtypes, fns, offs, sizes, shapes = (flat[i::7] for i in range(7))
    dtype, fn = dtypes[0], fns[0]
    if (
        kind.count("ndarray") != n
        or order.count("C") != n
        or type(dtype) is not str
        or dtype not in _LE_DTYPE_SIZES
        or dtypes.count(dtype) != n
        or type(fn) is not str
        or fns.count(fn) != n
        or list(map(type, shapes)).count(list) != n
    ):
        return None
    ndims = list(map(len, shapes))
    ndim = ndims[0]
    if not 0 < ndim <= MAX_NDIM or ndims.count(ndim) != n:
        return None
    rows = list(map(_get_first, shapes))
    ints = offs + sizes + rows
    tail: list[int] = []
    for k in range(1, ndim):
        dims = list(map(operator.itemgetter(k), shapes))
        d = dims[0]
        if type(d) is not int or d <= 0 or dims.count(d) != n:
            return None
        tail.append(d)
        ints += dims
    if list(map(type, ints)).count(int) != len(ints):
        return None
    opened = ctx._open_plain(fn)
    if opened is None:
        return None
    blob, blob_len, writable = opened
    dt, itemsize = _LE_DTYPE_SIZES[dtype]
    row_items = math.prod(tail)
    row_bytes = row_items * itemsize
    if row_bytes > blob_len:
        return None
    p0 = offs[0] % row_bytes
    col = np.frombuffer(blob, dt, (blob_len - p0) // row_bytes * row_items, p0)
    if writable:  # keep the promise of read-only views (views of it inherit it)
        col.flags.writeable = False
    if tail:
        col = col.reshape(-1, *tail)
    # The writer's layout: consecutive arrays of whole rows (none for a zero-step episode).
    ends = list(map(operator.add, offs, sizes))
    if (
        offs[0] >= p0
        and ends[-1] <= blob_len
        and min(rows) >= 0
        and offs[1:] == ends[:-1]
        and sizes == list(map(row_bytes.__mul__, rows))
    ):
        s0 = (offs[0] - p0) // row_bytes
        r0 = rows[0]
        if rows.count(r0) == n:  # of equal lengths: one array, split along its first axis
            views = list(col[s0 : s0 + n * r0].reshape(n, r0, *tail))
        else:
            stops = itertools.accumulate(rows, initial=s0)
            views = [col[a:b] for a, b in itertools.pairwise(stops)]
        if not min(rows):
            views = _own_empties(views, dt, tail)
        return _Column(views, None, offs, ends, rows, fn, dt, ndim)
    # Any other layout: every reference checked on its own (vectorised).
    try:
        off, size, first = np.array((offs, sizes, rows), dtype=np.int64)
    except OverflowError:
        return None
    # (int64 arithmetic wraps silently: each test guards the ones that follow it.)
    ok = (first >= 0) & (first <= blob_len // row_bytes)
    ok &= size == first * row_bytes
    ok &= (off >= 0) & (off <= blob_len - size)
    ok &= off % row_bytes == p0
    start_row = (off - p0) // row_bytes
    stop_row = start_row + first
    views = [col[a:b] for a, b in zip(start_row.tolist(), stop_row.tolist(), strict=True)]
    if min(rows) <= 0:
        views = _own_empties(views, dt, tail)
    return _Column(views, ok, off, off + size, rows, fn, dt, ndim)


def _own_empties(views: list[np.ndarray], dt: np.dtype[Any], tail: list[int]) -> list[np.ndarray]:
    """``views`` with each empty one made as the general path makes it (its own, read-only)."""
    out = []
    for v in views:
        if not len(v):
            v = np.empty((0, *tail), dtype=dt)
            v.flags.writeable = False
        out.append(v)
    return out


@dataclass
class PlainBatch:
    """What :func:`decode_batch_plain` decoded of a batch."""

    #: Per episode object, its :data:`PlainEpisode`, or ``None`` for the general path.
    episodes: list[PlainEpisode | None]
    #: Every object is plain (none is ``None``).
    complete: bool
    #: The steps of the batch (its rewards), when complete.
    steps: int | None


def decode_batch_plain(
    objs: list[Any], ctx: DecodeContext, last_continues: bool
) -> PlainBatch | None:
    """Decode a batch's plain episode objects all at once: the reader's fast path.

    With the C extension, a batch laid out as the writer lays it out, every object plain, is
    decoded in C (``_speedups.decode_plain``, to exactly what :func:`decode_batch_plain_py`
    gives); every other batch, and every batch without the extension, by
    :func:`decode_batch_plain_py`, which says what is plain. Never raises because of what the
    JSON holds.

    Args:
        objs: The batch's episode objects (from :func:`decode_batch_episodes`).
        ctx: The batch's decoding context.
        last_continues: The manifest lists the batch as continuing (its last object goes to
            the general path).

    Returns:
        The episodes decoded, or ``None`` when the batch does not fit at all.
    """
    if _decode_plain_c is not None:
        got = _decode_plain_c(objs, _LE_DTYPE_SIZES, ctx._opened, ctx._open_plain, last_continues)
        if got is not None:
            return PlainBatch(got[0], True, got[1])
    return decode_batch_plain_py(objs, ctx, last_continues)


def decode_batch_plain_py(
    objs: list[Any], ctx: DecodeContext, last_continues: bool
) -> PlainBatch | None:
    """Decode a batch's plain episode objects all at once: the reader's fast path, in Python.

    A plain episode object holds ndarray references for observations, actions and rewards
    (per key one dtype, one blob and the same dimensions after the step axis throughout the
    batch), bools ``terminated`` and ``truncated``, an int or null ``seed``, null ``options``,
    float ``started_at``/``ended_at`` or neither, and no other key (no ``part``,
    ``continues`` or ``infos``). For each, the result holds exactly what
    :func:`decode_episode` returns, checked the same way (one batch's checks shared); ``None``
    marks the objects left to the general path: those not plain, and those it must judge (a
    zero dimension, overlapping arrays, a bad offset...), which it refuses with its message.
    The whole result is ``None`` when the batch does not fit at all. Never raises.

    Every number accepted is an exact int, a bool, or a float below 2**63 in magnitude: the
    result is the same from a parse that reads integers beyond 64 bits as floats (orjson).

    Args:
        objs: The batch's episode objects (from :func:`decode_batch_episodes`).
        ctx: The batch's decoding context.
        last_continues: The manifest lists the batch as continuing: its last object goes to
            the general path (which joins it to the next part, or refuses it).

    Returns:
        The episodes decoded, or ``None``.
    """
    n = len(objs)
    if not n:
        return None
    started: Sequence[Any]
    ended: Sequence[Any]
    keys: list[int] | None = None  # per object, the keys read (None: all nine)
    try:  # the common case: both times present in every object (values checked below)
        obs_refs, act_refs, rew_refs, terms, truncs, seeds, options, started, ended = zip(
            *map(_get_plain_keys_and_times, objs), strict=True
        )
    except (KeyError, TypeError):
        try:
            obs_refs, act_refs, rew_refs, terms, truncs, seeds, options = zip(
                *map(_get_plain_keys, objs), strict=True
            )
        except (KeyError, TypeError):
            return None
        started = [o.get("started_at") for o in objs]
        ended = [o.get("ended_at") for o in objs]
        keys = [7 + ("started_at" in o) + ("ended_at" in o) for o in objs]
    # No key but those read here: the times present are counted, absent ones are null.
    lens = list(map(len, objs))
    keys_ok = lens.count(9) if keys is None else list(map(operator.eq, lens, keys)).count(True)
    if not keys_ok:  # (no object plain: a batch of an episode's parts, say)
        return None
    flags = list(map(type, terms + truncs))
    seed_types = list(map(type, seeds))
    times = [*started, *ended]
    time_types = list(map(type, times))
    if (
        flags.count(bool) != 2 * n
        or seed_types.count(int) + seed_types.count(_NONE_TYPE) != n
        or time_types.count(float) + time_types.count(_NONE_TYPE) != 2 * n
    ):
        return None
    if time_types.count(_NONE_TYPE):
        times = [t for t in times if t is not None]
    if times and (max(times) >= _FLOAT_EXACT_BELOW or min(times) <= -_FLOAT_EXACT_BELOW):
        return None
    rew = _batch_column(rew_refs, ctx)
    if rew is None or rew.ndim != 1 or rew.dtype.kind not in "biuf":
        return None
    act = _batch_column(act_refs, ctx)
    if act is None:
        return None
    obs = _batch_column(obs_refs, ctx)
    if obs is None:
        return None
    lengths_ok = act.rows == rew.rows and obs.rows == list(map((1).__add__, rew.rows))
    columns = (obs, act, rew)
    # No two arrays of an episode share a byte: each column's range is one run of bytes when
    # it is consecutive; then no run meets another, or check each (an empty array inside
    # another counts as meeting it: the general path judges).
    disjoint = all(c.ok is None for c in columns) and all(
        x.fn != y.fn or x.start[0] >= y.end[-1] or y.start[0] >= x.end[-1]
        for x, y in ((obs, act), (obs, rew), (act, rew))
    )
    columns_of_plain: tuple[Any, ...] = (obs.views, act.views, rew.views, terms, truncs, seeds)
    columns_of_plain += (options, started, ended)
    if lengths_ok and disjoint and keys_ok == n and options.count(None) == n and not last_continues:
        return PlainBatch(list(zip(*columns_of_plain, strict=True)), True, sum(rew.rows))
    # Some object is not plain: find which, episode by episode (vectorised).
    ok = np.ones(n, dtype=bool)
    for c in columns:
        if c.ok is not None:
            ok &= c.ok
    rows = [np.array(c.rows, dtype=np.int64) for c in columns]  # (checked ints)
    ok &= (rows[1] == rows[2]) & (rows[0] == rows[2] + 1)
    for x, y in ((obs, act), (obs, rew), (act, rew)):
        if x.fn == y.fn:
            x0, x1 = np.asarray(x.start, np.int64), np.asarray(x.end, np.int64)
            y0, y1 = np.asarray(y.start, np.int64), np.asarray(y.end, np.int64)
            ok &= (x0 >= y1) | (y0 >= x1)
    if keys is None:
        keys = [9] * n
    ok &= np.array(keys) == np.array(lens)
    ok &= np.fromiter(map(_NONE_TYPE.__instancecheck__, options), bool, n)
    if last_continues:
        ok[-1] = False
    out = zip(*columns_of_plain, strict=True)
    if ok.all():  # (each object checked on its own, and every one plain)
        return PlainBatch(list(out), True, sum(rew.rows))
    episodes = [e if good else None for e, good in zip(out, ok.tolist(), strict=True)]
    return PlainBatch(episodes, False, None)


def plain_decoded(episode: PlainEpisode) -> dict[str, Any]:
    """What :func:`decode_episode` returns for the plain episode object decoded as ``episode``."""
    obs, acts, rew, terminated, truncated, seed, options, started_at, ended_at = episode
    return _decoded_episode(
        obs, acts, rew, terminated, truncated, False, 0, seed, options, None, started_at, ended_at
    )


def decode_batch_episodes(obj: Any, entry: BatchEntry, path: str) -> list[Any]:
    """Check a parsed batch's top level against its manifest entry; return the episode objects."""
    if not isinstance(obj, dict) or not isinstance(obj.get("episodes"), list):
        msg = "expected a batch object with an 'episodes' list"
        raise TraceFormatError(msg, path)
    eps: list[Any] = obj["episodes"]
    if len(eps) != entry.len:
        msg = f"the manifest lists {entry.len} episodes for this batch, but it holds {len(eps)}"
        raise TraceFormatError(msg, path)
    return eps


def _batch_steps(objs: list[Any]) -> int | None:
    """The steps of a batch's episode objects, from their rewards' shapes (None if unclear)."""
    try:  # the common case, every reward an ndarray reference of shape [n]: one tight loop
        total = 0
        for o in objs:
            r = o["rewards"]
            (n,) = r["shape"]
            if type(n) is not int or n <= 0 or r["__type"] != "ndarray":
                raise TypeError
            total += n
        return total
    except (KeyError, TypeError, ValueError):
        pass  # the general loop below judges every case
    total = 0
    for o in objs:
        r = o.get("rewards") if isinstance(o, dict) else None
        if isinstance(r, list):
            total += len(r)
            continue
        shape = r.get("shape") if isinstance(r, dict) and r.get("__type") == "ndarray" else None
        if shape == [1, 0]:  # version 1's zero-step episode
            continue
        if isinstance(shape, list) and len(shape) == 1 and _is_int(shape[0]):
            total += shape[0]
            continue
        return None
    return total


def check_batch_entry(
    entry: BatchEntry,
    objs: list[Any],
    json_size: int,
    ctx: DecodeContext,
    *,
    steps: int | None = None,
) -> None:
    """Check a batch against its manifest entry's ``steps`` and ``bytes``, when present.

    Args:
        entry: The manifest's entry for the batch.
        objs: The batch's episode objects (from :func:`decode_batch_episodes`).
        json_size: The size of the batch JSON file in bytes.
        ctx: The batch's decoding context, to reach the blob named by ``entry.bin``.
        steps: The batch's steps if already known (every object plain); else counted.

    Raises:
        TraceFormatError: the batch holds another number of steps, or the batch JSON and
            its blob another number of bytes, than the manifest says.
    """
    if entry.steps is not None:
        if steps is None:
            steps = _batch_steps(objs)
        if steps is not None and steps != entry.steps:
            msg = f"the manifest lists {entry.steps} steps for this batch, but it holds {steps}"
            raise TraceFormatError(msg, ctx.path)
    if entry.bytes is not None and entry.bin is not None:
        size = json_size + len(ctx.blob(entry.bin))
        if size != entry.bytes:
            msg = (
                f"the manifest gives {entry.bytes} bytes for this batch and its blob "
                f"{entry.bin}, but they hold {size} bytes (a truncated or altered file)"
            )
            raise TraceFormatError(msg, ctx.path)


class LoadedBatch:
    """A batch file parsed and checked against its manifest entry, for the reader.

    Attributes:
        objs: The episode objects, for :func:`decode_episode` (``None`` once every one is
            decoded in ``plain``).
        ctx: The batch's decoding context.
        plain: Per episode object its :data:`PlainEpisode`, or ``None`` for the general
            path; ``None`` for every object until :meth:`decode_plain` (or not plain at all).
        entry: The manifest's entry for the batch.
    """

    __slots__ = ("ctx", "entry", "objs", "plain", "tried")

    def __init__(
        self,
        objs: list[Any] | None,
        ctx: DecodeContext,
        entry: BatchEntry,
        plain: PlainBatch | None,
        tried: bool,
    ) -> None:
        self.objs = objs
        self.ctx = ctx
        self.entry = entry
        self.plain: list[PlainEpisode | None] | None = None
        self.tried = tried  # whether the plain objects were decoded (or looked for)
        if plain is not None:
            self._keep(plain)

    def _keep(self, plain: PlainBatch) -> None:
        self.plain = plain.episodes
        if plain.complete:  # every object decoded: drop the parsed JSON now (freed young)
            self.objs = None

    def decode_plain(self) -> None:
        """Decode the plain episode objects all at once, if not done yet (for iteration)."""
        if not self.tried:
            self.tried = True
            if self.objs is not None:  # (exact: parsed by parse_json)
                plain = decode_batch_plain(self.objs, self.ctx, self.entry.continues)
                if plain is not None:
                    self._keep(plain)


def load_batch(
    data: bytes,
    entry: BatchEntry,
    path: str,
    get_blob: Callable[[str], memoryview],
    *,
    strict: bool,
    plain: bool,
) -> LoadedBatch:
    """Parse and check a batch file's bytes; with ``plain``, decode its plain objects at once.

    The top level is checked (:func:`decode_batch_episodes`), with ``plain`` the plain
    episode objects decoded (:func:`decode_batch_plain`), then the batch checked against its
    manifest entry (:func:`check_batch_entry`). Without ``plain`` (one episode wanted), the
    objects are left for :func:`decode_episode`, or a later :meth:`LoadedBatch.decode_plain`.

    Args:
        data: The batch JSON's bytes.
        entry: The manifest's entry for the batch.
        path: The batch JSON's path, for messages.
        get_blob: Returns the bytes of a blob given its plain file name.
        strict: The file is version 2 (see :func:`parse_json`).
        plain: Decode the plain episode objects now (the batch is read through).

    Returns:
        The batch.

    Raises:
        TraceFormatError: the batch does not parse, or does not match its manifest entry.
    """
    parsed: Any = _NOT_PARSED
    if plain and strict and _orjson is not None:
        # Integers beyond 64 bits come out as floats: only the plain objects may use this.
        with contextlib.suppress(Exception):  # (parse_json words the error)
            parsed = _orjson.loads(data)
    quick = parsed is not _NOT_PARSED
    if not quick:
        parsed = parse_json(data, path, strict=strict)
    objs = decode_batch_episodes(parsed, entry, path)
    del parsed
    ctx = DecodeContext(path, get_blob)
    if not plain:
        check_batch_entry(entry, objs, len(data), ctx)
        return LoadedBatch(objs, ctx, entry, None, False)
    decoded = decode_batch_plain(objs, ctx, entry.continues)
    complete = decoded is not None and decoded.complete
    if quick and not complete and _LONG_DIGITS in data.translate(_DIGITS_TO_ZERO):
        # The general path (and the entry's step count) must see every integer exact.
        objs = decode_batch_episodes(parse_json(data, path, strict=strict), entry, path)
        decoded = None
    steps = None if decoded is None else decoded.steps
    check_batch_entry(entry, objs, len(data), ctx, steps=steps)
    return LoadedBatch(objs, ctx, entry, decoded, True)
