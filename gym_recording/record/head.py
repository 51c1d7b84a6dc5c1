"""What a writer's manifest says besides its batches (FORMAT.md §3).

The env's id, spec and spaces, the library versions, the user's metadata and the frame rate
of rendered frames.
"""

from __future__ import annotations

import datetime
import json
import platform
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from gym_recording._errors import RecordingError
from gym_recording._version import __version__
from gym_recording.format.limits import MAX_INT_DIGITS
from gym_recording.format.spaces import space_to_json
from gym_recording.format.values import check_int
from gym_recording.format.wire import FORMAT_NAME, FORMAT_VERSION

__all__ = ["env_spec_json", "library_versions", "manifest_head", "plain_json"]


def plain_json(obj: Any, what: str) -> Any:
    """``obj`` as plain JSON (numpy scalars and arrays become numbers and lists).

    Raises:
        RecordingError: ``obj`` holds something JSON cannot represent (objects, NaN, a dict
            key that is not a str, ...).
    """

    def default(o: Any) -> Any:
        if isinstance(o, (np.generic, np.ndarray)):
            return o.tolist()
        if isinstance(o, tuple):
            return list(o)
        raise TypeError(f"{type(o).__name__} is not JSON-serialisable")

    def checked(digits: str) -> int:  # (a reader's limit counts the sign: §9)
        return check_int(int(digits))

    if found := _not_a_str_key(obj):  # (JSON would give it back as a str, or refuse it)
        key = found[0]
        try:
            as_text = next(iter(json.loads(json.dumps({key: 0}))))
            back = f"it would read back as {json.dumps(as_text)}"
        except (TypeError, ValueError):
            back = "JSON cannot hold it"
        msg = (
            f"expected {what}'s dict keys to be strings (JSON's), got {key!r} "
            f"({type(key).__name__}); {back}"
        )
        raise RecordingError(msg)
    try:
        return json.loads(json.dumps(obj, allow_nan=False, default=default), parse_int=checked)
    except (TypeError, ValueError) as exc:
        why = str(exc)
        if "integer string conversion" in why:  # (Python's own limit, which its advice lifts)
            why = f"an int has more than {MAX_INT_DIGITS} digits, more than readers convert"
        msg = f"expected {what} to be plain JSON (dicts, lists, numbers, strings), but {why}"
        raise RecordingError(msg) from exc


def _not_a_str_key(obj: Any, depth: int = 0) -> tuple[Any, ...]:
    """``(key,)``: the first dict key in ``obj`` that is not a str; ``()`` if there is none."""
    if depth > 100:  # (json.dumps says how deep is too deep)
        return ()
    if isinstance(obj, dict):
        for k, v in obj.items():
            if not isinstance(k, str):  # (np.str_ too: JSON gives back the same str)
                return (k,)
            if found := _not_a_str_key(v, depth + 1):
                return found
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            if found := _not_a_str_key(v, depth + 1):
                return found
    return ()


def library_versions() -> dict[str, str | None]:
    """The versions of gym-recording, NumPy, Python, and Gymnasium or Gym where imported."""
    versions: dict[str, str | None] = {
        "gym_recording": __version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
    }
    for mod in ("gymnasium", "gym"):
        m = sys.modules.get(mod)
        versions[mod] = getattr(m, "__version__", None) if m is not None else None
    return versions


#: The most bytes of JSON an env spec takes in a manifest whole (which readers bound:
#: ``MAX_MANIFEST_BYTES``), and one of its kwargs in a summary.
_SPEC_BYTES = 1 << 20
_KWARG_BYTES = 1 << 16


def env_spec_json(spec: Any) -> Any:
    """An env spec (``env.spec``) as JSON for the manifest.

    A spec that JSON refuses, or of more than ``_SPEC_BYTES`` of it, gives a summary instead:
    its id and the other plain fields, its kwargs that are plain JSON of at most
    ``_KWARG_BYTES`` (numpy scalars as numbers), and the names of the others under
    ``"kwargs_not_recorded"`` (callables, objects, what holds an array or a dict key not a
    str, which would come back as lists and str keys), which a replay then lacks, as it
    lacks the wrappers named under ``"wrappers_not_recorded"``.
    """
    if spec is None:
        return None
    to_json = getattr(spec, "to_json", None)
    if callable(to_json):
        try:
            text = to_json()
        except Exception:  # kwargs that do not serialise (callables, objects, numpy values)
            text = None
        if isinstance(text, str) and len(text) <= _SPEC_BYTES:
            return json.loads(text)
    summary: dict[str, Any] = {}
    for key in ("id", "entry_point", "max_episode_steps", "reward_threshold", "nondeterministic"):
        val = getattr(spec, key, None)
        summary[key] = val if isinstance(val, (str, int, float, bool, type(None))) else repr(val)
    kwargs = getattr(spec, "kwargs", None)
    if isinstance(kwargs, Mapping):
        summary["kwargs"], summary["kwargs_not_recorded"] = {}, []
        for k, v in kwargs.items():
            kept, value = _small_json(v)
            if kept:
                summary["kwargs"][str(k)] = value
            else:
                summary["kwargs_not_recorded"].append(str(k))
    wrappers = getattr(spec, "additional_wrappers", None) or ()
    names = [str(getattr(w, "name", w)) for w in wrappers if not _ours(w)]
    if names:  # (a replay makes the env without them: it can say so)
        summary["wrappers_not_recorded"] = names
    return summary


