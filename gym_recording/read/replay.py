"""Replay a recorded episode through its environment: rebuilt as it was made, rendered, compared.

The environment is made from the spec its writer recorded (its id and the keyword arguments
it was made with), so that ``gym.make("LunarLander-v3", continuous=True)`` replays as the
continuous env. A spec names code (an entry point, wrappers), and a recording may come from
anyone: unless the caller trusts it, only an environment registered in this process with the
recorded entry point is made, inside none of the recorded wrappers but Gymnasium's own (not
``RecordVideo`` or ``HumanRendering``, which write files or open windows).
"""

from __future__ import annotations

import copy
import html
import importlib.util
import json
import math
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from gym_recording._errors import NoFramesError, RecordingError, ReplayMismatchWarning
from gym_recording.format.fields import field_step, map_leaves
from gym_recording.read.notebook import _STYLE, Animation, _kv_table, animate

__all__ = ["ReplayResult", "install_hint", "make_env", "replay_episode"]

#: The package of gym-recording's wrappers (``gym_recording:TraceRecordingWrapper``), whose
#: entry points a replayed spec leaves out.
_OURS = "gym_recording"

# (Episode is not imported: it imports this module.)
Episode = Any


def install_hint(exc: BaseException) -> str:
    """What to install, where making an env failed (``exc``) as its package is missing; or "".

    Gymnasium raises an import error of its own, whose cause names the module.
    """
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ModuleNotFoundError) and seen.name:
            top = seen.name.split(".")[0]
            if importlib.util.find_spec(top) is None:  # (the env's package is missing)
                package = top.replace("_", "-")
                return f"; install the package that provides it (`pip install {package}`, say)"
        seen = seen.__cause__
    return ""


def make_env(
    ep: Episode, env_id: str | None, kwargs: dict[str, Any], missing: list[str], trust: bool
) -> Any:
    """The environment ``ep`` was recorded in, made with ``kwargs`` over the recorded ones.

    ``missing``: the kwargs its summary did not record and ``kwargs`` lacks, for an error.

    With ``env_id``, that environment (by id) instead. Otherwise the recorded spec, when it
    is one that ``gymnasium.envs.registration.EnvSpec.from_json`` reads, is made as it is
    (its entry point imported); a summary (a spec whose kwargs JSON refused) is made by its
    id with the kwargs it kept; else the recorded id. Unless ``trust``, the recorded code is
    checked first (:func:`_refuse_untrusted`).

    Raises:
        RecordingError: no environment is recorded, it names code this process has not
            registered (and not ``trust``), or it cannot be made.
    """
    import gymnasium
    from gymnasium.envs.registration import EnvSpec

    spec: Any = None
    recorded = ep.env_spec if isinstance(ep.env_spec, dict) else {}
    if env_id is None and _summary_kwargs(recorded) is not None:  # (a summary: record/head.py)
        kwargs = {**copy.deepcopy(recorded["kwargs"]), **kwargs}  # (the env may change them)
        if recorded.get("max_episode_steps") is not None:
            kwargs.setdefault("max_episode_steps", recorded["max_episode_steps"])
    elif env_id is None and recorded.get("entry_point"):
        try:
            spec = EnvSpec.from_json(json.dumps(ep.env_spec))
        except Exception:  # (an older summary, of kwargs as reprs; a spec made elsewhere)
            spec = None
        else:  # (not a recording wrapper inside: replaying would record into its directory)
            wrappers = spec.additional_wrappers
            kept = [w for w in wrappers if re.split("[.:]", str(w.entry_point))[0] != _OURS]
            spec = replace(spec, additional_wrappers=tuple(kept))
    target = spec if spec is not None else (env_id or ep.env_id)
    if not target:
        msg = (
            f"episode {ep.index} does not say which environment recorded it; "
            "pass env_id=... to replay it"
        )
        raise RecordingError(msg)
    if env_id is None and not trust:
        _refuse_untrusted(ep, target)
    try:
        return gymnasium.make(target, **kwargs)
    except Exception as exc:  # unknown id, missing extra, unsupported render mode
        name = getattr(target, "id", target)
        why = str(exc).rstrip(".")
        msg = f"cannot make environment {name!r} to replay episode {ep.index}: {why}"
        msg += install_hint(exc)
        if missing:
            msg += (
                f"; its arguments {', '.join(missing)} were not recorded (not plain JSON, or "
                "too large): pass them in env_kwargs"
            )
        lost = [w.name for w in getattr(spec, "additional_wrappers", ()) if w.kwargs is None]
        if lost:  # (wrappers that do not record their arguments cannot be made again)
            msg += (
                f". Its recorded wrappers {', '.join(lost)} cannot be made again; pass "
                f"env_id={name!r} to replay it without its wrappers, or make them inherit "
                "gymnasium.utils.RecordConstructorArgs"
            )
        raise RecordingError(msg) from exc


