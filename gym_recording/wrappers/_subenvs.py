"""What a Gymnasium vector env hands its sub-envs: their values, seeds, infos and spec.

The vector wrapper records each sub-env as a single env of its own; these functions split
the vector env's batches, seeds and infos into the sub-envs' (as Gymnasium's vector envs
hand them out), find its autoreset mode and one sub-env's spec, and close a sub-env's
recording.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import iterate

from gym_recording.record.recording import TraceRecording

__all__ = [
    "autoreset_mode",
    "close_one",
    "foreign_vector_error",
    "one_env_spec",
    "per_env_seeds",
    "sub_infos",
    "unbatch",
]

logger = logging.getLogger(__name__)


def foreign_vector_error(env: Any) -> TypeError | None:
    """The error for a vector env neither wrapper records: legacy gym's, or another's.

    Stable-Baselines3's ``VecEnv`` (found by its ``step_async``/``step_wait``) would be taken
    for a single legacy env. (Gym is not imported for this: its envs exist only once it is.)
    """
    if isinstance(env, (gymnasium.Env, VectorEnv)):
        return None
    legacy = sys.modules.get("gym.vector")
    kind = getattr(legacy, "VectorEnv", None)
    if isinstance(kind, type):
        try:  # (inside gym's wrappers, RecordEpisodeStatistics say, or itself)
            base = env.unwrapped
        except Exception:
            base = env
        base = base if isinstance(base, kind) else env
        if isinstance(base, kind):
            msg = (
                f"expected a Gymnasium env, got gym's vector env {type(base).__name__}: "
                "gym-recording records Gymnasium's vector envs (made with gymnasium.make_vec) "
                "with TraceRecordingVectorWrapper, and any single env with "
                "TraceRecordingWrapper: wrap each sub-env before gym vectorizes it"
            )
            return TypeError(msg)
    if hasattr(env, "num_envs") and all(
        callable(getattr(env, a, None)) for a in ("step_async", "step_wait")
    ):
        msg = (
            f"expected a Gymnasium env, got {type(env).__name__}, a vector env of another "
            "library (Stable-Baselines3's VecEnv, say): gym-recording records each env before "
            "it is vectorized, e.g. make_vec_env(env_id, n_envs, "
            "wrapper_class=TraceRecordingWrapper, wrapper_kwargs={'directory': ...}), or "
            "Gymnasium's vector envs (gymnasium.make_vec) with TraceRecordingVectorWrapper"
        )
        return TypeError(msg)
    return None


def close_one(rec: TraceRecording, wait: bool = True) -> Exception | None:
    """Close ``rec``; its error, if any (so that the others are closed too)."""
    try:
        rec.close(wait=wait)
    except Exception as exc:
        return exc
    return None


def autoreset_mode(env: VectorEnv) -> AutoresetMode:
    """The autoreset mode the vector env declares, or NEXT_STEP (Gymnasium's default)."""
    mode = getattr(env, "metadata", {}).get("autoreset_mode")
    if mode is None:
        mode = getattr(env.unwrapped, "autoreset_mode", None)
    if mode is None:
        logger.warning(
            "%s does not declare metadata['autoreset_mode']; assuming NEXT_STEP, Gymnasium's "
            "default. Set it so that the episodes are recorded correctly.",
            env,
        )
        return AutoresetMode.NEXT_STEP
    return mode if isinstance(mode, AutoresetMode) else AutoresetMode(mode)


#: What ``make_vec`` adds to a spec's kwargs for the vector env (not the env's own).
_VECTOR_KWARGS = ("num_envs", "vectorization_mode", "vector_kwargs", "wrappers")


def one_env_spec(spec: Any) -> Any:
    """The spec that makes one sub-env of a vector env, or ``None``.

    For a ``make_vec`` env made by its id's vector entry point, which has no sub-envs to
    ask: its spec without the vector arguments.
    """
    kwargs = getattr(spec, "kwargs", None)
    if not isinstance(kwargs, dict) or kwargs.get("vectorization_mode") != "vector_entry_point":
        return None
    if getattr(spec, "entry_point", None) is None:  # (a vector env only: no single env)
        return None
    own = {k: v for k, v in kwargs.items() if k not in _VECTOR_KWARGS}
    steps = own.pop("max_episode_steps", None)  # (a vector env's kwarg; a spec's field)
    try:  # (an EnvSpec is a dataclass: a copy that shares the values, as gymnasium's do)
        return dataclasses.replace(
            spec, kwargs=own, max_episode_steps=spec.max_episode_steps if steps is None else steps
        )
    except Exception:  # not gymnasium's EnvSpec
        return None


def per_env_seeds(seed: Any, n: int) -> list[int | None]:
    """The seed each sub-env received, as Gymnasium's vector envs hand them out."""
    if seed is None:
        return [None] * n
    if isinstance(seed, (int, np.integer)):
        return [int(seed) + i for i in range(n)]
    seeds = list(seed)
    return [None if s is None else int(s) for s in seeds]


def _index(space: gymnasium.Space[Any], batch: Any, i: int) -> Any:
    """Item ``i`` of a batch of ``space`` values, by indexing the leaves."""
    if isinstance(space, gymnasium.spaces.Dict) and isinstance(batch, Mapping):
        return {k: _index(sub, batch[k], i) for k, sub in space.spaces.items()}
    if (
        isinstance(space, gymnasium.spaces.Tuple)
        and isinstance(batch, tuple)
        and len(batch) == len(space.spaces)
    ):
        return tuple(_index(sub, b, i) for sub, b in zip(space.spaces, batch, strict=True))
    return batch[i]


def unbatch(
    single: gymnasium.Space[Any], batched: gymnasium.Space[Any], batch: Any, n: int
) -> list[Any]:
    """Split a batched value into the ``n`` sub-env values."""
    try:
        items = list(iterate(batched, batch))
        if len(items) == n:
            return items
    except Exception:  # a custom space without `iterate`, or an unexpected layout
        pass
    return [_index(single, batch, i) for i in range(n)]


def info_dict(infos: Any, n: int) -> Any:
    """``infos`` in Gymnasium's vector layout (``key`` values, ``_key`` masks).

    Also when a vector wrapper (``DictInfoToList``) gave them as a list of each sub-env's
    info dict.
    """
    if not (type(infos) is list and len(infos) == n and all(isinstance(i, Mapping) for i in infos)):
        return infos
    out: dict[Any, Any] = {}
    for i, info in enumerate(infos):
        for key, value in info.items():
            if key not in out:
                out[key], out[f"_{key}"] = [None] * n, np.zeros(n, bool)
            out[key][i], out[f"_{key}"][i] = value, True
    return out


def sub_infos(infos: Mapping[Any, Any] | None, n: int) -> list[dict[Any, Any]]:
    """Each sub-env's info out of a vector info dict (``key`` values with ``_key`` masks)."""
    outs: list[dict[Any, Any]] = [{} for _ in range(n)]
    if not infos:
        return outs
    if type(infos) is list and len(infos) == n:  # (each sub-env's, as info_dict nests them)
        return [dict(i) if isinstance(i, Mapping) else {} for i in infos]
    masks = {f"_{key}" for key in infos}  # (Gymnasium's mask of any key, a str or not)
    for key, value in infos.items():
        if key in masks:
            continue
        if isinstance(value, np.ndarray):  # (the commonest: one value per sub-env)
            items: list[Any] = list(value) if value.shape[:1] == (n,) else [value] * n
        elif isinstance(value, Mapping):
            items = sub_infos(value, n)
        elif isinstance(value, (list, tuple)) and len(value) == n:
            items = list(value)
        else:
            items = [value] * n
        mask = infos.get(f"_{key}")
        if mask is not None:
            has = mask.tolist() if type(mask) is np.ndarray else [mask[i] for i in range(n)]
            if not all(has):
                for out, item, there in zip(outs, items, has, strict=True):
                    if there:
                        out[key] = item
                continue
        for out, item in zip(outs, items, strict=True):
            out[key] = item
    return outs
