"""Convert Gymnasium (and legacy Gym) spaces to and from the JSON of FORMAT.md §7.

:func:`space_to_json` turns a space into a strict-JSON-able dict (no ``NaN``/``Infinity``
tokens: non-finite bounds are the strings ``"inf"``, ``"-inf"`` and ``"nan"``);
:func:`space_from_json` turns such a dict back into a :mod:`gymnasium.spaces` space.

>>> from gymnasium.spaces import Discrete
>>> space_to_json(Discrete(3, start=1))
{'type': 'Discrete', 'n': 3, 'start': 1}
>>> space_from_json({"type": "Discrete", "n": 3, "start": 1})
Discrete(3, start=1)

Legacy ``gym.spaces`` objects are recognised by their class name and module, so ``gym`` is
never imported here. Anything that is not one of the seven known space types is written as
``{"type": "Unknown", "repr": ...}``. Read back, it is ``None`` where it is the whole space,
and an :class:`UnknownSpace` inside a ``Tuple`` or ``Dict``, so that the known parts are kept
(MiniGrid's ``Dict`` of an image, a direction and a custom mission space, say).

Rebuilding a space takes memory for its bounds (a ``Box``'s ``low`` and ``high`` are full
arrays in Gymnasium, however compactly they are written): a space that would take more than
:data:`MAX_SPACE_BYTES` is refused with a :class:`~gym_recording.TraceFormatError`.
"""

from __future__ import annotations

import math
import reprlib
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces as gspaces

from gym_recording._errors import TraceFormatError
from gym_recording.format.limits import INTP_MAX, MAX_NDIM

__all__ = [
    "MAX_SPACE_BYTES",
    "MAX_SPACE_DEPTH",
    "UnknownSpace",
    "space_breaches",
    "space_from_json",
    "space_to_json",
]

MAX_SPACE_DEPTH = 64
"""How deeply ``Tuple``/``Dict`` spaces may nest: the top-level space is at depth 0."""

MAX_SPACE_BYTES = 256 << 20
"""The most memory a rebuilt space's arrays and characters may take together."""

#: A Text charset longer than this is written as ranges of code points (FORMAT.md §7).
_CHARSET_STRING_MAX = 1024


class UnknownSpace(gspaces.Space[Any]):
    """A part of a recorded space that the recorder could not describe (FORMAT.md §7).

    It stands in a rebuilt ``Tuple`` or ``Dict`` space for the subspace written as
    ``Unknown``, so that the other subspaces are kept. It knows nothing of its values:
    :meth:`contains` accepts any value, and :meth:`sample` is not possible.

    Args:
        description: The ``repr`` of the original space, as recorded.

    Example:
        >>> from gymnasium.spaces import Dict
        >>> from gym_recording.format.spaces import space_from_json
        >>> space = space_from_json({"type": "Dict", "spaces": {
        ...     "n": {"type": "Discrete", "n": 2, "start": 0},
        ...     "mission": {"type": "Unknown", "repr": "MissionSpace(...)"}}})
        >>> assert isinstance(space, Dict)
        >>> space["n"], space["mission"]
        (Discrete(2), UnknownSpace('MissionSpace(...)'))
    """

    def __init__(self, description: str) -> None:
        super().__init__()
        self.description = description

    def contains(self, x: Any) -> bool:
        """Any value: nothing is known of this space."""
        return True

    def sample(self, mask: Any = None, probability: Any = None) -> Any:
        """Not possible: nothing is known of this space."""
        msg = f"cannot sample the unknown space {self.description}"
        raise NotImplementedError(msg)

    def __repr__(self) -> str:
        return f"UnknownSpace({self.description!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnknownSpace) and other.description == self.description

    def __hash__(self) -> int:
        return hash(("UnknownSpace", self.description))


_INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
_FLOAT_DTYPES = ("float16", "float32", "float64")
_BOX_DTYPES = frozenset(("bool", *_INT_DTYPES, *_FLOAT_DTYPES))
_NONFINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}