def _entry_name(entry_point: Any) -> str:
    """An entry point as a spec's JSON names it (``"module:name"``)."""
    if isinstance(entry_point, str):
        return entry_point
    return f"{getattr(entry_point, '__module__', '')}:{getattr(entry_point, '__qualname__', '')}"


def _refuse_untrusted(ep: Episode, target: Any) -> None:
    """Refuse a recorded env that names code this process has not registered.

    ``target`` is the recorded spec (an ``EnvSpec``) or id. ``gymnasium.make`` imports a
    spec's entry point and wrappers and calls them with its kwargs, and an id of the form
    ``"module:Name-v0"`` imports ``module``: a recording made by someone else could name any
    of them. Allowed: a registered id (no module in it) whose registered entry point is the
    recorded one, inside Gymnasium's own wrappers only (a recording wrapper is left out).

    Raises:
        RecordingError: it names other code; the message says how to replay it.
    """
    import gymnasium

    name = str(getattr(target, "id", target))
    registered = gymnasium.registry.get(name)
    entry = getattr(target, "entry_point", None)
    if ":" in name:
        why, how = f"its id {name!r} names a module to import", "pass env_id=... to replay another"
    elif registered is None:
        why = f"{name!r} is not registered in this process" + (
            f" (its recorded entry point is {entry!r})" if entry else ""
        )
        how = "import the package that registers it and replay again, or pass env_id=..."
    elif isinstance(target, str):
        return
    elif _entry_name(entry) != _entry_name(registered.entry_point):
        why = (
            f"{name!r} is recorded with the entry point {_entry_name(entry)!r}, but registered "
            f"here with {_entry_name(registered.entry_point)!r}"
        )
        how = f"pass env_id={name!r} to replay the env registered here"
    elif any(not _gymnasium_wrapper(w.entry_point) for w in target.additional_wrappers):
        wrappers = ", ".join(str(w.entry_point) for w in target.additional_wrappers)
        why = f"{name!r} is recorded inside the wrappers {wrappers}"
        how = f"pass env_id={name!r} to replay it without them"
    else:
        return
    msg = (
        f"episode {ep.index} cannot be replayed as recorded: {why}. A recording can name any "
        "code for a replay to run, so only environments registered in this process are made "
        f"from it, inside none but Gymnasium's own wrappers: {how}, or pass "
        "trust_env_spec=True if you trust whoever made the recording"
    )
    raise RecordingError(msg)


#: Gymnasium's wrappers that write files or open windows where their kwargs say.
_NOT_FROM_A_FILE = frozenset({"RecordVideo", "HumanRendering"})


def _gymnasium_wrapper(entry_point: Any) -> bool:
    """Whether a recorded wrapper's entry point is one of Gymnasium's wrapper classes.

    Not one that writes files or opens a window (:data:`_NOT_FROM_A_FILE`).
    """
    import gymnasium

    module, _, attr = str(entry_point).partition(":")
    if module.split(".")[:2] != ["gymnasium", "wrappers"] or attr in _NOT_FROM_A_FILE:
        return False
    try:  # (a module of Gymnasium's: importing it runs nothing of the recording's)
        found = getattr(importlib.import_module(module), attr, None)
    except Exception:  # (not one: no module of that name; one that needs jax, say)
        return False
    return isinstance(found, type) and issubclass(found, gymnasium.Wrapper)


def _summary_kwargs(spec: dict[str, Any]) -> list[str] | None:
    """The kwargs a spec's summary did not record (record/head.py); ``None``: no summary."""
    left, kept = spec.get("kwargs_not_recorded"), spec.get("kwargs")
    if isinstance(left, list) and isinstance(kept, dict):
        return [str(k) for k in left]
    return None


