"""Batches (FORMAT.md §4): the one encoder and the one decoder of episode objects.

:func:`lay_out_batch` then :func:`finish_batch` turn a batch of buffered episodes (rows of the
buffer's fields) into the batch JSON and its blob; :func:`decode_batch` turns a batch file back
into a :class:`DecodedBatch`, every rule of §4-§6 and §9 checked once, for the whole batch at
once; :func:`join_parts` joins the parts of an episode split across batches.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from msgspec import convert

from gym_recording._errors import TraceFormatError
from gym_recording.format.arrays import BatchBlob, BlobLayout, blob_dtype, brief
from gym_recording.format.codec import Compressor
from gym_recording.format.fields import (
    JoinError,
    decode_fields,
    field_encoder,
    field_length,
    join_fields,
)
from gym_recording.format.limits import MAX_INFO_CELLS, MAX_NDIM
from gym_recording.format.values import SCALAR_NAME, decode_value, encode_value, plain_dict
from gym_recording.format.wire import (
    EPISODE_KEYS,
    ArrayRef,
    Batch,
    BatchEntry,
    EpisodeObject,
    InfoColumn,
    InfoColumns,
    decode,
    encode,
)

__all__ = [
    "DecodedBatch",
    "InfoRows",
    "Span",
    "decode_batch",
    "finish_batch",
    "frame_problem",
    "join_parts",
    "lay_out_batch",
    "recode_batch",
]


@dataclass(slots=True)
class InfoRows:
    """Step infos that are dicts starting with the same ``keys``, kept as their values.

    Row ``j`` (step info ``j``) holds ``values[j * len(keys) : (j + 1) * len(keys)]`` (one
    ``None`` where there are no keys: the ``{}`` infos of classic-control envs), and
    ``extras[j]`` the info's further keys, if it has any (str keys, none ``__type``): a
    recording keeps an env's usual infos so, with no dict per step, and a batch's
    ``info_columns`` (§4) are slices of ``values``.
    """

    keys: tuple[str, ...]
    values: list[Any]
    extras: dict[int, dict[str, Any]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.values) // (len(self.keys) or 1)

    def add(self, values: Iterable[Any]) -> None:
        """Append a row: the values of ``keys``, in order."""
        if self.keys:
            self.values.extend(values)
        else:
            self.values.append(None)

    def dicts(self, start: int = 0) -> list[dict[str, Any]]:
        """The step infos from row ``start`` on, as dicts."""
        keys, v, n, extras = self.keys, self.values, len(self.keys), self.extras
        if n:
            out = [dict(zip(keys, v[j : j + n], strict=True)) for j in range(start * n, len(v), n)]
        else:
            out = [{} for _ in range(start, len(v))]
        for j, more in extras.items():
            if j >= start:
                out[j - start].update(more)
        return out


@dataclass(slots=True)
class Span:
    """A buffered episode object (an episode, or a part of one): its rows and its keys (§4).

    Its observations are rows ``obs_start:obs_stop`` of the batch's observations field, its
    actions and rewards rows ``act_start:act_stop``, its rendered frames (if any: ``frame_start``
    is -1 for none) rows ``frame_start:frame_stop`` of the batch's frames. ``keys`` holds the
    keys of :class:`~gym_recording.format.wire.EpisodeKeys` it stores (the rest take their
    defaults).
    """

    obs_start: int
    obs_stop: int
    act_start: int
    act_stop: int
    keys: dict[str, Any]
    options: Any
    infos: list[Any] | None
    part: int = 0
    continues: bool = False
    frame_start: int = -1
    frame_stop: int = -1
    #: The step infos, where they are rows (``infos`` then holds the first info only).
    info_rows: InfoRows | None = None


def lay_out_batch(
    observations: Any,
    actions: Any,
    rewards: np.ndarray,
    spans: Sequence[Span],
    blob_name: str,
    frames: Any = None,
) -> tuple[Batch, BlobLayout]:
    """A batch's episode objects, and its blob laid out (not encoded yet: see :func:`finish_batch`).

    Args:
        observations: The batch's observations field (every buffered observation row).
        actions: Its actions field.
        rewards: Its rewards, one per action row.
        spans: The episode objects, in order.
        blob_name: The blob's file name.
        frames: The batch's rendered frames (``uint8[k, H, W, 3]``), if a span has any; or
            what slices into :class:`~gym_recording.format.arrays.Precompressed` arrays
            (frames compressed as they were recorded).

    The blob holds the actions' columns, then the observations', then the rewards (the
    original writer's order), each laid out whole where its rows are 8-byte multiples; then
    the other arrays one by one, as each episode object is made (columns of other rows,
    options, infos); then each object's rendered frames.
    """
    layout = BlobLayout(blob_name)
    act = field_encoder(actions, layout)
    obs = field_encoder(observations, layout)
    rew = layout.rows(np.asarray(rewards, dtype=np.float64))
    episodes = []
    for sp in spans:  # (keys most objects leave at their defaults are set only where not)
        infos = None if sp.infos is None else _info_columns(sp.infos, sp.info_rows, layout)
        obj = EpisodeObject(
            obs(sp.obs_start, sp.obs_stop),
            act(sp.act_start, sp.act_stop),
            rew(sp.act_start, sp.act_stop),
            **sp.keys,
        )
        if sp.options is not None:
            obj.options = encode_value(sp.options, layout)
        if infos is not None:
            obj.infos, obj.info_columns = infos
        if sp.part:
            obj.part = sp.part
        if sp.continues:
            obj.continues = True
        episodes.append(obj)
    if frames is not None:
        for sp, obj in zip(spans, episodes, strict=True):
            if sp.frame_start >= 0:
                if sp.frame_stop - sp.frame_start != sp.obs_stop - sp.obs_start:  # (§4: N + 1)
                    msg = (
                        f"an episode object of {sp.obs_stop - sp.obs_start} observations has "
                        f"{sp.frame_stop - sp.frame_start} rendered frames"
                    )
                    raise ValueError(msg)
                obj.render_frames = layout.add(frames[sp.frame_start : sp.frame_stop])
    return Batch(episodes), layout


#: How each kind of info column is stored: its numpy dtype (None: the values' own).
_KINDS: dict[type, tuple[str, Any]] = {float: ("float", np.float64), bool: ("bool", np.bool_)}
_KINDS[int] = ("int", np.int64)


def _common_keys(steps: list[Any]) -> list[Any]:
    """The keys the step infos all start with, in order.

    No keys unless each is a dict stored as a JSON object (§6).
    """
    if set(map(type, steps)) != {dict} or not all(map(plain_dict, steps)):
        return []
    order = list(steps[0])
    for keys in map(list, steps):
        if keys[: len(order)] != order:
            k = 0
            while k < len(keys) and keys[k] == order[k]:
                k += 1
            order = order[:k]
    return order


def _extras(rows: InfoRows | None, n: int, layout: BlobLayout) -> list[Any]:
    """``n`` step infos ``{}`` (one dict), but for each row's own keys (``rows.extras``)."""
    rest: list[Any] = [{}] * n
    for j, more in rows.extras.items() if rows is not None else ():
        rest[j] = encode_value(more, layout)
    return rest


def _info_columns(
    infos: list[Any] | None, rows: InfoRows | None, layout: BlobLayout
) -> tuple[list[Any] | None, InfoColumns | None]:
    """An episode object's infos, encoded, with the step infos' numeric keys taken out.

    Where every step info (after the first) is a dict of the same keys in the same order
    (``rows``, or dicts in ``infos``), each key whose values are all Python floats, ints (of
    int64) or bools, numpy scalars of one blob dtype, or arrays of one blob dtype and shape
    (of fewer than :data:`~gym_recording.format.limits.MAX_NDIM` dimensions), is stored as
    one array in the blob (FORMAT.md §4, ``info_columns``); the rest stays in the infos.
    """
    if infos is None:
        return None, None
    steps: list[Any] = infos[1:] if rows is None else []
    if rows is not None:
        n, order = len(rows), list(rows.keys) if len(rows) > 1 else []
    else:
        n, order = len(steps), _common_keys(steps) if len(steps) > 1 else []
    if rows is not None and not rows.keys:  # ({} infos, but for the steps' own keys)
        return [encode_value(infos[0], layout), *_extras(rows, n, layout)], None
    if not order or "__type" in order or set(map(type, order)) != {str}:
        steps = steps if rows is None else rows.dicts()
        return [encode_value(i, layout) for i in (infos[0], *steps)], None
    columns: dict[str, InfoColumn] = {}
    for k, key in enumerate(order):
        values = [i[key] for i in steps] if rows is None else rows.values[k :: len(order)]
        types = set(map(type, values))
        if len(types) != 1:
            continue
        t = types.pop()
        known = _KINDS.get(t)
        try:
            if known is not None:
                kind, col = known[0], np.array(values, known[1])
            elif t in SCALAR_NAME:  # (a numpy scalar of a blob dtype)
                kind, col = "scalar", np.array(values, values[0].dtype)
            elif (
                t is np.ndarray
                and 0 < values[0].ndim < MAX_NDIM  # (a column has one more: the step's)
                and blob_dtype(values[0].dtype)
            ):
                kind, col = "array", np.stack(values)
                if col.dtype != values[0].dtype or any(v.dtype != col.dtype for v in values):
                    continue
            else:
                continue
        except (OverflowError, ValueError):  # an int past int64; arrays of other shapes
            continue
        columns[key] = InfoColumn(kind, layout.add(col))  # type: ignore[arg-type]
    if len(columns) == len(order) and (
        rows is not None or all(len(i) == len(order) for i in steps)
    ):
        rest = _extras(rows, n, layout)  # (every key a column: each step's info is {})
    else:
        steps = steps if rows is None else rows.dicts()
        if not columns:
            return [encode_value(i, layout) for i in (infos[0], *steps)], None
        rest = [
            encode_value({k: v for k, v in i.items() if k not in columns}, layout) for i in steps
        ]
    return [encode_value(infos[0], layout), *rest], InfoColumns(order, columns)


def _with_columns(
    infos: list[Any], columns: InfoColumns, blob: BatchBlob, steps: int, where: str
) -> list[Any]:
    """The step infos rebuilt from their ``info_columns`` (FORMAT.md §4), checked."""
    order, got = columns.order, {}  # (key -> the column's values, row by row)
    if len(set(order)) != len(order) or not set(columns.columns) <= set(order):
        raise blob.fail(where, "info_columns' order must name each key once, columns included")
    for key, col in columns.columns.items():
        arr = blob.array(col.data, f"{where}.{key}")
        want = {"float": "f8", "int": "i8", "bool": "b1"}.get(col.kind)
        if (
            not arr.ndim
            or len(arr) != steps
            or (want is not None and (arr.ndim != 1 or arr.dtype.str[1:] != want))
            or (col.kind == "scalar" and arr.ndim != 1)
            or (col.kind == "array" and arr.ndim < 2)
        ):
            raise blob.fail(
                f"{where}.{key}",
                f"expected {steps} {col.kind} values, got {arr.dtype}{list(arr.shape)}",
            )
        # (each row's value as arr[t] gives it, a Python scalar for the Python kinds)
        got[key] = arr.tolist() if col.kind in ("float", "int", "bool") else list(arr)
    out, others = [infos[0]], len(order) - len(got)  # (the keys of order each rest holds)
    zipped = order and not others  # (every key a column: the rows zipped, then own keys)
    if zipped:
        rows = zip(*map(got.get, order), strict=True)
        out.extend(map(dict, map(zip, itertools.repeat(order), rows)))
        if infos[1:].count({}) == steps:  # (no step holds keys of its own: the common case)
            return out
    for t, rest in enumerate(infos[1:]):  # (each a dict: decode_batch checked their JSON)
        if zipped:
            info = out[t + 1]
        else:
            info = {}
            for key in order:
                values = got.get(key)
                if values is not None:
                    info[key] = values[t]
                elif key in rest:
                    info[key] = rest[key]
                else:
                    raise blob.fail(where, f"step info {t + 1} has no {brief(key)}")
            out.append(info)
        if len(rest) != others:  # (version 2.3: its own keys, after order's)
            for key, value in rest.items():
                if key in got:
                    raise blob.fail(where, f"step info {t + 1} holds the column {brief(key)}")
                info.setdefault(key, value)
    return out


def finish_batch(
    batch: Batch, layout: BlobLayout, compressor: Compressor | None = None
) -> tuple[bytes, list[Any], int]:
    """The batch's JSON, the pieces of its blob, and the blob's size.

    With a ``compressor`` every array is compressed first (FORMAT.md §6.2).
    """
    if compressor is not None:
        layout.compress(compressor)
    return encode(batch), *layout.pieces()


@dataclass(frozen=True)
class DecodedBatch:
    """A batch's episode objects, decoded: one list per key, one item per object.

    ``observations``/``actions`` are fields (arrays whose first axis is the step, dicts and
    tuples of them, or lists of per-step values); ``rewards`` float arrays; ``keys`` the
    values of :class:`~gym_recording.format.wire.EpisodeKeys`' keys; ``options`` and
    ``infos`` decoded values (``None`` where absent). ``part`` and ``continues`` say how the
    objects join into episodes (see :func:`join_parts`). ``render_frames`` are
    ``uint8[N + 1, H, W, 3]`` arrays, or ``None``.
    """

    observations: list[Any]
    actions: list[Any]
    rewards: list[np.ndarray]
    keys: list[dict[str, Any]]
    options: list[Any]
    infos: list[list[Any] | None]
    part: list[int]
    continues: list[bool]
    render_frames: list[np.ndarray | None]
    #: Array references checked, and those of them compressed (for ``verify``'s counts),
    #: and the codecs of those (for ``info``).
    arrays: int = 0
    compressed: int = 0
    codecs: frozenset[str] = frozenset()

    def __len__(self) -> int:
        return len(self.rewards)

    @property
    def steps(self) -> int:
        """The steps of every object together."""
        return sum(len(r) for r in self.rewards)


def _legacy_empty(a: Any) -> Any:
    """Version 1 stored a zero-step episode's actions and rewards as float64 ``[1, 0]``."""
    if isinstance(a, np.ndarray) and a.shape == (1, 0):
        return a.reshape(0)
    return a


_REWARD_KINDS = {(1, "f")}  # (version 1's int and bool rewards are made float64: _rewards)
_NDIM_KIND = operator.attrgetter("ndim", "dtype.kind")


def _lengths(fields: list[Any]) -> list[int | None]:
    """The steps of each field (``None`` where its leaves disagree)."""
    if list(map(type, fields)).count(np.ndarray) == len(fields):
        return list(map(len, fields))
    return [field_length(f) for f in fields]


def _rewards(r: Any, blob: BatchBlob, where: str) -> np.ndarray:
    if isinstance(r, list):
        for x in r:  # (not strings, None, bytes)
            if not isinstance(x, (int, float)):
                raise blob.fail(where, f"expected rewards to be numbers, got {brief(x)}")
        try:
            r = np.asarray(r, dtype=np.float64)
        except OverflowError:
            raise blob.fail(where, "expected rewards to be float64 numbers") from None
    if not isinstance(r, np.ndarray) or r.ndim != 1 or r.dtype.kind not in "biuf":
        raise blob.fail(where, "expected rewards to be a 1-D numeric array")
    if r.dtype.kind != "f":  # (version 1 stored a Python int reward as it was: int64)
        out = r.astype(np.float64)
        out.flags.writeable = False
        return out
    return r


#: The attributes of an episode object :func:`decode_batch` takes, then the per-episode keys.
_TAKEN = "observations actions rewards options infos info_columns render_frames continues part"
_COLUMNS = operator.attrgetter(*_TAKEN.split(), *EPISODE_KEYS)
_NCOLUMNS = len(_TAKEN.split()) + len(EPISODE_KEYS)


def decode_batch(
    data: bytes,
    entry: BatchEntry,
    blob: BatchBlob,
    *,
    legacy: bool,
    after_continues: bool,
) -> DecodedBatch:
    """Decode and check a batch file (FORMAT.md §4-§6, §9).

    Args:
        data: The batch JSON's bytes.
        entry: The manifest's entry for the batch.
        blob: The batch's blob.
        legacy: The batch is version 1 (see :func:`~gym_recording.format.wire.decode`).
        after_continues: The writer's previous batch continues an episode into this one.

    Raises:
        TraceFormatError: anything in the batch breaks the format, naming the file and where.
    """
    path = blob.path
    objs: list[EpisodeObject] = decode(data, Batch, path, legacy=legacy).episodes
    n = len(objs)
    if n != entry.len:
        msg = f"the manifest lists {entry.len} episodes for this batch, but it holds {n}"
        raise TraceFormatError(msg, path)

    def at(key: str) -> Callable[[int], str]:
        return lambda i: f"episodes[{i}].{key}"

    # Each attribute's values across the objects, one list each (transposed in C: a batch
    # may hold thousands of objects).
    by_key = [list(c) for c in zip(*map(_COLUMNS, objs), strict=True)] or [
        [] for _ in range(_NCOLUMNS)
    ]
    (
        obs_refs,
        act_refs,
        rew_refs,
        options,
        infos,
        info_columns,
        frame_refs,
        continues,
        part,
        *key_values,
    ) = by_key  # (in _TAKEN's order, then EPISODE_KEYS')
    parts: frozenset[int] = frozenset()  # (the parts of an episode: joined first)
    if part.count(0) != n or continues.count(False) != n:
        parts = frozenset(j for j in range(n) if part[j] or continues[j])
    observations = decode_fields(obs_refs, blob, at("observations"), parts)
    actions = decode_fields(act_refs, blob, at("actions"), parts)
    rewards = decode_fields(rew_refs, blob, at("rewards"))
    if legacy:
        actions = [_legacy_empty(a) for a in actions]
        rewards = [_legacy_empty(r) for r in rewards]
    # The checks below run on whole columns; a column that fails is checked object by
    # object, for the message.
    if (
        list(map(type, rewards)).count(np.ndarray) != n
        or not set(map(_NDIM_KIND, rewards)) <= _REWARD_KINDS
    ):
        rewards = [_rewards(r, blob, f"episodes[{j}].rewards") for j, r in enumerate(rewards)]
    steps = list(map(len, rewards))
    n_obs, n_act = _lengths(observations), _lengths(actions)
    if n_act != steps or n_obs != list(map((1).__add__, steps)):
        for j, k in enumerate(steps):
            if n_act[j] != k or n_obs[j] != k + 1:
                for name, got in (("observations", n_obs[j]), ("actions", n_act[j])):
                    if got is None:  # (a dict or tuple whose leaves disagree)
                        msg = f"expected the leaves of {name} to hold one number of steps"
                        raise blob.fail(f"episodes[{j}].{name}", msg + ", got different ones")
                raise blob.fail(
                    f"episodes[{j}]",
                    f"expected N+1 observations and N actions for N={k} rewards, "
                    f"got {n_obs[j]} observations and {n_act[j]} actions",
                )
    if options.count(None) != n:
        options = [
            None if v is None else decode_value(v, blob, f"episodes[{j}].options")
            for j, v in enumerate(options)
        ]
    cells = 0
    if info_columns.count(None) != n:
        cells = sum(steps[j] * len(c.columns) for j, c in enumerate(info_columns) if c)
    if cells > MAX_INFO_CELLS:
        msg = (
            f"its info_columns would rebuild {cells} info values, more than the "
            f"{MAX_INFO_CELLS} a batch may hold (FORMAT.md §9)"
        )
        raise TraceFormatError(msg, path)
    if infos.count(None) != n or info_columns.count(None) != n:
        for j, v in enumerate(infos):
            if v is None:
                if info_columns[j] is not None:
                    raise blob.fail(f"episodes[{j}]", "has 'info_columns' but no 'infos'")
                continue
            if len(v) != steps[j] + 1:
                raise blob.fail(
                    f"episodes[{j}]",
                    f"expected 'infos' to be a list of N+1 = {steps[j] + 1} values",
                )
            columns = info_columns[j]
            if (
                columns is not None
                and v[1:].count({}) != steps[j]
                and not all(type(i) is dict and plain_dict(i) for i in v[1:])
            ):  # (§4: each step's rest of an info is a JSON object)
                raise blob.fail(f"episodes[{j}]", "its step infos must be JSON objects")
            where = f"episodes[{j}].infos"
            infos[j] = [decode_value(i, blob, where) if i else i for i in v]  # ({} as it is)
            if columns is not None:
                infos[j] = _with_columns(infos[j], columns, blob, steps[j], f"episodes[{j}]")
    render_frames: list[np.ndarray | None] = [None] * n
    if frame_refs.count(None) != n:
        for j, ref in enumerate(frame_refs):
            if ref is not None:
                render_frames[j] = _frames(ref, blob, steps[j], f"episodes[{j}]")
    want_continues = [False] * n
    if n:
        want_continues[-1] = entry.continues
    if continues != want_continues or part.count(0) != n - (1 if after_continues else 0):
        _check_parts(continues, part, entry, after_continues, blob)
    blob.check_disjoint()
    batch = DecodedBatch(
        observations,
        actions,
        rewards,
        list(map(dict, map(zip, itertools.repeat(EPISODE_KEYS), zip(*key_values, strict=True)))),
        options,
        infos,
        part,
        continues,
        render_frames,
        blob.arrays,
        blob.compressed,
        frozenset(blob.codecs),
    )
    total = sum(steps)
    if entry.steps is not None and entry.steps != total:
        msg = f"the manifest lists {entry.steps} steps for this batch, but it holds {total}"
        raise TraceFormatError(msg, path)
    if entry.bytes is not None:  # (a batch that names no blob and holds no array has none)
        size = len(data) + (len(blob.bytes()) if entry.bin is not None or blob.arrays else 0)
        if size != entry.bytes:
            msg = (
                f"the manifest gives {entry.bytes} bytes for this batch and its blob "
                f"{blob.name}, but they hold {size} bytes (a truncated or altered file)"
            )
            raise TraceFormatError(msg, path)
    return batch


def frame_problem(dtype: np.dtype[Any], shape: tuple[int, ...]) -> str | None:
    """Why a rendered frame of ``dtype`` and ``shape`` cannot be in ``render_frames``, or None.

    FORMAT.md §4 (version 2.2): an RGB ``uint8[H, W, 3]`` frame, H and W at least 1.
    """
    if dtype != np.uint8 or len(shape) != 3 or shape[2] != 3:
        return f"expected RGB frames, uint8[H, W, 3], got {dtype}{list(shape)}"
    if not (shape[0] and shape[1]):
        return f"frames of {list(shape[:2])} pixels"
    return None


def _frames(ref: ArrayRef, blob: BatchBlob, steps: int, where: str) -> np.ndarray:
    """An episode object's ``render_frames``, checked."""
    arr = blob.array(ref, f"{where}.render_frames")
    problem: str | None
    if not arr.ndim or len(arr) != steps + 1:
        problem = f"expected N + 1 = {steps + 1} frames, got {arr.dtype}{list(arr.shape)}"
    else:
        problem = frame_problem(arr.dtype, arr.shape[1:])
    if problem is not None:
        raise blob.fail(f"{where}.render_frames", problem)
    return arr


def _check_parts(
    continues: list[bool],
    part: list[int],
    entry: BatchEntry,
    after_continues: bool,
    blob: BatchBlob,
) -> None:
    """Refuse a batch whose objects' ``continues`` and ``part`` break §9 (names the object)."""
    n = len(continues)
    for j in range(n):
        where = f"episodes[{j}]"
        last = j == n - 1
        if continues[j] != (last and entry.continues):
            if continues[j] and not last:
                problem = "continues, but only a batch's last episode object may continue"
            else:
                problem = (
                    f"'continues' is {str(continues[j]).lower()}, but the manifest says the "
                    f"batch {'continues' if entry.continues else 'does not continue'}"
                )
            raise blob.fail(where, problem)
        if part[j] and not (j == 0 and after_continues):
            raise blob.fail(
                where,
                f"is part {part[j]} of an episode, but no part of it precedes it in the "
                "previous batch",
            )
        if j == 0 and after_continues and not part[j]:
            raise blob.fail(
                where, "expected the next part of the episode the previous batch continues"
            )


def join_parts(parts: Sequence[tuple[DecodedBatch, int]], path: str) -> DecodedBatch:
    """Join the parts of one episode (FORMAT.md §4, §9) into a batch of that one episode.

    Args:
        parts: Each part's batch and position in it, in order: the first part, then each
            batch's first object while the previous part continues.
        path: The manifest of the writer, for messages.

    Raises:
        TraceFormatError: the parts are not numbered one after the other, or do not join:
            different structures or dtypes, or infos recorded in some parts only.
    """

    def col(key: str) -> list[Any]:
        return [getattr(b, key)[j] for b, j in parts]

    numbers = col("part")
    if numbers != list(range(numbers[0], numbers[0] + len(parts))) or numbers[0]:
        msg = f"the parts of an episode are numbered {brief(numbers)}, not 0, 1, 2, ..."
        raise TraceFormatError(msg, path)
    infos, frames = col("infos"), col("render_frames")
    for what, got in (("infos", infos), ("render_frames", frames)):
        if any(i is None for i in got) and any(i is not None for i in got):
            msg = (
                f"the {len(parts)} parts of an episode do not join: {what} are recorded in "
                "some only"
            )
            raise TraceFormatError(msg, path)
    try:
        obs = join_fields(col("observations"), drop_first=True)
        acts = join_fields(col("actions"), drop_first=False)
        rews = join_fields(col("rewards"), drop_first=False)
        joined_infos = None if infos[0] is None else join_fields(infos, True, stack=False)
        joined_frames = None if frames[0] is None else join_fields(frames, drop_first=True)
    except JoinError as exc:
        msg = f"the {len(parts)} parts of an episode do not join: {exc}"
        raise TraceFormatError(msg, path) from None
    (first, i), (last, k) = parts[0], parts[-1]
    ends = {"first": first.keys[i], "last": last.keys[k]}
    keys = {key: ends[end][key] for key, end in EPISODE_KEYS.items()}
    return DecodedBatch(
        [obs],
        [acts],
        [rews],
        [keys],
        [first.options[i]],
        [joined_infos],
        [0],
        [False],
        [joined_frames],
    )


def recode_batch(
    data: bytes, blob: BatchBlob, blob_name: str, *, legacy: bool, compressor: Compressor | None
) -> tuple[bytes, list[Any], int]:
    """A batch's JSON and blob with every array stored again, compressed or raw (§6.2).

    Every ndarray reference of the batch (in fields, infos, options, object arrays) is read
    through ``blob`` (checked, decompressed) and laid out in a new blob, ``blob_name``; all
    else stays as it was. Decode the batch with :func:`decode_batch` first: this assumes a
    sound batch.

    Returns:
        The new JSON, the new blob's pieces, and its size.
    """
    doc: Any = decode(data, Any, blob.path, legacy=legacy)
    layout = BlobLayout(blob_name)
    doc = _laid_out_again(doc, blob, layout, itertools.count(1))
    if compressor is not None:
        layout.compress(compressor)
    return encode(doc, legacy=legacy), *layout.pieces()  # (v1: NaN tokens kept)


def _laid_out_again(v: Any, blob: BatchBlob, layout: BlobLayout, count: Iterator[int]) -> Any:
    """Parsed JSON ``v``, each ndarray reference read through ``blob`` and added to ``layout``.

    (A function of the module: a nested one calling itself is a reference cycle, which kept
    each batch's arrays alive until the garbage collector ran.)
    """
    if isinstance(v, list):
        return [_laid_out_again(x, blob, layout, count) for x in v]
    if not isinstance(v, dict):
        return v
    if v.get("__type") == "ndarray":
        ref = convert(v, ArrayRef)
        return layout.add(blob.array(ref, f"array {next(count)}"))
    return {k: _laid_out_again(x, blob, layout, count) for k, x in v.items()}