#: The space classes of §7, each written under its class name.
_GYMNASIUM_CLASSES = (
    gspaces.Box,
    gspaces.Discrete,
    gspaces.MultiDiscrete,
    gspaces.MultiBinary,
    gspaces.Text,
    gspaces.Tuple,
    gspaces.Dict,
)

_short_repr = reprlib.Repr()
_short_repr.maxstring = 60
_short_repr.maxother = 60
_short_repr.maxlist = 6
_short_repr.maxdict = 6


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


def space_to_json(space: object) -> dict[str, Any] | None:
    """Serialise a space as FORMAT.md §7 describes.

    Gymnasium spaces (and their subclasses) are recognised with ``isinstance``; legacy
    ``gym.spaces`` objects by the name of a class in their MRO defined in a ``gym`` module.
    This function never raises: anything it cannot describe becomes
    ``{"type": "Unknown", "repr": repr(space)}``.

    Args:
        space: A space, or ``None``.

    Returns:
        ``None`` if ``space`` is ``None``, otherwise a dict that ``json.dumps(...,
        allow_nan=False)`` accepts.
    """
    if space is None:
        return None
    return _to_json(space, 0)


def _to_json(space: object, depth: int) -> dict[str, Any]:
    if isinstance(space, UnknownSpace):  # (read from a recording: written as it was read)
        return {"type": "Unknown", "repr": space.description}
    kind = _space_kind(space)
    if kind is None or (kind in ("Tuple", "Dict") and depth >= MAX_SPACE_DEPTH):
        return _unknown(space)  # (a Tuple's or Dict's children would sit deeper than readers read)
    try:
        return _WRITERS[kind](space, depth)
    except Exception:  # a broken or exotic space must not break recording
        return _unknown(space)


def _space_kind(space: object) -> str | None:
    """Return the §7 type name of a Gymnasium or legacy Gym space, or ``None``."""
    for cls in _GYMNASIUM_CLASSES:
        if isinstance(space, cls):
            return cls.__name__
    for klass in type(space).__mro__:
        module = getattr(klass, "__module__", "") or ""
        if klass.__name__ in _WRITERS and (module == "gym" or module.startswith("gym.")):
            return klass.__name__
    return None


def _unknown(space: object) -> dict[str, Any]:
    try:
        text = repr(space)
    except Exception:  # includes RecursionError from absurdly nested objects
        text = f"<{type(space).__name__} object>"
    return {"type": "Unknown", "repr": text}


def _dtype_name(dtype: object) -> str:
    return np.dtype(dtype).name  # type: ignore[call-overload]


def _encode_array(array: np.ndarray[Any, Any]) -> Any:
    """Return ``array`` as a nested list (a scalar for rank 0), non-finite floats as strings."""
    if array.dtype.kind == "f" and not bool(np.isfinite(array).all()):
        return _encode_nonfinite(array.tolist())
    return array.tolist()