@dataclass(frozen=True)
class ReplayResult:
    """What replaying a recorded episode through its environment gave.

    Attributes:
        env_id: The environment replayed.
        frames: The rendered frames ``[T, H, W, C]`` uint8 (reset first, then one per step), or
            ``None`` when rendering was off.
        reproduced: Whether every replayed observation and reward matched the recorded one.
        first_mismatch: The first step that did not match: ``0`` is the reset observation,
            ``t`` the observation and reward of step ``t``; ``None`` if all matched.
        steps: The number of recorded actions replayed.
        message: A sentence saying what matched or what did not.
        observations: The replayed observations, one per replayed step plus the reset.
    """

    env_id: str
    frames: np.ndarray | None
    reproduced: bool
    first_mismatch: int | None
    steps: int
    message: str
    observations: list[Any] = field(default_factory=list, repr=False)

    def __repr__(self) -> str:  # (the frames' shape, not their pixels)
        frames = (
            "None" if self.frames is None else f"<array {self.frames.shape} {self.frames.dtype}>"
        )
        return (
            f"ReplayResult(env_id={self.env_id!r}, reproduced={self.reproduced}, "
            f"first_mismatch={self.first_mismatch}, steps={self.steps}, frames={frames}, "
            f"observations=<list of {len(self.observations)}>, message={self.message!r})"
        )

    def show(self, *, fps: float = 30, max_frames: int = 300) -> Animation:
        """The rendered frames as an inline animation with a step slider."""
        if self.frames is None or len(self.frames) == 0:
            msg = "this replay rendered no frames (it ran with render=False)"
            raise NoFramesError(msg)
        return animate(self.frames, fps=fps, max_frames=max_frames)

    def _repr_html_(self) -> str:
        rows = [
            ("env", self.env_id),
            ("steps replayed", self.steps),
            ("reproduced", self.reproduced),
            ("first mismatch", "-" if self.first_mismatch is None else self.first_mismatch),
            ("frames", "-" if self.frames is None else f"{self.frames.shape}"),
        ]
        return (
            _STYLE
            + '<div class="gymrec">'
            + _kv_table(rows, "Replay")
            + f"<p>{html.escape(self.message)}</p></div>"
        )


def _same(got: Any, want: Any, rtol: float, atol: float) -> tuple[bool, float]:
    """Whether a replayed value equals a recorded one; also the max abs difference seen."""
    if isinstance(want, dict):
        if not isinstance(got, dict) or list(got) != list(want):
            return False, math.inf
        results = [_same(got[k], want[k], rtol, atol) for k in want]
        return all(r[0] for r in results), max((r[1] for r in results), default=0.0)
    if isinstance(want, tuple):
        if not isinstance(got, tuple) or len(got) != len(want):
            return False, math.inf
        results = [_same(g, w, rtol, atol) for g, w in zip(got, want, strict=True)]
        return all(r[0] for r in results), max((r[1] for r in results), default=0.0)
    if isinstance(want, (np.ndarray, np.generic, int, float, bool)) and not isinstance(want, str):
        try:
            g = np.asarray(got)
            w = np.asarray(want)
        except (TypeError, ValueError):
            return False, math.inf
        if g.shape != w.shape:
            return False, math.inf
        if w.dtype.kind in "biu" and g.dtype.kind in "biu":
            equal = bool(np.array_equal(g, w))
            diff = float(np.max(np.abs(g.astype(np.float64) - w), initial=0.0))
            return equal, diff
        if w.dtype.kind in "biufc" and g.dtype.kind in "biufc":
            gf, wf = g.astype(np.float64), w.astype(np.float64)
            close = bool(np.allclose(gf, wf, rtol=rtol, atol=atol, equal_nan=True))
            with np.errstate(invalid="ignore"):
                d = np.abs(gf - wf)
            d = d[~np.isnan(d)]
            return close, float(np.max(d, initial=0.0))
        return bool(np.array_equal(g, w)), 0.0
    return bool(got == want), 0.0


def _owned(value: Any) -> Any:
    """A writable copy of the arrays in a value (recorded arrays are read-only views)."""
    return map_leaves(value, lambda v: v.copy() if isinstance(v, np.ndarray) else v)


def _frame(env: Any) -> np.ndarray:
    frame = env.render()
    if isinstance(frame, list):  # rgb_array_list
        frame = frame[-1]
    arr = np.asarray(frame)
    if arr.dtype != np.uint8:
        arr = np.clip(arr, 0, 255).astype(np.uint8)
    return arr