def _ours(wrapper: Any) -> bool:
    """Whether a spec's wrapper is a recording wrapper (which a replay leaves out)."""
    return str(getattr(wrapper, "entry_point", "")).startswith("gym_recording")


def _small_json(value: Any) -> tuple[bool, Any]:
    """Whether a summary keeps kwarg ``value`` (see :func:`env_spec_json`), and as what."""
    if not _json_alike(value):
        return False, None
    try:
        out = plain_json(value, "")
    except RecordingError:
        return False, None
    return len(json.dumps(out)) <= _KWARG_BYTES, out


def _json_alike(value: Any, depth: int = 0) -> bool:
    """Whether JSON gives ``value`` back of its kinds: no array, no dict key but a str."""
    if isinstance(value, np.ndarray) or depth > 100:
        return False
    if isinstance(value, dict):
        return all(type(k) is str and _json_alike(v, depth + 1) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(_json_alike(v, depth + 1) for v in value)
    return True


def manifest_head(
    writer_id: str,
    *,
    env_id: str | None,
    env_spec: Any,
    observation_space: Any,
    action_space: Any,
    metadata: Mapping[str, Any] | None,
    record_infos: bool,
    render_fps: float | None,
) -> dict[str, Any]:
    """A writer's manifest keys other than ``batches`` and ``segment``, checked.

    Raises:
        RecordingError: ``env_spec`` or ``metadata`` is not plain JSON, or a string of the
            head holds a lone surrogate, which UTF-8 cannot (FORMAT.md §2).
        TypeError: ``metadata`` is not a mapping, ``env_id`` not a str (or ``None``), or
            ``record_infos`` not a bool.
        ValueError: ``render_fps`` is not a number in (0, 1e6] (or ``None``).
    """
    if metadata is not None and not isinstance(metadata, Mapping):
        msg = f"expected metadata to be a dict, got {type(metadata).__name__}"
        raise TypeError(msg)
    if env_id is not None and not isinstance(env_id, str):  # (§3: a str or null)
        raise TypeError(f"expected env_id to be a str or None, got {type(env_id).__name__}")
    if not isinstance(record_infos, (bool, np.bool_)):
        msg = f"expected record_infos to be a bool, got {type(record_infos).__name__}"
        raise TypeError(msg)
    if render_fps is not None and (
        isinstance(render_fps, bool)
        or not isinstance(render_fps, (int, float, np.integer, np.floating))
        or not 0 < render_fps <= 1e6  # (not float(): an int past a float's range)
    ):
        msg = "expected render_fps to be a number in (0, 1e6] (frames a second) or None, got "
        msg += f"{render_fps!r:.40}"
        raise ValueError(msg)
    head = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "writer": writer_id,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds"),
        "env_id": None if env_id is None else str.__str__(env_id),
        "env_spec": plain_json(env_spec, "env_spec") if env_spec is not None else None,
        "observation_space": space_to_json(observation_space),
        "action_space": space_to_json(action_space),
        "versions": library_versions(),
        "metadata": plain_json(dict(metadata or {}), "metadata"),
        "record_infos": bool(record_infos),
        "render_fps": None if render_fps is None else float(render_fps),
    }
    try:
        json.dumps(head, ensure_ascii=False).encode()
    except UnicodeEncodeError as exc:  # (else every batch's manifest would fail to encode)
        bad = exc.object[max(0, exc.start - 20) : exc.end + 20]
        msg = f"expected the env id, spec, spaces and metadata to be UTF-8 text, got {bad!r}"
        raise RecordingError(f"{msg}, which holds a lone surrogate") from None
    return head
