"""Values (FORMAT.md §6): JSON extended by ``__type`` objects, with arrays in the blob.

A value is what an env hands over that is not a field of fixed-shape steps: reset options,
infos, Text observations, anything irregular. :func:`snapshot` copies one when it is recorded
(envs may reuse their buffers) and refuses, at that moment, what cannot be stored exactly;
:func:`encode_value` writes it, :func:`decode_value` reads it back.
"""

from __future__ import annotations

import base64
import copy
import math
from collections.abc import Mapping
from typing import Any

import msgspec
import numpy as np

from gym_recording.format.arrays import DTYPE, BatchBlob, BlobLayout, blob_dtype, brief
from gym_recording.format.limits import JSONARRAY_RATIO, MAX_INT_DIGITS, MAX_NDIM, MAX_NESTING
from gym_recording.format.wire import DTYPES, ArrayRef

__all__ = [
    "SCALAR_NAME",
    "check_int",
    "decode_value",
    "encode_value",
    "flat_dict_cost",
    "is_text",
    "json_int",
    "plain_dict",
    "snapshot",
    "snapshot_cost",
    "stack_steps",
    "value_cost",
]

#: numpy kinds a ``jsonarray`` may have: strings, bytes and objects (numbers go to the blob).
_JSONARRAY_WRITE_KINDS = frozenset("USO")
#: ... and those readers accept, for files of earlier writers (dates, and numbers).
_JSONARRAY_READ_KINDS = frozenset("biufcUSMmO")
_PLAIN = (str, int, float, bool, type(None))


_INT_BOUND = 10**MAX_INT_DIGITS


def json_int(value: int) -> bool:
    """Whether the int ``value`` takes at most :data:`MAX_INT_DIGITS` characters (§9).

    (Its digits, and a minus sign: readers count the sign.)
    """
    return -_INT_BOUND // 10 < value < _INT_BOUND


def check_int(value: int) -> int:
    """``value``, if it takes at most :data:`MAX_INT_DIGITS` characters (its minus sign too).

    Raises:
        ValueError: it takes more (JSON readers would not convert it).
    """
    if json_int(value):
        return value
    msg = (
        f"an int of {value.bit_length()} bits takes more than {MAX_INT_DIGITS} characters "
        "(digits and sign), more than JSON readers convert (FORMAT.md §9); store it as a str"
    )
    raise ValueError(msg)


