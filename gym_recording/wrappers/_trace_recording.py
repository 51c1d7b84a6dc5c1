"""The :class:`TraceRecordingWrapper`: records every reset and step of the env it wraps."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any, Literal, SupportsFloat, TypeVar

import gymnasium

from gym_recording.recording import TraceRecording

__all__ = ["TraceRecordingWrapper"]

logger = logging.getLogger(__name__)

ObsType = TypeVar("ObsType")
ActType = TypeVar("ActType")


def _spec_json(spec: Any) -> Any:
    """The env spec as JSON, or a best-effort summary if it does not serialise."""
    if spec is None:
        return None
    to_json = getattr(spec, "to_json", None)
    if callable(to_json):
        try:
            return json.loads(to_json())
        except Exception:  # kwargs that do not serialise (callables, objects)
            pass
    summary: dict[str, Any] = {}
    for key in ("id", "entry_point", "max_episode_steps", "reward_threshold", "nondeterministic"):
        val = getattr(spec, key, None)
        summary[key] = val if isinstance(val, (str, int, float, bool, type(None))) else repr(val)
    kwargs = getattr(spec, "kwargs", None)
    if isinstance(kwargs, Mapping):
        summary["kwargs"] = {str(k): repr(v) for k, v in kwargs.items()}
    return summary


def _in_space(space: Any, value: Any) -> bool:
    try:
        return bool(space.contains(value))
    except Exception:  # a space that cannot judge the value: no evidence either way
        return False


def _is_obs_info_pair(result: Any, space: Any) -> bool:
    """Whether a non-gymnasium env's ``reset()`` result is ``(obs, info)`` (gym 0.26 API).

    A legacy env returns the observation alone, and that observation may itself be a pair
    ending in a dict (a Tuple space): then the observation space decides.
    """
    if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], dict)):
        return False
    if type(space).__name__ != "Tuple":  # only a Tuple space's observations are tuples
        return True
    return not (_in_space(space, result) and not _in_space(space, result[0]))


class TraceRecordingWrapper(gymnasium.Wrapper[ObsType, ActType, ObsType, ActType]):
    """Records every observation, action and reward of the wrapped env to a directory.

    Wraps a :class:`gymnasium.Env`, a ``gym`` 0.26 env, or a legacy env whose ``step`` returns
    ``(obs, reward, done, info)``; the caller sees exactly the API it wrapped. Each episode is
    recorded with its ``N + 1`` observations, ``N`` actions and rewards, the final step's
    ``terminated``/``truncated``, and the reset's ``seed`` and ``options``. The wrapper does no
    file IO itself: it hands steps to a :class:`~gym_recording.TraceRecording`, which writes
    batches of about ``batch_bytes``. Call :meth:`close` (or use ``with``) to write the last
    batch; buffered episodes are also flushed at interpreter exit, but lost if the process is
    killed.

    Args:
        env: The environment to record.
        directory: Where to write the traces (created if missing). ``None`` makes a fresh
            directory under the system temporary directory; see :attr:`directory`.
        batch_bytes: The size a batch file aims at.
        record_infos: Also record the reset info and every step's info dict.
        episode_trigger: Called with the episode index (0, 1, ...) at each reset; the episode is
            recorded only if it returns true. ``None`` records every episode.
        metadata: A JSON-able dict stored with the recording.
        storage_options: For an fsspec URL ``directory`` (``"s3://bucket/run1"``), options for
            its filesystem such as ``{"endpoint_url": ...}``; by default the standard
            configuration applies (``AWS_ENDPOINT_URL``, fsspec's config). Needs the ``remote``
            extra.

    Example:
        >>> import tempfile, gymnasium as gym, gym_recording
        >>> from gym_recording.wrappers import TraceRecordingWrapper
        >>> env = TraceRecordingWrapper(gym.make("CartPole-v1"), tempfile.mkdtemp())
        >>> obs, info = env.reset(seed=42)
        >>> for _ in range(5):
        ...     obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        >>> env.close()
        >>> with gym_recording.load(env.directory) as rec:
        ...     rec[0].length, rec[0].observations.shape, rec[0].seed
        (5, (6, 4), 42)

    Change log:
        2.0.0: gymnasium support, ``terminated``/``truncated``/``seed``/``options``, infos,
        ``episode_trigger``, ``metadata``, ``batch_bytes``.
    """

    def __init__(
        self,
        env: Any,
        directory: str | os.PathLike[str] | None = None,
        *,
        batch_bytes: int = 5_000_000,
        record_infos: bool = False,
        episode_trigger: Callable[[int], bool] | None = None,
        metadata: Mapping[str, Any] | None = None,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        self._gymnasium_env = isinstance(env, gymnasium.Env)
        if self._gymnasium_env:
            super().__init__(env)
        else:
            # gym / legacy envs: set what gymnasium.Wrapper.__init__ sets, without its type check.
            if not (callable(getattr(env, "step", None)) and callable(getattr(env, "reset", None))):
                msg = (
                    "expected an environment with step() and reset() methods, "
                    f"got {type(env).__name__}"
                )
                raise TypeError(msg)
            self.env = env
            self._action_space = None
            self._observation_space = None
            self._metadata = None
            self._cached_spec = None
        if episode_trigger is not None and not callable(episode_trigger):
            msg = f"expected episode_trigger to be callable or None, got {episode_trigger!r}"
            raise TypeError(msg)
        spec = getattr(env, "spec", None)
        self.recording = TraceRecording(
            directory,
            batch_bytes=batch_bytes,
            metadata=metadata,
            env_id=getattr(spec, "id", None),
            env_spec=_spec_json(spec),
            observation_space=getattr(env, "observation_space", None),
            action_space=getattr(env, "action_space", None),
            record_infos=record_infos,
            storage_options=storage_options,
        )
        #: The directory the traces are written to.
        self.directory: str = self.recording.directory
        self.record_infos = record_infos
        self.episode_trigger = episode_trigger
        #: The index of the current episode (``-1`` before the first reset).
        self.episode_id = -1
        self._active = False  # recording the current episode
        self._closed = False
        # While an episode is recorded, ``step`` is this instance attribute: the env's step and
        # the recording of it in one call (the recording builds it; the wrapper does no IO).
        self._fused_step = self.recording._step_function(self.env.step, self._record_if_active)

    # ---------------------------------------------------------------- env API

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None, **kwargs: Any
    ) -> Any:
        """Reset the env and start recording a new episode (if the trigger says so)."""
        rec = self.recording
        if not self._closed:
            rec.end_episode()
        self.episode_id += 1
        # Not recording until the env's reset succeeds (it may raise). The fused step may stay
        # installed meanwhile: with no episode open it hands steps to _record_if_active.
        self._active = False
        if self._gymnasium_env:
            result = self.env.reset(seed=seed, options=options, **kwargs)
            obs, info = result
        else:
            if seed is not None:
                kwargs["seed"] = seed
            if options is not None:
                kwargs["options"] = options
            legacy_env: Any = self.env  # gym 0.26 or older: its reset() is not gymnasium's
            result = legacy_env.reset(**kwargs)
            if _is_obs_info_pair(result, getattr(legacy_env, "observation_space", None)):
                obs, info = result
            else:  # legacy API: reset() returns the observation alone
                obs, info = result, None
        active = not self._closed and (
            self.episode_trigger is None or bool(self.episode_trigger(self.episode_id))
        )
        if active:
            rec.add_reset(obs, seed=seed, options=options, info=info if self.record_infos else None)
        self._set_active(active)
        return result

    def step(self, action: ActType) -> tuple[ObsType, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the env and record the step."""
        # While an episode is recorded, the fused step (an instance attribute) stands in for it.
        result: Any = self.env.step(action)
        if self._active:
            self._record_result(action, result)
        return result

    def _record_if_active(self, action: Any, result: Any) -> None:
        """The fused step's way out: a legacy result, or no episode open in the recording."""
        if self._active:
            self._record_result(action, result)

    def _record_result(self, action: Any, result: Any) -> None:
        try:
            obs, reward, terminated, truncated, info = result
        except ValueError:  # legacy (obs, reward, done, info)
            obs, reward, done, info = result
            truncated = bool(info.get("TimeLimit.truncated", False)) if info else False
            terminated = bool(done) and not truncated
        if self.record_infos:
            self.recording.add_step(action, obs, reward, terminated, truncated, info)
        else:
            self.recording.add_step(action, obs, reward, terminated, truncated)

    def _set_active(self, active: bool) -> None:
        self._active = active
        if active:
            self.__dict__["step"] = self._fused_step
        else:
            self.__dict__.pop("step", None)

    def close(self) -> None:
        """Write everything buffered, then close the env. Safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        self._set_active(False)
        try:
            self.recording.close()
        finally:
            self.env.close()

    @property
    def spec(self) -> Any:  # type: ignore[override]
        """The wrapped env's spec."""
        if self._gymnasium_env:
            return super().spec
        return getattr(self.env, "spec", None)

    def __getattr__(self, name: str) -> Any:
        # gymnasium wrappers do not forward attributes; legacy gym wrappers did, so do it for them.
        if name.startswith("_") or self.__dict__.get("_gymnasium_env", True):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(self.env, name)

    def __enter__(self) -> TraceRecordingWrapper[ObsType, ActType]:
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        self.close()
        return False
