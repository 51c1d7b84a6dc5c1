"""What of options and infos a Minari dataset holds, and the types it loses (for ``minari``).

Minari stores an episode's infos as a dict of per-step values (:func:`stacked_infos`) and its
options as JSON (:func:`options_of`); what it loses of their types is noted
(:func:`kind_of`, :func:`info_kinds`) and given back on import (:func:`retyped`). What it
cannot hold is counted in a :class:`Lost`, for the export's one warning.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from gym_recording._errors import LossyExportWarning
from gym_recording.format.limits import fits_int64

__all__ = ["Lost", "buffer_infos", "kind_of", "layout_of", "options_of", "retyped"]


class Lost:
    """What an export could not carry, counted, for its one warning."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def add(self, what: str) -> None:
        self.counts[what] += 1

    def warn(self, dataset_id: str) -> None:
        if self.counts:
            parts = "; ".join(
                f"{w} (in {n} episodes)" if n > 1 else w for w, n in self.counts.items()
            )
            msg = f"the Minari dataset {dataset_id} leaves out what Minari cannot hold: {parts}"
            warnings.warn(msg, LossyExportWarning, stacklevel=3)


class Unfit(ValueError):
    """A value Minari cannot hold."""


def as_json(value: Any) -> Any:
    """``value`` as plain JSON (numpy scalars and arrays as numbers and lists, tuples as lists)."""
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise Unfit("a key that is not a string")
        return {k: as_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_json(v) for v in value]
    if isinstance(value, (np.generic, np.ndarray)) and value.dtype.kind in "biufU":
        return value.tolist()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise Unfit(f"a {type(value).__name__}")


def step_values(values: list[Any], dropped: list[str], path: str) -> Any:
    """One info key's values at every step, as Minari stores them.

    That is a dict of the same keys (recursively: a key Minari cannot hold is left out and
    named in ``dropped``), an array stacked from arrays of one dtype and shape, or from
    lists or tuples of numbers (each as long), or a list of numbers, of bools or of strings.
    """
    head = values[0]
    if isinstance(head, dict):
        return stacked_infos(values, dropped, f"{path}.")
    if isinstance(head, np.ndarray) and head.ndim:
        if head.dtype.kind not in "biuf" or not all(
            isinstance(v, np.ndarray) and v.shape == head.shape and v.dtype == head.dtype
            for v in values
        ):
            raise Unfit("arrays of different shapes or dtypes")
        return np.stack(values)
    if isinstance(head, (list, tuple)):  # (their types are noted: see info_kinds)
        try:
            plain = [as_json(v) for v in values]
            stacked = np.array(plain)
        except (ValueError, OverflowError):
            stacked = None
        # (kept where the array holds the very values: no int past float64's precision)
        if (
            stacked is None
            or stacked.dtype.kind not in "biuf"
            or stacked.ndim < 2
            or 0 in stacked.shape
            or stacked.tolist() != plain
        ):
            raise Unfit("lists or tuples that are not numbers, of one length")
        return stacked
    plain = [
        v.item() if isinstance(v, np.generic) or (isinstance(v, np.ndarray) and not v.ndim) else v
        for v in values
    ]
    kinds = {type(v) for v in plain}
    if int in kinds and not all(fits_int64(v) for v in plain if type(v) is int):
        raise Unfit("ints past int64")
    if kinds == {int, float} and any(abs(v) > 2**53 for v in plain if type(v) is int):
        raise Unfit("ints, among floats, past what a float holds")
    if kinds and kinds <= {int, float}:
        return [float(v) for v in plain] if float in kinds else plain
    if kinds in ({str}, {bool}):
        return plain
    if len(kinds) == 1:
        raise Unfit(f"values of type {kinds.pop().__name__}")
    raise Unfit("values of different kinds")


