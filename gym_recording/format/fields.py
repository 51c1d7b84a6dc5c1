"""Fields (FORMAT.md §5): the observations or actions of an episode, one value per step.

In memory a field is a tree: an array whose first axis is the step, a ``dict`` or ``tuple``
of fields (Dict and Tuple spaces, stored leaf by leaf), or a ``list`` of per-step values
(anything irregular). The recorder's buffer hands a batch's fields over in that form, the
reader hands them back in that form, and every walk over such a tree is one of the helpers
here: :func:`leaves`, :func:`field_length`, :func:`slice_field`, :func:`field_step`,
:func:`join_fields`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from gym_recording.format.arrays import BatchBlob, BlobLayout, PrecompressedRows
from gym_recording.format.limits import MAX_NESTING
from gym_recording.format.values import decode_value, encode_value, stack_steps
from gym_recording.format.wire import ArrayRef, DictField, Field, TupleField

__all__ = [
    "JoinError",
    "as_array",
    "decode_fields",
    "field_encoder",
    "field_length",
    "field_step",
    "join_fields",
    "leaves",
    "map_leaves",
    "named_leaves",
    "slice_field",
]


# ------------------------------------------------------------------------------ tree helpers


def leaves(f: Any, name: str) -> Iterator[tuple[str, Any]]:
    """The leaves (arrays or per-step lists) of field ``f``, named ``name.key``/``name.0``."""
    if isinstance(f, dict):
        for k, v in f.items():
            yield from leaves(v, f"{name}.{k}")
    elif isinstance(f, tuple):
        for i, v in enumerate(f):
            yield from leaves(v, f"{name}.{i}")
    else:
        yield name, f


def named_leaves(f: Any, name: str) -> list[tuple[str, Any]]:
    """:func:`leaves` of ``f``, refused where two get one name (a key holding a ``.``).

    Raises:
        ValueError: two leaves share a name; the message names it.
    """
    out = list(leaves(f, name))
    names = [n for n, _ in out]
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        msg = f"two parts of {name} are both named {twice!r} (a key holding a '.'): rename it"
        raise ValueError(msg)
    return out


def field_length(f: Any) -> int | None:
    """The number of steps of field ``f``, or ``None`` if its leaves disagree."""
    if isinstance(f, (np.ndarray, list)):
        return len(f)
    lengths = {field_length(c) for c in (f.values() if isinstance(f, dict) else f)}
    if len(lengths) > 1:
        return None
    return lengths.pop() if lengths else 0


def map_leaves(f: Any, fn: Callable[[Any], Any]) -> Any:
    """Field ``f`` with ``fn`` applied to each leaf, keeping its dict/tuple structure."""
    if isinstance(f, dict):
        return {k: map_leaves(v, fn) for k, v in f.items()}
    if isinstance(f, tuple):
        return tuple(map_leaves(v, fn) for v in f)
    return fn(f)


def slice_field(f: Any, start: int, stop: int | None) -> Any:
    """Steps ``start:stop`` of field ``f``, keeping its dict/tuple structure."""
    return map_leaves(f, lambda leaf: leaf[start:stop])


def field_step(f: Any, t: int) -> Any:
    """The value of step ``t`` of field ``f`` (a NumPy scalar for a scalar leaf)."""
    return map_leaves(f, lambda leaf: leaf[t])


def as_array(values: Any) -> np.ndarray:
    """One leaf's per-step values as an array (a list of objects becomes an object array)."""
    if isinstance(values, np.ndarray):
        return values
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out


class JoinError(ValueError):
    """The fields of an episode's parts do not join (FORMAT.md §9)."""