def is_text(text: str) -> bool:
    """Whether ``text`` is valid Unicode (no lone surrogate): what UTF-8, and JSON, hold."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _levels(value: Any) -> int:
    """The levels of JSON objects a number is stored as (§6): 0 for a plain JSON number."""
    if isinstance(value, np.generic) and value.dtype.kind in "biufc":
        item = value.item()  # (a longdouble's is itself: no exact stored form, refused after)
        return 1 + (0 if isinstance(item, np.generic) else _levels(item))
    if isinstance(value, complex):
        return 1 + max(_levels(value.real), _levels(value.imag))
    return int(isinstance(value, float) and value - value != 0)  # (NaN, infinities)


def snapshot(value: Any, _depth: int = 0) -> Any:
    """A copy of ``value`` that later mutation by the env cannot change, checked storable.

    Arrays are copied, containers rebuilt, immutable scalars shared, a ``memoryview`` kept
    as its bytes (as it is stored); other objects are deep-copied when possible (they are
    stored as their ``repr``).

    Raises:
        ValueError: ``value`` cannot be stored exactly: it nests deeper than
            :data:`~gym_recording.format.limits.MAX_NESTING` levels (an object array's
            elements one level a dimension deeper; or it refers to itself), holds
            a string that is not valid Unicode (a lone surrogate), a masked array (its mask),
            an array of more than :data:`~gym_recording.format.limits.MAX_NDIM` dimensions,
            an array of a dtype with no exact stored form (structured, void, ``longdouble``,
            datetime), or a str or bytes array whose fixed width takes more than 16 times its
            text (which readers refuse, §9: an object array holds the same strings exactly),
            or an int of more than :data:`~gym_recording.format.limits.MAX_INT_DIGITS`
            characters (digits and sign). The message says which and what to do.
    """
    t = type(value)
    if value is None or t is bool or (t is float and (_depth <= MAX_NESTING or value - value == 0)):
        return value  # (a NaN or an infinity is stored as a JSON object, one more level)
    if t is int:
        return check_int(value)
    if _depth > MAX_NESTING or (  # (a number's JSON object takes at most 3 levels)
        _depth > MAX_NESTING - 2
        and isinstance(value, (complex, np.generic))
        and _depth + _levels(value) > MAX_NESTING + 1
    ):
        msg = (
            f"it nests deeper than {MAX_NESTING} levels (or refers to itself); "
            "record a flatter value"
        )
        raise ValueError(msg)
    if isinstance(value, str):
        if not is_text(value):
            msg = f"the string {brief(value)} is not valid Unicode (a lone surrogate)"
            raise ValueError(msg)
        return value if t is str else str.__str__(value)  # (its text: not its own __str__)
    if isinstance(value, np.generic):
        _check_dtype(value.dtype, "scalar")
        return value
    if isinstance(value, int):  # (an int subclass: bool went above)
        return check_int(value)
    if isinstance(value, (bytes, complex, float)):
        return value
    if isinstance(value, np.ndarray):
        if isinstance(value, np.ma.MaskedArray):
            msg = (
                "it holds a masked array (numpy.ma), whose mask no reader would get back; "
                "record its data and its mask as two arrays (np.ma.getdata, np.ma.getmaskarray)"
            )
            raise ValueError(msg)
        _check_dtype(value.dtype, "array")
        if value.ndim > MAX_NDIM:
            msg = (
                f"a numpy array of {value.ndim} dimensions has more than the {MAX_NDIM} "
                "readers accept (FORMAT.md §9); reshape it"
            )
            raise ValueError(msg)
        if value.dtype.kind in "US":
            _check_width(value)
        if value.dtype.kind == "O":  # (its elements nest in a list per dimension)
            out = np.empty(value.shape, dtype=object)
            for i, x in enumerate(value.reshape(-1)):
                out.reshape(-1)[i] = snapshot(x, _depth + max(1, value.ndim))
            return out
        return value.copy()
    if isinstance(value, list):
        return [snapshot(v, _depth + 1) for v in value]
    if type(value) is tuple:
        return tuple(snapshot(v, _depth + 1) for v in value)
    if isinstance(value, Mapping):
        return {snapshot(k, _depth + 1): snapshot(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, memoryview):  # (stored as its bytes: a view would see them change)
        return value.tobytes()
    try:
        return copy.deepcopy(value)
    except Exception:  # an object that refuses copying is stored as its repr at flush time
        return value


def _check_dtype(dtype: np.dtype[Any], what: str) -> None:
    if blob_dtype(dtype) is not None:
        return
    if dtype.kind in _JSONARRAY_WRITE_KINDS and dtype.fields is None and dtype.subdtype is None:
        return
    if dtype.kind in "biufc" and dtype.fields is None:
        hint = "convert it to float64 or complex128" if dtype.kind in "fc" else "convert it"
    elif dtype.kind in "Mm":
        hint = "convert it to int64 (and keep the unit) or to str"
    else:
        hint = "store its fields as separate arrays"
    msg = f"a numpy {what} of dtype {dtype} has no exact stored form (FORMAT.md §6); {hint}"
    raise ValueError(msg)


def _check_width(value: np.ndarray) -> None:
    """Refuse a str/bytes array that readers would refuse for its memory (§9, ``jsonarray``)."""
    items = value.reshape(-1).tolist()
    if value.dtype.kind == "U":
        text = sum(len(x.encode("utf-8")) + 3 for x in items)  # (quoted, and a comma)
    else:
        text = sum(len(x) * 4 // 3 + 40 for x in items)  # (base64, in a wrapper)
    if value.size * max(value.dtype.itemsize, 8) > JSONARRAY_RATIO * (text + 48):
        msg = (
            f"a numpy array of dtype {value.dtype} and {value.size} elements takes "
            f"{value.nbytes} bytes for {text} bytes of text, more than readers accept "
            f"({JSONARRAY_RATIO}x, FORMAT.md §9); store it as an object array "
            "(value.astype(object)) or a list"
        )
        raise ValueError(msg)


def value_cost(value: Any, _depth: int = 0) -> int:
    """About what ``value`` (a snapshot) takes in a batch: its JSON parsed, and its arrays.

    Errs high, so that what the writer counts bounds what a reader's
    :func:`~gym_recording.format.wire.json_cost` finds in the file.
    """
    t = type(value)
    cost = _SCALAR_COST.get(t)
    if cost is not None:
        if t is float and value - value != 0:  # (NaN, an infinity: a JSON object)
            return _NONFINITE_COST
        if t is int and not -_I64 <= value < _I64:  # (its digits)
            return cost + value.bit_length() // 2
        return cost
    if t is str:
        return _str_cost(value)
    if isinstance(value, np.ndarray):
        if blob_dtype(value.dtype) is not None:
            return 512 + value.nbytes
        items = value.reshape(-1).tolist()  # (an object array's elements as they are)
        return 256 + value.size * 8 + sum(value_cost(x, _depth + 1) for x in items)
    if isinstance(value, (list, tuple)):
        return 128 + sum(value_cost(x, _depth + 1) for x in value)
    if isinstance(value, Mapping):
        return 512 + sum(value_cost(k) + value_cost(x, _depth + 1) for k, x in value.items())
    if isinstance(value, (bytes, bytearray)):
        return 128 + 2 * len(value)
    return 256 + (_str_cost(_repr(value)) if _depth < MAX_NESTING else 0)


#: The :func:`value_cost` of a Python or numpy scalar, by its type: a numpy one is
#: {"__type": "scalar", "dtype": ..., "value": ...}, its objects (a non-finite float and a
#: complex value bring more), keys, separators and digits.
_SCALAR_COST: dict[type, int] = {
    np.dtype(n).type: 2048 if np.dtype(n).kind == "c" else 1024 for n in DTYPES
}
_SCALAR_COST.update({float: 64, int: 64, bool: 64, type(None): 64})
#: The :func:`value_cost` of a non-finite float: ``{"__type": "float", "value": "nan"}``.
_NONFINITE_COST = 512
_I64 = 1 << 63
#: The §6.1 name of each numpy scalar type of a blob dtype.
SCALAR_NAME: dict[type, str] = {np.dtype(n).type: n for n in DTYPES}
#: The :func:`value_cost` of the ASCII keys seen (an env's info keys repeat every step).
_KEY_COST: dict[str, int] = {}


def flat_dict_cost(value: dict[Any, Any]) -> int | None:
    """A flat dict's :func:`value_cost`; ``None`` if it is not flat.

    Flat: ASCII str keys and Python or numpy scalars (an env's usual info).
    """
    cost = 512
    keys = _KEY_COST
    for k, v in value.items():
        c = _SCALAR_COST.get(type(v))
        if c is None or (type(v) is int and not -_I64 <= v < _I64):
            return None  # (an int of many digits: counted by value_cost, checked by snapshot)
        if type(v) is float and v - v != 0:
            c = _NONFINITE_COST
        kc = keys.get(k) if type(k) is str else None
        if kc is None:
            if type(k) is not str or not k.isascii():
                return None
            kc = _str_cost(k)
            if len(keys) < 4096:
                keys[k] = kc
        cost += c + kc
    return cost


def snapshot_cost(value: Any) -> tuple[Any, int]:
    """``(snapshot(value), value_cost(snapshot(value)))``, the common info quickly.

    A flat dict (see :func:`flat_dict_cost`: an env's usual info) is copied and counted in
    one pass; anything else as the two functions do.

    Raises:
        ValueError: as :func:`snapshot`.
    """
    if type(value) is dict:
        cost = flat_dict_cost(value)
        if cost is not None:
            return dict(value), cost
    kept = snapshot(value)
    return kept, value_cost(kept)


def _str_cost(text: str) -> int:
    """A string's :func:`value_cost`: what a reader counts of it.

    Its brackets and separators count too: :func:`~gym_recording.format.wire.json_cost`
    cannot tell them from JSON's.
    """
    tokens = 64 * text.count("[") + 240 * text.count("{") + 32 * (text.count(",") + text.count(":"))
    return 64 + 2 * len(text) + tokens


def _encode_float(x: float) -> Any:
    if math.isfinite(x):
        return x
    return {"__type": "float", "value": "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")}


def plain_dict(value: Mapping[Any, Any]) -> bool:
    """Whether a dict is stored as a JSON object (§6): str keys, none of them ``__type``."""
    return "__type" not in value and all(type(k) is str for k in value)


def encode_value(value: Any, layout: BlobLayout, _depth: int = 0) -> Any:
    """One value (§6) as JSON data for :func:`~gym_recording.format.wire.encode`.

    Arrays of a blob dtype go into ``layout``; everything JSON cannot hold as it is gets a
    ``__type`` object. The result holds only str-keyed dicts, lists, strings, ints, finite
    floats, bools, ``None`` and :class:`~gym_recording.format.wire.ArrayRef`.
    """
    t = type(value)
    if value is None or t is bool or t is str or t is int:
        return value
    if t is float:
        return _encode_float(value)
    name = SCALAR_NAME.get(t)
    if name is not None:  # a numpy scalar of a blob dtype
        return {"__type": "scalar", "dtype": name, "value": encode_value(value.item(), layout)}
    if _depth > MAX_NESTING:
        msg = f"value nests deeper than {MAX_NESTING} levels"
        raise ValueError(msg)
    if t is dict and not value:  # (an info whose every key went to its info_columns)
        return {}
    if t is dict and plain_dict(value):
        return {k: encode_value(v, layout, _depth + 1) for k, v in value.items()}
    if isinstance(value, np.generic):
        name = blob_dtype(value.dtype)
        if name is not None:
            return {"__type": "scalar", "dtype": name, "value": encode_value(value.item(), layout)}
        if isinstance(value, (str, bytes)):  # (np.str_, np.bytes_: as their text, bytes)
            return encode_value(value.item(), layout)
        return {"__type": "repr", "repr": _repr(value)}
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return _encode_float(float(value))
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, complex):
        return {
            "__type": "complex",
            "real": _encode_float(value.real),
            "imag": _encode_float(value.imag),
        }
    if isinstance(value, np.ndarray):
        if blob_dtype(value.dtype) is not None:
            return layout.add(value)
        items = value.reshape(-1).tolist()  # (an object array's elements as they are)
        return {
            "__type": "jsonarray",
            "dtype": value.dtype.str,
            "shape": list(value.shape),
            "data": _nest([encode_value(x, layout, _depth + 1) for x in items], value.shape),
        }
    if isinstance(value, list):
        return [encode_value(v, layout, _depth + 1) for v in value]
    if isinstance(value, tuple):
        return {"__type": "tuple", "items": [encode_value(v, layout, _depth + 1) for v in value]}
    if isinstance(value, Mapping):
        if plain_dict(value):
            return {k: encode_value(v, layout, _depth + 1) for k, v in value.items()}
        return {
            "__type": "mapping",
            "items": [
                [encode_value(k, layout, _depth + 1), encode_value(v, layout, _depth + 1)]
                for k, v in value.items()
            ],
        }
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"__type": "bytes", "base64": base64.b64encode(bytes(value)).decode("ascii")}
    return {"__type": "repr", "repr": _repr(value)}


def _repr(value: Any) -> str:
    """``repr(value)`` as JSON can hold it, or what went wrong (the value is stored as it)."""
    try:
        text = repr(value)
    except Exception as exc:
        text = f"<{type(value).__qualname__} object; repr() raised {exc!r}>"
    return text if text.isascii() else text.encode("utf-8", "backslashreplace").decode("utf-8")


def _nest(flat: list[Any], shape: tuple[int, ...]) -> Any:
    """``flat`` (C order) as nested lists of ``shape``."""
    if not shape:
        return flat[0]
    if not flat:  # (a 0 in the shape: lists down to it, each empty there)
        return [_nest(flat, shape[1:]) for _ in range(shape[0])]
    for n in reversed(shape[1:]):
        flat = [flat[i : i + n] for i in range(0, len(flat), n)]
    return flat


def decode_value(v: Any, blob: BatchBlob, where: str, _depth: int = 0) -> Any:
    """One value (§6) decoded from parsed JSON; arrays are views of ``blob``."""
    if type(v) in _PLAIN:
        return v  # (else a list or a dict: parsed JSON has no other kinds)
    if _depth > MAX_NESTING:
        raise blob.fail(where, f"values nest deeper than {MAX_NESTING} levels")
    if type(v) is list:
        return [decode_value(x, blob, where, _depth + 1) for x in v]
    if "__type" not in v:
        return {k: decode_value(x, blob, where, _depth + 1) for k, x in v.items()}
    t = v["__type"]
    if t == "ndarray":
        try:
            ref = msgspec.convert(v, ArrayRef)
        except msgspec.ValidationError as exc:
            if str(exc).endswith("`$.dtype`"):  # (FORMAT.md §6.1: a version 1 writer's, say)
                msg = f"an array of a dtype gym-recording does not read (FORMAT.md §6.1): {exc}"
                raise blob.fail(where, msg) from None
            raise blob.fail(where, f"not an ndarray reference: {exc}") from None
        return blob.array(ref, where)
    if t == "float":
        val = v.get("value")
        if val not in ("nan", "inf", "-inf"):
            raise blob.fail(
                where, f"expected a non-finite float 'nan', 'inf' or '-inf', got {brief(val)}"
            )
        return float(val)
    if t == "scalar":
        return _decode_scalar(v, blob, where, _depth)
    if t == "complex":
        re_ = decode_value(v.get("real"), blob, where, _depth + 1)
        im = decode_value(v.get("imag"), blob, where, _depth + 1)
        if not all(type(x) in (int, float) for x in (re_, im)):
            raise blob.fail(where, "expected numbers for a complex value's real and imag")
        try:
            return complex(re_, im)
        except OverflowError:
            raise blob.fail(where, "a complex value's real or imag is out of range") from None
    if t == "tuple":
        items = v.get("items")
        if type(items) is not list:
            raise blob.fail(where, f"expected a tuple's items to be a list, got {brief(items)}")
        return tuple(decode_value(x, blob, where, _depth + 1) for x in items)
    if t == "mapping":
        return _decode_mapping(v, blob, where, _depth)
    if t == "bytes":
        data = v.get("base64")
        try:
            if type(data) is not str:
                raise ValueError
            return base64.b64decode(data, validate=True)
        except ValueError:
            raise blob.fail(where, "expected base64 data for bytes") from None
    if t == "jsonarray":
        return _decode_jsonarray(v, blob, where, _depth)
    if t == "repr":
        r = v.get("repr")
        if type(r) is not str:
            raise blob.fail(where, "expected a string in a repr value")
        return r
    raise blob.fail(where, f"unknown value type {brief(t)}")


def _decode_scalar(v: dict[str, Any], blob: BatchBlob, where: str, depth: int) -> Any:
    dt = v.get("dtype")
    if type(dt) is not str or dt not in DTYPE:
        raise blob.fail(where, f"expected a scalar dtype from the allow-list, got {brief(dt)}")
    inner = decode_value(v.get("value"), blob, where, depth + 1)
    kinds = _EXACT_KINDS[DTYPE[dt].kind]
    if type(inner) not in kinds:  # (§9: true is no int, 1 no bool, 2.0 no int64)
        names = " or ".join(k.__name__ for k in kinds)
        raise blob.fail(where, f"expected a {names} for a {dt} scalar, got {brief(inner)}")
    try:
        with np.errstate(all="ignore"):  # (a value the dtype cannot hold is refused below)
            out = DTYPE[dt].type(inner)
            nan = inner != inner and out.dtype.kind in "fc"  # (NaN is NaN in float dtypes)
            exact = out.item() == inner or nan
    except (TypeError, ValueError, OverflowError) as exc:
        raise blob.fail(where, f"scalar {brief(inner)} is not a valid {dt}: {exc}") from None
    if not exact:
        msg = f"scalar {brief(inner)} does not fit dtype {dt} (it would read as {out})"
        raise blob.fail(where, msg)
    return out


#: The JSON values a scalar's value or a jsonarray's element of each dtype kind may be: it
#: must read back as the JSON gives it (§9).
_EXACT_KINDS: dict[str, tuple[type, ...]] = {
    "b": (bool,),
    "i": (int,),
    "u": (int,),
    "f": (int, float),
    "c": (int, float, complex),
    "U": (str,),
    "S": (bytes,),
}


def _decode_mapping(v: dict[str, Any], blob: BatchBlob, where: str, depth: int) -> Any:
    items = v.get("items")
    if type(items) is not list or not all(type(p) is list and len(p) == 2 for p in items):
        raise blob.fail(where, "expected a mapping's items to be a list of [key, value] pairs")
    out = {}
    for k, x in items:
        key = decode_value(k, blob, where, depth + 1)
        if isinstance(key, list):
            key = tuple(key)
        try:
            out[key] = decode_value(x, blob, where, depth + 1)
        except TypeError:
            raise blob.fail(where, f"mapping key {brief(key)} is not hashable") from None
    return out


def _decode_jsonarray(v: dict[str, Any], blob: BatchBlob, where: str, depth: int) -> Any:
    """``{"__type": "jsonarray"}``: an array of a dtype that has no blob form.

    The dtype must be a plain string, bytes, date, number or object dtype (no structured or
    void dtypes); the nested lists must match the shape exactly; the array's bytes are
    charged to the batch's budget before it is made. An object array holds decoded values
    (§6) only, placed element by element: nothing but what the JSON describes.
    """
    dt, shape = v.get("dtype"), v.get("shape")
    if type(dt) is not str or len(dt) > 32:
        raise blob.fail(where, f"expected a jsonarray dtype string, got {brief(dt)}")
    if not (
        type(shape) is list
        and len(shape) <= MAX_NDIM
        and all(type(d) is int and d >= 0 for d in shape)
    ):
        raise blob.fail(
            where,
            f"expected a jsonarray shape of at most {MAX_NDIM} non-negative ints, "
            f"got {brief(shape)}",
        )
    try:
        npdt = np.dtype(dt)
    except Exception:  # numpy's dtype parser raises TypeError, ValueError, ...
        raise blob.fail(where, f"jsonarray dtype {brief(dt)} is not a numpy dtype") from None
    if npdt.kind not in _JSONARRAY_READ_KINDS or npdt.fields is not None or npdt.subdtype:
        raise blob.fail(where, f"jsonarray dtype {brief(dt)} is not allowed")
    if not npdt.itemsize:  # ("<U", "S": numpy would size them by the longest value)
        raise blob.fail(where, f"expected a jsonarray dtype of a fixed width, got {brief(dt)}")
    # Walk the nested lists along the shape: exact lengths, no guessing by numpy.
    level = [v.get("data")]
    for n in shape:
        nxt: list[Any] = []
        for item in level:
            if type(item) is not list or len(item) != n:
                raise blob.fail(
                    where, f"jsonarray data does not have the shape {brief(shape)} it declares"
                )
            nxt.extend(item)
        level = nxt
    blob.charge(len(level) * max(npdt.itemsize, 8), where)
    values = [decode_value(x, blob, where, depth + 1) for x in level]
    try:
        if npdt.kind == "O":
            arr = np.empty(len(values), dtype=object)
            for i, x in enumerate(values):
                arr[i] = x
        else:
            if any(isinstance(x, (list, dict, tuple, np.ndarray)) for x in values):
                raise ValueError("expected a scalar for every element")
            with np.errstate(all="ignore"):  # (a value the dtype cannot hold: refused below)
                arr = np.array(values, dtype=npdt)
            if npdt.kind in _EXACT_KINDS:
                _check_exact(arr, values, npdt)
        return arr.reshape(shape)
    except (TypeError, ValueError, OverflowError) as exc:
        raise blob.fail(where, f"bad jsonarray of {brief(dt)}: {str(exc)[:120]}") from None


def _check_exact(arr: np.ndarray, values: list[Any], dtype: np.dtype[Any]) -> None:
    """Refuse elements that ``dtype`` does not hold exactly.

    That is, values of another type (``null`` as a float, ``"a"`` as a bool), out of the
    dtype's range, or longer than its width (numpy would cut them short).
    """
    types = _EXACT_KINDS[dtype.kind]
    for x, y in zip(values, arr.tolist(), strict=True):
        if type(x) not in types or (x != y and x == x):  # (NaN is NaN in float dtypes)
            raise ValueError(f"element {brief(x)} is not a {dtype} value (it would read as {y!r})")


def stack_steps(values: list[Any]) -> Any:
    """Per-step values, stacked into one array if they are arrays of one dtype and shape.

    Version 1 stored an image per step this way. Other values stay the list they are.
    """
    if values and all(type(x) is np.ndarray for x in values):
        first = values[0]
        if all(x.dtype == first.dtype and x.shape == first.shape for x in values):
            out = np.stack(values)
            out.flags.writeable = False
            return out
    return values