def stacked_infos(infos: list[Any], dropped: list[str], path: str = "") -> dict[str, Any]:
    """An episode's infos (one per observation) as Minari's dict of per-step values.

    A key whose values Minari cannot hold is left out and named in ``dropped`` (``path``
    names the dicts it is in).
    """
    if not all(isinstance(i, dict) for i in infos):
        raise Unfit("an info that is not a dict")
    keys = list(infos[0])
    if not all(list(i) == keys for i in infos) or not all(isinstance(k, str) for k in keys):
        raise Unfit("keys that change between steps")
    out = {}
    for k in keys:
        try:
            out[k] = step_values([i[k] for i in infos], dropped, f"{path}{k}")
        except Unfit as exc:
            dropped.append(f"{path}{k} ({exc})")
    return out


def kind_of(value: Any) -> Any:
    """What Minari loses of ``value``'s types (``None``: nothing), for :func:`retyped`.

    A numpy value's dtype (and an array's shape), a tuple, and the type of a Python number,
    bool or string (Minari's columns give numpy scalars back).
    """
    if isinstance(value, np.ndarray):
        return {"dtype": value.dtype.str, "shape": list(value.shape)}
    if isinstance(value, np.generic):
        return {"dtype": value.dtype.str}
    if isinstance(value, dict):
        kinds = {k: kind_of(v) for k, v in value.items()}
        return {"dict": kinds} if any(k is not None for k in kinds.values()) else None
    if isinstance(value, (list, tuple)):
        items = [kind_of(v) for v in value]
        if isinstance(value, tuple) or not items or any(k is not None for k in items):
            return {"tuple" if isinstance(value, tuple) else "list": items}
        return None
    if isinstance(value, (bool, int, float, str)):
        return {"python": type(value).__name__}
    return None


_PYTHON = {"bool": bool, "int": int, "float": float, "str": str}


def retyped(value: Any, kind: Any) -> Any:
    """``value`` as Minari gave it back, with the types :func:`kind_of` noted.

    Where the note does not fit the value (a dataset made or edited elsewhere), as it is.
    """
    if not isinstance(kind, dict):
        return value
    try:
        if "python" in kind:
            if isinstance(value, bytes) and kind["python"] == "str":  # (HDF5's strings)
                return value.decode()
            return _PYTHON[kind["python"]](value)
        if "dtype" in kind:
            dtype = np.dtype(kind["dtype"])
            if "shape" in kind:
                return np.asarray(value, dtype).reshape(kind["shape"])
            return dtype.type(value)
        if "dict" in kind:
            return {k: retyped(v, kind["dict"].get(k)) for k, v in value.items()}
        kinds: Any = kind.get("tuple", kind.get("list"))
        if isinstance(value, np.ndarray) and value.ndim:  # (HDF5's attributes)
            value = list(value)
        fits = isinstance(value, (list, tuple)) and isinstance(kinds, list)
        if fits and len(kinds) == len(value):
            seq = [retyped(v, k) for v, k in zip(value, kinds, strict=True)]
            return tuple(seq) if "tuple" in kind else seq
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError, RecursionError):
        pass
    return value


def layout_of(infos: dict[str, Any]) -> Any:
    """The layout of Minari's dict of per-step values (:func:`stacked_infos`), as arrow types it."""
    return tuple(
        (k, layout_of(v))
        if isinstance(v, dict)
        else (k, (v.dtype.str, v.shape[1:]) if isinstance(v, np.ndarray) else type(v[0]).__name__)
        for k, v in infos.items()
    )


def info_kinds(infos: list[dict[str, Any]], stacked: dict[str, Any], lost: Lost) -> Any:
    """The types of the values at each info key (as :func:`stacked_infos` stores them) to keep.

    An array's dtype is kept by its column; a key's numbers, bools and strings get their
    type noted where it is the same at every step (else they are stored as one: said).
    ``stacked`` is what :func:`stacked_infos` made of them (its keys are the ones kept).
    """
    kinds: dict[str, Any] = {}
    for key in stacked:
        values = [i[key] for i in infos]
        if isinstance(values[0], dict):
            kinds[key] = info_kinds(values, stacked[key], lost)
        elif not (isinstance(values[0], np.ndarray) and values[0].ndim):
            seen = [kind_of(v) for v in values]
            if all(k == seen[0] for k in seen):
                kinds[key] = seen[0]
            else:
                lost.add(f"the types of info {key!r}, which change between steps")
    return {"dict": kinds} if kinds else None