def _encode_nonfinite(value: Any) -> Any:
    if isinstance(value, list):
        return [_encode_nonfinite(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def _write_box(space: Any, depth: int) -> dict[str, Any]:
    dtype = _dtype_name(space.dtype)
    if dtype not in _BOX_DTYPES:
        raise ValueError(f"unsupported Box dtype {dtype}")
    shape = _shape([int(dim) for dim in space.shape])
    out: dict[str, Any] = {"type": "Box", "shape": shape, "dtype": dtype}
    for key in ("low", "high"):
        array = np.asarray(getattr(space, key))
        if array.shape != tuple(shape) or array.dtype != np.dtype(dtype):
            raise ValueError(f"Box {key} does not match the Box's shape and dtype")
        if array.dtype.kind == "f" and bool(np.isnan(array).any()):  # (legacy gym allows it)
            raise ValueError("a Box of NaN bounds, which Gymnasium refuses (§7: Unknown)")
        # Uniform bounds (an image's 0..255) are one scalar: the manifest stays small. (Equal
        # bytes, not values: -0.0 == 0.0, and the bounds come back as they were.)
        flat = array.reshape(-1)
        raw = flat.view(f"V{flat.itemsize}") if flat.size else flat
        uniform = flat.size > 1 and bool((raw == raw[0]).all())
        out[key] = _encode_array(flat[0]) if uniform else _encode_array(array)
    return out


def _write_discrete(space: Any, depth: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": "Discrete",
        "n": int(space.n),
        "start": int(getattr(space, "start", 0)),
    }
    dtype = _dtype_name(getattr(space, "dtype", np.int64))
    if dtype != "int64":
        if dtype not in _INT_DTYPES:
            raise ValueError(f"unsupported Discrete dtype {dtype}")
        out["dtype"] = dtype
    return out


def _write_multi_discrete(space: Any, depth: int) -> dict[str, Any]:
    dtype = _dtype_name(space.dtype)
    if dtype not in _INT_DTYPES:
        raise ValueError(f"unsupported MultiDiscrete dtype {dtype}")
    nvec = np.asarray(space.nvec)
    _shape(list(nvec.shape))
    start = getattr(space, "start", None)  # legacy gym has no start: it is 0
    start_array = np.zeros_like(nvec) if start is None else np.asarray(start)
    if start_array.shape != nvec.shape or nvec.dtype.kind not in "iu":
        raise ValueError("MultiDiscrete nvec and start do not match")
    return {
        "type": "MultiDiscrete",
        "nvec": nvec.tolist(),
        "start": start_array.tolist(),
        "dtype": dtype,
    }


def _write_multi_binary(space: Any, depth: int) -> dict[str, Any]:
    n = space.n
    if np.ndim(n) == 0:
        return {"type": "MultiBinary", "n": int(n)}
    return {"type": "MultiBinary", "n": _shape([int(dim) for dim in n])}


def _shape(shape: list[int]) -> list[int]:
    """``shape``, if a reader accepts it (else the space is written as Unknown)."""
    if len(shape) > MAX_NDIM:
        raise ValueError(f"a shape of {len(shape)} dimensions, more than {MAX_NDIM}")
    return shape


def _write_text(space: Any, depth: int) -> dict[str, Any]:
    charset = getattr(space, "character_set", None)
    if charset is None:
        charset = space._char_set
    out: dict[str, Any] = {
        "type": "Text",
        "min_length": int(space.min_length),
        "max_length": int(space.max_length),
    }
    codes = np.unique(np.fromiter(map(ord, charset), np.int64, len(charset)))
    surrogates = bool(((codes >= 0xD800) & (codes <= 0xDFFF)).any())
    if len(codes) <= _CHARSET_STRING_MAX and not surrogates:
        out["charset"] = "".join(map(chr, codes.tolist()))
    else:  # (a large charset, or one UTF-8 cannot hold: runs of code points, first and last)
        breaks = np.flatnonzero(np.diff(codes) != 1)
        firsts = np.concatenate([codes[:1], codes[breaks + 1]])
        lasts = np.concatenate([codes[breaks], codes[-1:]])
        out["charset_ranges"] = np.stack([firsts, lasts], axis=1).tolist()
    return out


def _write_tuple(space: Any, depth: int) -> dict[str, Any]:
    return {"type": "Tuple", "spaces": [_to_json(child, depth + 1) for child in space.spaces]}


def _write_dict(space: Any, depth: int) -> dict[str, Any]:
    children: dict[str, Any] = {}
    for key, child in space.spaces.items():
        if not isinstance(key, str):
            # A JSON object could not keep the key's type; do not pretend it can.
            raise TypeError(f"Dict space key {key!r} is not a string")
        children[key] = _to_json(child, depth + 1)
    return {"type": "Dict", "spaces": children}


_WRITERS: dict[str, Callable[[Any, int], dict[str, Any]]] = {
    "Box": _write_box,
    "Discrete": _write_discrete,
    "MultiDiscrete": _write_multi_discrete,
    "MultiBinary": _write_multi_binary,
    "Text": _write_text,
    "Tuple": _write_tuple,
    "Dict": _write_dict,
}


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


def space_from_json(d: dict[str, Any] | None, *, where: str = "space") -> gspaces.Space[Any] | None:
    """Rebuild a Gymnasium space from its FORMAT.md §7 JSON.

    Keys a space type does not define are ignored.

    Args:
        d: A dict written by :func:`space_to_json` (or read from a manifest), or ``None``.
        where: What ``d`` is, for error messages, e.g. ``"observation_space"``.

    Returns:
        The space; ``None`` if ``d`` is ``None`` or ``Unknown`` (or of a ``type`` this reader
        does not know). An ``Unknown`` part of a ``Tuple`` or ``Dict`` is an
        :class:`UnknownSpace`.

    Raises:
        TraceFormatError: ``d`` is not valid §7 JSON (not a dict, a missing key, a value of the
            wrong type or out of range, spaces nested deeper than
            :data:`MAX_SPACE_DEPTH`), the space would take more than
            :data:`MAX_SPACE_BYTES`, or Gymnasium refuses the values.
    """
    if d is None:
        return None
    space = _from_json(d, where, 0, _Budget())
    return None if isinstance(space, UnknownSpace) else space


def space_breaches(d: object, *, where: str = "space") -> list[str]:
    """What FORMAT.md §7 says against space JSON that :func:`space_from_json` reads.

    A ``Text`` space's ``charset`` holds its characters in code point order. The reader
    builds the same set of characters from any order, so it reads one out of order all the
    same; ``verify`` reports it. Parts of ``Tuple`` and ``Dict`` spaces are checked too.

    Args:
        d: Space JSON that :func:`space_from_json` read without an error.
        where: What ``d`` is, as for :func:`space_from_json`.

    Returns:
        One message per problem, each naming the key; empty if there is none.

    Example:
        >>> text = {"type": "Text", "min_length": 0, "max_length": 2, "charset": "bca"}
        >>> space_breaches({"type": "Tuple", "spaces": [text]}, where="action_space")
        ["action_space.spaces[0].charset: expected the characters in code point order ...
        got 'c' (U+0063) before 'a' (U+0061) at index 2; ... write them sorted: 'abc'"]
    """
    out: list[str] = []
    stack: list[tuple[object, str]] = [(d, where)]
    while stack:
        space, at = stack.pop()
        if not isinstance(space, dict):
            continue
        kind, parts = space.get("type"), space.get("spaces")
        if kind == "Tuple" and isinstance(parts, list):
            stack.extend((s, f"{at}.spaces[{i}]") for i, s in reversed(list(enumerate(parts))))
        elif kind == "Dict" and isinstance(parts, dict):
            stack.extend((s, f"{at}.spaces[{k!r}]") for k, s in reversed(list(parts.items())))
        elif kind == "Text" and "charset_ranges" not in space:  # (ranges: checked on reading)
            charset = space.get("charset")
            if not isinstance(charset, str):
                continue
            i = next((i for i in range(1, len(charset)) if charset[i - 1] > charset[i]), 0)
            if i:
                a, b = charset[i - 1], charset[i]
                fix = f"sorted: {''.join(sorted(charset))!r}" if len(charset) <= 40 else "sorted"
                out.append(
                    f"{at}.charset: expected the characters in code point order (FORMAT.md "
                    f"§7), got {a!r} (U+{ord(a):04X}) before {b!r} (U+{ord(b):04X}) at index "
                    f"{i}; readers read the same characters all the same: write them {fix}"
                )
    return out


class _Budget:
    """The memory a space being rebuilt may still take."""

    def __init__(self) -> None:
        self.left = MAX_SPACE_BYTES

    def charge(self, nbytes: int, where: str) -> None:
        self.left -= nbytes
        if self.left < 0:
            msg = (
                f"{where}: the space would take more than {MAX_SPACE_BYTES >> 20} MiB of "
                "memory to rebuild (its bounds are full arrays); not read"
            )
            raise TraceFormatError(msg)


def _fail(where: str, expected: str, value: object) -> TraceFormatError:
    got = f"{type(value).__name__} {_short_repr.repr(value)}"
    return TraceFormatError(f"{where}: expected {expected}, got {got}")


def _from_json(d: object, where: str, depth: int, budget: _Budget) -> gspaces.Space[Any]:
    if depth > MAX_SPACE_DEPTH:
        raise TraceFormatError(f"{where}: spaces nested deeper than {MAX_SPACE_DEPTH} levels")
    if not isinstance(d, dict):
        raise _fail(where, 'a space object {"type": ...}', d)
    kind = _get(d, "type", where, str, "a string")
    reader = _READERS.get(kind)
    if reader is None:  # (a later minor version's type: §7, read as Unknown)
        budget.charge(len(kind), where)
        return UnknownSpace(f"{kind[:200]} (a space type this reader does not know)")
    return reader(d, where, depth, budget)


def _need(d: dict[str, Any], key: str, where: str) -> Any:
    if key not in d:
        raise TraceFormatError(f"{where}: missing key {key!r} ({d.get('type')} space)")
    return d[key]


def _get(d: dict[str, Any], key: str, where: str, kind: type, expected: str) -> Any:
    value = _need(d, key, where)
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise _fail(f"{where}.{key}", expected, value)
    return value


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _get_int(d: dict[str, Any], key: str, where: str, minimum: int | None = None) -> int:
    value = _need(d, key, where)
    if not _is_int(value) or (minimum is not None and value < minimum):
        expected = "an integer" if minimum is None else f"an integer >= {minimum}"
        raise _fail(f"{where}.{key}", expected, value)
    return int(value)


def _get_dtype(d: dict[str, Any], key: str, where: str, allowed: Sequence[str]) -> np.dtype[Any]:
    name = _get(d, key, where, str, "a dtype name")
    if name not in allowed:
        raise _fail(f"{where}.{key}", f"one of {', '.join(allowed)}", name)
    return np.dtype(name)


def _build(where: str, make: Callable[[], gspaces.Space[Any]]) -> gspaces.Space[Any]:
    try:
        return make()
    except (ValueError, TypeError, AssertionError, OverflowError) as exc:
        raise TraceFormatError(f"{where}: Gymnasium refuses the space: {exc}") from exc


def _infer_shape(value: object, where: str) -> list[int]:
    """Shape of a nested list, read along its first elements (checked by :func:`_to_array`)."""
    shape: list[int] = []
    while isinstance(value, list):
        if len(shape) == MAX_NDIM:
            raise TraceFormatError(f"{where}: nested lists deeper than {MAX_NDIM} levels")
        shape.append(len(value))
        if not value:
            break
        value = value[0]
    return shape


def _to_array(value: object, shape: Sequence[int], dtype: np.dtype[Any], where: str) -> Any:
    """Convert a nested list of ``shape`` (a scalar if ``shape`` is empty) to an array.

    Float dtypes take numbers and ``"inf"``/``"-inf"``/``"nan"``; integer dtypes take integers
    within the dtype's range; ``bool`` takes booleans.
    """
    flat: list[Any] = []
    if dtype.kind == "f":
        expected = 'a number or "inf"/"-inf"/"nan"'
        limit = float(np.finfo(dtype).max)

        def leaf(item: object, at: str) -> Any:
            if isinstance(item, str) and item in _NONFINITE:
                return _NONFINITE[item]
            if isinstance(item, (int, float)) and not isinstance(item, bool):
                number = float(item)
                if math.isfinite(number) and abs(number) > limit:
                    raise _fail(at, f"a number within the {dtype.name} range", item)
                return number
            raise _fail(at, expected, item)

    elif dtype.kind in "iu":
        info = np.iinfo(dtype)
        expected = f"an integer in [{info.min}, {info.max}] ({dtype.name})"

        def leaf(item: object, at: str) -> Any:
            if _is_int(item) and info.min <= item <= info.max:  # type: ignore[operator]
                return int(item)  # type: ignore[call-overload]
            raise _fail(at, expected, item)

    else:  # bool

        def leaf(item: object, at: str) -> Any:
            if isinstance(item, bool):
                return item
            raise _fail(at, "true or false", item)

    def walk(item: object, axis: int, at: str) -> None:
        if axis == len(shape):
            flat.append(leaf(item, at))
            return
        if not isinstance(item, list) or len(item) != shape[axis]:
            raise _fail(at, f"a list of {shape[axis]} items (shape {list(shape)})", item)
        for index, child in enumerate(item):
            walk(child, axis + 1, f"{at}[{index}]")

    walk(value, 0, where)
    return np.array(flat, dtype=dtype).reshape(tuple(shape))


def _read_box(d: dict[str, Any], where: str, depth: int, budget: _Budget) -> gspaces.Space[Any]:
    shape = _get(d, "shape", where, list, "a list of non-negative integers")
    if len(shape) > MAX_NDIM or not all(_is_int(dim) and dim >= 0 for dim in shape):
        raise _fail(f"{where}.shape", f"a list of at most {MAX_NDIM} non-negative integers", shape)
    dtype = _get_dtype(d, "dtype", where, sorted(_BOX_DTYPES))
    # low and high, and Gymnasium's masks of which bounds are finite (one byte an element)
    budget.charge(math.prod(shape) * (2 * dtype.itemsize + 2), where)
    if math.prod(dim for dim in shape if dim) * dtype.itemsize > INTP_MAX:  # (§9's rule)
        raise _fail(f"{where}.shape", "a shape of at most 2**63 - 1 bytes (but for zeros)", shape)
    bounds = {}
    for key in ("low", "high"):
        value = _need(d, key, where)
        if shape and not isinstance(value, list):  # one scalar for uniform bounds
            scalar = _to_array(value, [], dtype, f"{where}.{key}")
            bounds[key] = np.full(tuple(shape), scalar, dtype=dtype)
        else:
            bounds[key] = _to_array(value, shape, dtype, f"{where}.{key}")
    if dtype.kind == "f" and any(np.isnan(b).any() for b in bounds.values()):
        # (§7: a Box of NaN bounds, which Gymnasium refuses, is read as an Unknown space)
        return UnknownSpace(f"Box(shape={tuple(shape)}, dtype={dtype.name}) with NaN bounds")
    return _build(
        where,
        lambda: gspaces.Box(bounds["low"], bounds["high"], shape=tuple(shape), dtype=dtype),
    )


def _read_discrete(
    d: dict[str, Any], where: str, depth: int, budget: _Budget
) -> gspaces.Space[Any]:
    n = _get_int(d, "n", where, minimum=1)
    start = _get_int(d, "start", where)
    dtype = _get_dtype(d, "dtype", where, _INT_DTYPES) if "dtype" in d else np.dtype(np.int64)
    return _build(where, lambda: gspaces.Discrete(n, start=start, dtype=dtype))


def _read_multi_discrete(
    d: dict[str, Any], where: str, depth: int, budget: _Budget
) -> gspaces.Space[Any]:
    dtype = _get_dtype(d, "dtype", where, _INT_DTYPES)
    nvec_json, start_json = _need(d, "nvec", where), _need(d, "start", where)
    shape = _infer_shape(nvec_json, f"{where}.nvec")
    budget.charge(math.prod(shape) * 4 * dtype.itemsize, where)
    nvec = _to_array(nvec_json, shape, dtype, f"{where}.nvec")
    start = _to_array(start_json, shape, dtype, f"{where}.start")
    if not bool((nvec > 0).all()):
        raise _fail(f"{where}.nvec", "positive integers", d["nvec"])
    return _build(where, lambda: gspaces.MultiDiscrete(nvec, dtype=dtype, start=start))


def _read_multi_binary(
    d: dict[str, Any], where: str, depth: int, budget: _Budget
) -> gspaces.Space[Any]:
    n = _need(d, "n", where)
    if _is_int(n) and n >= 1:
        return _build(where, lambda: gspaces.MultiBinary(int(n)))
    if isinstance(n, list) and len(n) <= MAX_NDIM and all(_is_int(dim) and dim >= 1 for dim in n):
        return _build(where, lambda: gspaces.MultiBinary([int(dim) for dim in n]))
    raise _fail(
        f"{where}.n", f"a positive integer or a list of at most {MAX_NDIM} positive integers", n
    )


def _read_text(d: dict[str, Any], where: str, depth: int, budget: _Budget) -> gspaces.Space[Any]:
    min_length = _get_int(d, "min_length", where, minimum=0)
    max_length = _get_int(d, "max_length", where, minimum=min_length)
    if "charset_ranges" in d:
        charset = _charset_of_ranges(d["charset_ranges"], f"{where}.charset_ranges", budget)
    else:
        charset = _get(d, "charset", where, str, "a string of the allowed characters")
        budget.charge(_CHAR_BYTES * len(charset), where)
    return _build(where, lambda: gspaces.Text(max_length, min_length=min_length, charset=charset))


#: About what one character of a Text space takes in memory (in Gymnasium's set and tuple).
_CHAR_BYTES = 128


def _charset_of_ranges(ranges: object, where: str, budget: _Budget) -> str:
    """The characters of ``charset_ranges``: ``[first, last]`` code points, in rising order."""
    expected = "a list of [first, last] code points in rising order, within 0..0x10FFFF"
    if not isinstance(ranges, list) or not ranges:
        raise _fail(where, expected, ranges)
    end = -1
    for pair in ranges:
        if not (isinstance(pair, list) and len(pair) == 2 and all(map(_is_int, pair))):
            raise _fail(where, expected, pair)
        first, last = pair
        if not end < first <= last <= 0x10FFFF:
            raise _fail(where, expected, pair)
        budget.charge(_CHAR_BYTES * (last - first + 1), where)
        end = last
    return "".join(chr(c) for first, last in ranges for c in range(first, last + 1))


def _read_tuple(d: dict[str, Any], where: str, depth: int, budget: _Budget) -> gspaces.Space[Any]:
    items = _get(d, "spaces", where, list, "a list of spaces")
    children = [
        _from_json(item, f"{where}.spaces[{index}]", depth + 1, budget)
        for index, item in enumerate(items)
    ]
    return _build(where, lambda: gspaces.Tuple(children))


def _read_dict(d: dict[str, Any], where: str, depth: int, budget: _Budget) -> gspaces.Space[Any]:
    items = _get(d, "spaces", where, dict, "an object mapping names to spaces")
    children: OrderedDict[str, gspaces.Space[Any]] = OrderedDict()
    for key, item in items.items():
        if not isinstance(key, str):
            raise _fail(f"{where}.spaces", "string keys", key)
        children[key] = _from_json(item, f"{where}.spaces[{key!r}]", depth + 1, budget)
    # An OrderedDict keeps the recorded key order (a plain dict would be sorted).
    return _build(where, lambda: gspaces.Dict(children))


def _read_unknown(d: dict[str, Any], where: str, depth: int, budget: _Budget) -> gspaces.Space[Any]:
    budget.charge(len(_get(d, "repr", where, str, "a string")), where)
    return UnknownSpace(d["repr"])


_READERS: Mapping[str, Callable[[dict[str, Any], str, int, _Budget], gspaces.Space[Any]]] = {
    "Box": _read_box,
    "Discrete": _read_discrete,
    "MultiDiscrete": _read_multi_discrete,
    "MultiBinary": _read_multi_binary,
    "Text": _read_text,
    "Tuple": _read_tuple,
    "Dict": _read_dict,
    "Unknown": _read_unknown,
}