def join_fields(parts: list[Any], drop_first: bool, *, stack: bool = True) -> Any:
    """The fields of an episode's parts joined along the step axis (FORMAT.md §4, §9).

    With ``drop_first`` each later part's first step (the repeated observation) is dropped,
    once it is found the same as the step the part before ends with.
    Parts join leaf by leaf when their structures agree: the same dict keys, tuple lengths,
    and array dtypes and shapes after the step axis. A part whose field is a list of per-step
    values (a writer that fell back to them) joins any other as per-step values, stacked
    where they allow as :func:`decode_fields` stacks a list (not with ``stack`` false: infos).

    Raises:
        JoinError: the parts' structures differ otherwise, or a later part does not begin
            with a copy of the step the part before ends with.
    """
    rest = [slice_field(p, 1, None) for p in parts[1:]] if drop_first else parts[1:]
    joined = _join([parts[0], *rest], stack)  # (first: a structure that differs says so)
    if drop_first:  # (§4: a copy of the step the part before ends with)
        for k in range(1, len(parts)):
            before, n = parts[k - 1], field_length(parts[k - 1])
            if (
                n
                and field_length(parts[k])
                and not _same(field_step(before, n - 1), field_step(parts[k], 0))
            ):
                raise JoinError(f"part {k} does not begin with the step the part before ends with")
    return joined


def _same(a: Any, b: Any) -> bool:
    """Whether two steps hold the same values (NaN is NaN), however each part stores them.

    A part of per-step values (a writer's fallback) may hold a number where the part before
    held an array row: the values are compared, not their types.
    """
    if isinstance(a, dict) or isinstance(b, dict):
        return (
            isinstance(a, dict)
            and isinstance(b, dict)
            and list(a) == list(b)
            and all(_same(a[k], b[k]) for k in a)
        )
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(map(_same, a, b))
    try:
        x, y = np.asarray(a), np.asarray(b)
        if x.dtype.kind in "biufc" and y.dtype.kind in "biufc":
            return x.shape == y.shape and bool(np.array_equal(x, y, equal_nan=True))
        if x.shape != y.shape:
            return False
        if x.shape == ():
            return bool(a == b) or (a != a and b != b)
        return all(map(_same, x.flat, y.flat))  # (object arrays: NaN is NaN there too)
    except Exception:  # (values that do not compare: taken as the same, not refused)
        return True


def _join(parts: list[Any], stack: bool) -> Any:
    head = parts[0]
    if any(isinstance(p, list) for p in parts):
        out: list[Any] = []
        for p in parts:
            n = field_length(p)
            if n is None:
                raise JoinError("a part's leaves have different numbers of steps")
            out.extend(field_step(p, t) for t in range(n))
        return stack_steps(out) if stack else out
    if isinstance(head, np.ndarray):
        if len(parts) == 1:  # (a field alone: as it is, not copied)
            return head
        for p in parts[1:]:
            if not isinstance(p, np.ndarray):
                raise JoinError(f"an array field is followed by a {type(p).__name__} field")
            if p.dtype != head.dtype or p.shape[1:] != head.shape[1:]:
                raise JoinError(
                    f"arrays of {head.dtype} {list(head.shape[1:])} per step are followed by "
                    f"arrays of {p.dtype} {list(p.shape[1:])}"
                )
        out_arr = np.concatenate(parts)
        out_arr.flags.writeable = False
        return out_arr
    if isinstance(head, dict):
        if not all(isinstance(p, dict) and list(p) == list(head) for p in parts):
            raise JoinError(f"a Dict field of keys {list(head)} is followed by another field")
        return {k: _join([p[k] for p in parts], stack) for k in head}
    if not all(isinstance(p, tuple) and len(p) == len(head) for p in parts):
        raise JoinError(f"a Tuple field of {len(head)} members is followed by another field")
    return tuple(_join([p[i] for p in parts], stack) for i in range(len(head)))


# ------------------------------------------------------------------------------ encoding