def options_of(options: Any, lost: Lost, *, arrow: bool) -> dict[str, Any] | None:
    """A reset's options as Minari stores them (plain JSON), or ``None`` (said in ``lost``)."""
    if options is None:
        return None
    try:
        plain = as_json(options)
    except Unfit:
        plain = None
    if not isinstance(plain, dict):
        lost.add("reset options that are not a JSON object")
        return None
    if not arrow:  # (Minari's HDF5 storage keeps no empty dict: it stores what is left)
        empty = [] if plain else ["options"]
        plain = _without_empty_dicts(plain, "options", empty, lambda at, k: f"{at}[{k!r}]")
        if empty:
            lost.add(f"empty dicts in reset options, which HDF5 cannot hold ({', '.join(empty)})")
        if not plain:
            return None
        if not hdf5_attribute(plain):
            lost.add("reset options HDF5 cannot hold (None, lists of dicts, ints past int64)")
            return None
    return plain


def _without_empty_dicts(
    d: dict[Any, Any], at: str, empty: list[str], child: Callable[[str, Any], str]
) -> dict[Any, Any]:
    """``d`` without its dicts of no key, recursively (a dict that held only such too).

    Neither of Minari's storages keeps one everywhere: HDF5 stores options as one attribute
    per leaf (``options/a/b``), so an empty dict is gone on reading; arrow cannot store an
    info column of no key. The place of each empty one (``child(at, key)``: ``options['a']``)
    goes to ``empty``.
    """
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            if not v:
                empty.append(child(at, k))
                continue
            v = _without_empty_dicts(v, child(at, k), empty, child)
            if not v:  # (of empty dicts only: they are named)
                continue
        out[k] = v
    return out


def hdf5_attribute(value: Any) -> bool:
    """Whether Minari's HDF5 storage holds ``value`` (a dict of them, or an array's values)."""
    if isinstance(value, dict):
        return all(map(hdf5_attribute, value.values()))
    try:
        return value is not None and np.asarray(value).dtype.kind in "biufU"
    except (ValueError, OverflowError):
        return False


def buffer_infos(
    infos: list[Any] | None, lost: Lost, *, arrow: bool = False
) -> tuple[dict[str, Any] | None, Any]:
    """An episode's infos as Minari stores them, and their kinds (:func:`info_kinds`).

    With ``arrow`` (Minari's arrow storage, which cannot store a dict of no key), a dict of
    no key (one the info had, or one whose every key is left out) is left out, and said.
    """
    if infos is None or not any(infos):
        return None, None
    if all(isinstance(i, dict) for i in infos):
        # Minari holds a key at every step: keep those in every info (MuJoCo's reset info
        # has fewer keys than its steps'), say which are left out.
        common = [k for k in infos[0] if all(k in i for i in infos)]
        left = sorted({str(k) for i in infos for k in i if k not in common})
        if common and left:
            lost.add(f"info keys missing from some of an episode's infos ({', '.join(left)})")
            infos = [{k: i[k] for k in common} for i in infos]
    dropped: list[str] = []
    try:
        stacked = stacked_infos(infos, dropped)
    except Unfit as exc:
        lost.add(f"infos of episodes whose infos Minari cannot stack ({exc})")
        return None, None
    if arrow:  # (its storage cannot store an info dict of no key)
        empty: list[str] = []
        stacked = _without_empty_dicts(stacked, "", empty, lambda at, k: f"{at}.{k}" if at else k)
        dropped += [
            f"{k} (dicts of no key, which Minari's arrow storage cannot store)" for k in empty
        ]
    for key in dropped:
        lost.add(f"info key {key}")
    if not stacked:
        return None, None
    return stacked, info_kinds(infos, stacked, lost)