def replay_episode(
    ep: Episode,
    env_id: str | None = None,
    *,
    env_kwargs: dict[str, Any] | None = None,
    render: bool = True,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    trust_env_spec: bool = False,
) -> ReplayResult:
    """See :meth:`gym_recording.Episode.replay`."""
    if env_kwargs is not None and not isinstance(env_kwargs, Mapping):
        raise TypeError(f"expected env_kwargs to be a dict, got {type(env_kwargs).__name__}")
    for name, tol in (("rtol", rtol), ("atol", atol)):  # (not the env's error, later)
        if isinstance(tol, bool) or not isinstance(tol, (int, float, np.integer, np.floating)):
            raise TypeError(f"expected {name} to be a number, got {type(tol).__name__}")
        if not tol >= 0:
            raise ValueError(f"expected {name} to be a number of at least 0, got {tol}")
    kwargs = dict(env_kwargs or {})
    recorded = ep.env_spec if isinstance(ep.env_spec, dict) and env_id is None else {}
    summary = _summary_kwargs(recorded)
    missing = [k for k in summary or () if k not in kwargs]
    if render:
        kwargs.setdefault("render_mode", "rgb_array")
    elif isinstance(recorded.get("kwargs"), dict) and recorded["kwargs"].get("render_mode"):
        kwargs.setdefault("render_mode", None)  # (not the recorded "human": no window)
    env = make_env(ep, env_id, kwargs, missing, trust_env_spec)
    env_id = str(getattr(env.spec, "id", None) or env_id or ep.env_id)
    frames: list[np.ndarray] = []
    replayed: list[Any] = []
    first_mismatch: int | None = None
    problem = ""
    max_diff = 0.0
    steps = 0

    def check(t: int, got: Any, want: Any, what: str) -> None:
        nonlocal first_mismatch, problem, max_diff
        ok, diff = _same(got, want, rtol, atol)
        if math.isfinite(diff):
            max_diff = max(max_diff, diff)
        if not ok and first_mismatch is None:
            first_mismatch = t
            detail = f" (max abs difference {diff:.3g})" if math.isfinite(diff) and diff else ""
            problem = f"the replayed {what} differs from the recorded one{detail}"

    def grab() -> None:
        if not render:
            return
        try:
            frames.append(_frame(env))
        except Exception as exc:  # pygame missing, no rgb_array support
            msg = (
                f"cannot render {env_id!r} as rgb_array to replay episode {ep.index}: {exc}; "
                "ep.replay(render=False) replays it without frames, to check that it reproduces"
            )
            raise RecordingError(msg) from exc

    doing = "reset"
    try:
        obs, _ = env.reset(seed=ep.seed, options=_owned(ep.options))
        replayed.append(obs)
        grab()
        check(0, obs, field_step(ep.observations, 0), "reset observation")
        for t in range(ep.length):
            action = _owned(field_step(ep.actions, t))
            doing = f"step {t}"
            obs, reward, terminated, truncated, _ = env.step(action)
            steps += 1
            replayed.append(obs)
            grab()
            check(t + 1, obs, field_step(ep.observations, t + 1), f"observation after step {t}")
            check(t + 1, float(reward), float(ep.rewards[t]), f"reward of step {t}")
            if (terminated or truncated) and t + 1 < ep.length:
                if first_mismatch is None:
                    first_mismatch = t + 1
                    ended = "terminated" if terminated else "truncated"
                    problem = (
                        f"the replayed episode {ended} after {t + 1} steps, "
                        f"but the recording has {ep.length}"
                    )
                break
    except RecordingError:
        raise
    except Exception as exc:  # the env's own error, with what it was asked to do
        msg = (
            f"{env_id} failed at {doing} while replaying episode {ep.index}: "
            f"{type(exc).__name__}: {exc}"
        )
        raise RecordingError(msg) from exc
    finally:
        env.close()
    reproduced = first_mismatch is None
    if reproduced:
        message = (
            f"The replay of {env_id} with seed {ep.seed} reproduced all {ep.length} steps "
            f"of episode {ep.index} (max abs difference {max_diff:.3g})."
        )
    else:
        message = (
            f"The replay of {env_id} with seed {ep.seed} did not reproduce episode "
            f"{ep.index}: at step {first_mismatch}, {problem}."
        )
        if ep.seed is None:
            message += " The episode was recorded without a seed, so its reset is not repeatable."
        if missing:
            message += (
                f" The environment was made without its arguments {', '.join(missing)}, which "
                "were not recorded (not plain JSON, or too large): pass them in env_kwargs."
            )
        unmade = recorded.get("wrappers_not_recorded")  # (a summary's: record/head.py)
        if summary is not None and isinstance(unmade, list) and unmade:
            message += (
                f" It was made without its wrappers {', '.join(map(str, unmade))}, which a "
                "summarised spec does not record."
            )
        warnings.warn(message, ReplayMismatchWarning, stacklevel=3)
    stacked: np.ndarray | None = None
    if render:
        try:
            stacked = np.stack(frames)  # (never empty: the reset's frame is first)
        except ValueError:  # frames of different sizes: pad to the largest
            h = max(f.shape[0] for f in frames)
            w = max(f.shape[1] for f in frames)
            stacked = np.zeros((len(frames), h, w, 3), np.uint8)
            for i, f in enumerate(frames):
                stacked[i, : f.shape[0], : f.shape[1]] = f[..., :3] if f.ndim == 3 else f[..., None]
        if stacked.ndim == 3:
            stacked = stacked[..., np.newaxis]
    return ReplayResult(
        env_id=env_id,
        frames=stacked,
        reproduced=reproduced,
        first_mismatch=first_mismatch,
        steps=steps,
        message=message,
        observations=replayed,
    )