def field_encoder(field: Any, layout: BlobLayout) -> Callable[[int, int], Field]:
    """Lay out a batch's field (every buffered step) and return ``enc(start, stop)``.

    ``enc`` gives the §5 form of rows ``start:stop``: an
    :class:`~gym_recording.format.wire.ArrayRef` into the blob for an array leaf (whose
    column is laid out now, whole, when its rows allow, or part by part when it was
    compressed as recorded), a Dict/Tuple field of those, or a list of encoded values.
    """
    if isinstance(field, np.ndarray):
        return layout.rows(field)
    if isinstance(field, PrecompressedRows):
        return lambda a, b: layout.add(field[a:b])
    if isinstance(field, dict):
        encs = {k: field_encoder(v, layout) for k, v in field.items()}
        return lambda a, b: DictField({k: e(a, b) for k, e in encs.items()})
    if isinstance(field, tuple):
        tencs = [field_encoder(v, layout) for v in field]
        return lambda a, b: TupleField([e(a, b) for e in tencs])
    return lambda a, b: [encode_value(v, layout) for v in field[a:b]]


# ------------------------------------------------------------------------------ decoding


def decode_fields(
    fields: list[Field],
    blob: BatchBlob,
    where: Callable[[int], str],
    keep: frozenset[int] = frozenset(),
    _depth: int = 0,
) -> list[Any]:
    """The fields of a batch's episode objects at one place (``observations``, say), decoded.

    Decoded together, so that a column of array references is checked and viewed at once.
    ``where(i)`` names ``fields[i]``'s place for messages. A per-step list is stacked into
    one array where its values allow (§5), but in the fields ``keep`` names: parts of an
    episode, whose lists join as per-step values first (:func:`join_fields`).
    """
    if _depth > MAX_NESTING:
        raise blob.fail(where(0), f"fields nest deeper than {MAX_NESTING} levels")
    if list(map(type, fields)).count(ArrayRef) == len(fields):  # the common case
        return blob.arrays_of(fields, where, steps=True)  # type: ignore[arg-type]
    # Otherwise by kind: arrays, Dict fields of the same keys, Tuple fields of the same
    # length, per-step lists; each group decoded together, then put back in place.
    groups: dict[Any, list[int]] = {}
    for i, f in enumerate(fields):
        if isinstance(f, DictField):
            key: Any = ("dict", tuple(f.fields))
        elif isinstance(f, TupleField):
            key = ("tuple", len(f.fields))
        else:
            key = ("array",) if isinstance(f, ArrayRef) else ("list",)
        groups.setdefault(key, []).append(i)
    out: list[Any] = [None] * len(fields)
    for key, idx in groups.items():
        members = [fields[i] for i in idx]
        here = _places(where, idx, "")
        kept = frozenset(j for j, i in enumerate(idx) if i in keep)
        got: list[Any]
        if key[0] == "array":
            got = blob.arrays_of(members, here, steps=True)  # type: ignore[arg-type]
        elif key[0] == "dict":
            dicts: list[DictField] = members  # type: ignore[assignment]
            cols = {
                k: decode_fields(
                    [d.fields[k] for d in dicts],
                    blob,
                    _places(where, idx, f".{k}"),
                    kept,
                    _depth + 1,
                )
                for k in key[1]
            }
            got = [{k: cols[k][j] for k in key[1]} for j in range(len(idx))]
        elif key[0] == "tuple":
            tuples: list[TupleField] = members  # type: ignore[assignment]
            cols_t = [
                decode_fields(
                    [t.fields[m] for t in tuples],
                    blob,
                    _places(where, idx, f"[{m}]"),
                    kept,
                    _depth + 1,
                )
                for m in range(key[1])
            ]
            got = [tuple(c[j] for c in cols_t) for j in range(len(idx))]
        else:  # lists of per-step values
            lists: list[list[Any]] = members  # type: ignore[assignment]
            got = [
                [decode_value(x, blob, here(j), _depth + 1) for x in v] for j, v in enumerate(lists)
            ]
            got = [v if j in kept else stack_steps(v) for j, v in enumerate(got)]
        for j, i in enumerate(idx):
            out[i] = got[j]
    return out


def _places(where: Callable[[int], str], idx: list[int], suffix: str) -> Callable[[int], str]:
    """``where`` for the members ``idx`` of a group, with ``suffix`` appended."""
    return lambda j: where(idx[j]) + suffix
