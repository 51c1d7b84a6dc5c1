"""The :class:`TraceRecordingWrapper`: records every reset and step of the env it wraps."""

from __future__ import annotations

import contextlib
import copy
import inspect
import logging
import os
import warnings
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, NoReturn, SupportsFloat, TypeVar

import gymnasium
import numpy as np

from gym_recording._errors import RecordingClosedError, RecordingError, WriteError
from gym_recording.record.buffer import now
from gym_recording.record.head import env_spec_json
from gym_recording.record.lifetime import uninterrupted
from gym_recording.record.recording import TraceRecording
from gym_recording.record.writer import checked_batch_bytes
from gym_recording.storage import to_open_again
from gym_recording.wrappers._render import RenderChoice, check_frames, render_choice, render_fps
from gym_recording.wrappers._subenvs import foreign_vector_error

if TYPE_CHECKING:
    from typing_extensions import Self  # (typing.Self from Python 3.11)

__all__ = ["TraceRecordingWrapper", "closed_error", "options_as_given"]

logger = logging.getLogger(__name__)

ObsType = TypeVar("ObsType")
ActType = TypeVar("ActType")


def _in_space(space: Any, value: Any) -> bool:
    try:
        with warnings.catch_warnings():  # (a Box warns of the casts it tries: not the user's)
            warnings.simplefilter("ignore")
            return bool(space.contains(value))
    except Exception:  # a space that cannot judge the value: no evidence either way
        return False


def _is_obs_info_pair(result: Any, env: Any, kwargs: Mapping[str, Any]) -> bool:
    """Whether a non-gymnasium env's ``reset(**kwargs)`` result is ``(obs, info)``.

    gym 0.26 returns the pair, older gym the observation alone, which may itself be a pair
    ending in a dict (a Tuple space). The observation space decides when it accepts one
    reading and not the other. Else ``reset``'s parameters do (of the innermost env, through
    gym's own wrappers, which take ``**kwargs``): ``return_info`` (gym 0.22-0.25) returns the pair
    only when asked; ``seed`` or ``options`` (gym 0.26) the pair; none of them the
    observation alone. Without evidence, it is the pair.
    """
    if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], dict)):
        return False
    space = getattr(env, "observation_space", None)
    if type(space).__name__ != "Tuple":  # only a Tuple space's observations are tuples
        return True
    whole, first = _in_space(space, result), _in_space(space, result[0])
    if whole != first:
        return first
    params = _reset_parameters(env)
    if params is None:
        return True
    if "return_info" in params:
        return bool(kwargs.get("return_info"))
    return "seed" in params or "options" in params


def _reset_parameters(env: Any) -> Mapping[str, inspect.Parameter] | None:
    """The parameters of the innermost ``reset`` under wrappers of ``**kwargs`` (gym's)."""
    for _ in range(64):  # (a wrapper chain, not a cycle)
        try:
            params = inspect.signature(env.reset).parameters
        except (TypeError, ValueError, AttributeError):  # (a builtin's, say)
            return None
        if inspect.Parameter.VAR_KEYWORD not in {p.kind for p in params.values()} or any(
            p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params.values()
        ):
            return params  # (not a wrapper's (*args, **kwargs): the env's own)
        if type(env).__module__.partition(".")[0] != "gym" or getattr(env, "env", None) is None:
            return None  # (only gym's own wrappers pass reset on as it is)
        env = env.env
    return None


def options_as_given(options: Any) -> Any:
    """A copy of ``reset``'s options, to record them as given (an env may change the dict)."""
    if options is None:
        return None
    try:
        return copy.deepcopy(options)
    except Exception:  # (an object that refuses copying: recorded as the env leaves it)
        return options


def _under_autoreset(env: Any) -> bool:
    """Whether ``env`` is, or wraps, Gymnasium's :class:`~gymnasium.wrappers.Autoreset`."""
    for _ in range(1000):  # (a chain of wrappers; a cycle of .env would not end)
        if isinstance(env, gymnasium.wrappers.Autoreset):
            return True
        if not isinstance(env, gymnasium.Wrapper):
            return False
        env = env.env
    return False


def closed_error(call: str, after: str = "") -> RecordingClosedError:
    """What a closed wrapper (single or vector) raises from ``call()``."""
    return RecordingClosedError(
        f"{call}() on a closed recording wrapper{after}: it records nothing more. Wrap the "
        "env again (in a new directory, or the same: writers do not collide) to record more"
    )


class TraceRecordingWrapper(
    gymnasium.Wrapper[ObsType, ActType, ObsType, ActType], gymnasium.utils.RecordConstructorArgs
):
    """Records every observation, action and reward of the wrapped env to a directory.

    Wraps a :class:`gymnasium.Env`, a ``gym`` 0.26 env, or a legacy env whose ``step`` returns
    ``(obs, reward, done, info)``; the caller sees exactly the API it wrapped. Each episode is
    recorded with its ``N + 1`` observations, ``N`` actions and rewards, the final step's
    ``terminated``/``truncated``, and the reset's ``seed`` and ``options``; under Gymnasium's
    :class:`~gymnasium.wrappers.Autoreset`, the step after an episode's end (the env's own
    reset, its action ignored) starts the next episode. The wrapper does no file IO itself: it
    hands steps to a :class:`~gym_recording.TraceRecording`, which writes batches of about
    ``batch_bytes``. Call :meth:`close` (or use ``with``) to write the last batch; buffered
    episodes are also flushed at interpreter exit, but lost if the process is killed.

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
        compression: ``"zstd"`` compresses every array losslessly on a writer thread while
            the env steps (rendered frames shrink several hundred times); ``None`` (the
            default) writes raw, zero-copy arrays that every reader reads. See
            :class:`~gym_recording.TraceRecording`.
        compression_level: zstd's level, 1 to 22 (default 3).
        record_render: Also record what ``env.render()`` draws after the reset and after each
            step (an env made with ``render_mode="rgb_array"``), as one
            ``uint8[N + 1, H, W, 3]`` array per episode: :attr:`Episode.render_frames`. True
            renders every recorded episode; a callable taking the episode index (as
            ``episode_trigger``) renders those it returns true for. The frames are large
            (CartPole: 720 KB each): with ``compression="zstd"`` they take about a thousand
            times less disk (BENCHMARKS.md). The env's ``metadata["render_fps"]`` is stored
            for players and videos.

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

    Like Gymnasium's own wrappers it records its constructor's arguments, so that
    ``env.spec`` re-makes it: ``gym.make(env.spec)`` gives an env that records into the same
    directory as a new writer. It cannot be copied or pickled (a copy would share the
    writer and lose or mix steps): make another one instead.

    Raises:
        RecordingError: ``record_render`` is asked of an env whose ``render_mode`` is not
            ``"rgb_array"``.
        TypeError: ``env`` is a vector env (record it with ``TraceRecordingVectorWrapper``),
            or ``record_render`` is neither a bool nor a callable.
        ValueError: ``compression`` is not ``"zstd"`` or ``None``, or ``compression_level``
            is not 1 to 22 (or without ``compression``), or ``batch_bytes`` is not a
            positive int.

    Change log:
        2.2.0: ``record_render``.
        2.1.0: ``compression``, ``compression_level``. ``RecordConstructorArgs``
        (``env.spec`` re-makes the wrapper); copies refused.
        2.0.0: gymnasium support, ``terminated``/``truncated``/``seed``/``options``, infos,
        ``episode_trigger``, ``metadata``, ``batch_bytes``.
    """

    def __new__(cls, env: Any, *args: Any, **kwargs: Any) -> Self:
        if (legacy := foreign_vector_error(env)) is not None:
            raise legacy
        if isinstance(env, gymnasium.vector.VectorEnv):
            msg = (
                f"expected a single env, got the vector env {type(env).__name__}: record it "
                "with TraceRecordingVectorWrapper(envs, directory), which records each sub-env"
            )
            raise TypeError(msg)
        # A legacy (non-gymnasium) env gets the subclass that forwards attributes to it as
        # legacy gym wrappers did; gymnasium envs get none (a class with __getattr__ makes
        # every attribute lookup of the hot path slower).
        if cls is TraceRecordingWrapper and not isinstance(env, gymnasium.Env):
            return super().__new__(_LegacyTraceRecordingWrapper)  # type: ignore[return-value]
        return super().__new__(cls)

    def __init__(  # (self typed: mypy cannot infer ObsType from env: Any, a legacy env say)
        self: TraceRecordingWrapper[Any, Any],
        env: Any,
        directory: str | os.PathLike[str] | None = None,
        *,
        batch_bytes: int = 5_000_000,
        record_infos: bool = False,
        episode_trigger: Callable[[int], bool] | None = None,
        metadata: Mapping[str, Any] | None = None,
        storage_options: dict[str, Any] | None = None,
        compression: str | None = None,
        compression_level: int | None = None,
        record_render: bool | RenderChoice = False,
    ) -> None:
        batch_bytes = checked_batch_bytes(batch_bytes)  # (plain JSON in env.spec, as below)
        if isinstance(compression_level, np.integer):
            compression_level = int(compression_level)
        gymnasium.utils.RecordConstructorArgs.__init__(  # (plain JSON: env.spec.to_json())
            self,
            directory=None if directory is None else os.fspath(directory),
            batch_bytes=batch_bytes,
            record_infos=record_infos,
            episode_trigger=episode_trigger,
            metadata=metadata,
            storage_options=storage_options,
            compression=compression,
            compression_level=compression_level,
            record_render=record_render,
        )
        self._gymnasium_env = isinstance(env, gymnasium.Env)
        if self._gymnasium_env:
            gymnasium.Wrapper.__init__(self, env)
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
        self._render_choice = render_choice(record_render, env, vector=False)
        spec = getattr(env, "spec", None)
        self.recording = TraceRecording(
            directory,
            batch_bytes=batch_bytes,
            metadata=metadata,
            env_id=getattr(spec, "id", None),
            env_spec=env_spec_json(spec),
            observation_space=getattr(env, "observation_space", None),
            action_space=getattr(env, "action_space", None),
            record_infos=record_infos,
            storage_options=storage_options,
            compression=compression,
            compression_level=compression_level,
            render_fps=render_fps(env),
        )
        #: The directory the traces are written to.
        self.directory: str = self.recording.directory
        # (None made one: env.spec names it; a URL stays as given, with its password if any)
        given = self.directory if directory is None else to_open_again(directory, self.directory)
        self._saved_kwargs["directory"] = given
        self.record_infos = record_infos
        self.episode_trigger = episode_trigger
        #: The index of the current episode (``-1`` before the first reset).
        self.episode_id = -1
        self._active = False  # recording the current episode
        self._rendering = False  # recording the current episode's rendered frames
        self._closed = False
        # Under Gymnasium's Autoreset wrapper the step after an episode's end resets the env,
        # its action ignored: that step starts an episode.
        self._autoreset = _under_autoreset(env)
        self._env_resets = False  # (the next step is the env's own reset)
        # Where each step's result goes: the recording's step recorder (see step()). It calls
        # back weakly: the recording of a wrapper dropped without close() stays open until
        # exit writes it, and must not keep the wrapper (and its env) alive till then.
        record_if_active = weakref.WeakMethod(self._record_if_active)
        self._record = self.recording.step_recorder(
            lambda action, result: record_if_active()(action, result)  # type: ignore[misc]
        ).record

    # ---------------------------------------------------------------- env API

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None, **kwargs: Any
    ) -> Any:
        """Reset the env and start recording a new episode (if the trigger says so).

        Args:
            seed: Passed to the env's ``reset``, and recorded as the episode's seed.
            options: Passed to the env's ``reset`` (a copy of them is recorded).
            **kwargs: Passed to the env's ``reset`` (a legacy env's, say), not recorded.

        Returns:
            What the env's ``reset`` returned (``(observation, info)`` for a Gymnasium env).

        Raises:
            RecordingClosedError: the wrapper is closed (the env is not reset).
            WriteError: a batch could not be written (it stays buffered, and is written at
                the next flush or close); the env has reset, and its episode is recorded.
        """
        if self._closed:
            raise closed_error("reset")
        return self._begin(seed, options, kwargs)

    def _begin(
        self, seed: int | None, options: Any, kwargs: dict[str, Any], stepped: Any = None
    ) -> Any:
        """Reset the env and record its new episode; what the env's reset returned.

        The episode is recorded if the trigger says so; the last one ends either way. With
        ``stepped``, the env reset itself in the step that returned it (Gymnasium's
        Autoreset): that step's observation and info start the episode.
        """
        rec = self.recording
        # Not recording until the env's reset succeeds (it may raise, or be interrupted).
        self._active = self._rendering = self._env_resets = False
        failed = None
        ended_at = now()  # (the last episode's end: the env's reset, which may take time)
        self.episode_id += 1
        recording = False  # (whether add_reset, or end_episode, is called)
        given = options_as_given(options)
        try:
            if stepped is not None:
                result, obs, info = stepped, stepped[0], stepped[4]
            elif self._gymnasium_env:
                result = self.env.reset(seed=seed, options=options, **kwargs)
                obs, info = result
            else:
                if seed is not None:
                    kwargs["seed"] = seed
                if options is not None:
                    kwargs["options"] = options
                legacy_env: Any = self.env  # gym 0.26 or older: its reset() is not gymnasium's
                result = legacy_env.reset(**kwargs)
                if _is_obs_info_pair(result, legacy_env, kwargs):
                    obs, info = result
                else:  # legacy API: reset() returns the observation alone
                    obs, info = result, None
            active = self.episode_trigger is None or bool(self.episode_trigger(self.episode_id))
            choice = self._render_choice
            rendering = active and choice is not None and bool(choice(self.episode_id))
            frame = check_frames(self.env.render()) if rendering else None
            recording = True
            if active:  # (add_reset ends the last episode, as end_episode does: one call)
                rec.add_reset(
                    obs,
                    seed=seed,
                    options=given,
                    info=info if self.record_infos else None,
                    render_frame=frame,
                    ended_at=ended_at,
                )
            else:
                rec.end_episode(ended_at=ended_at)
        except BaseException as exc:
            if not (recording and isinstance(exc, WriteError)):  # (else the reset is recorded)
                with uninterrupted(), contextlib.suppress(WriteError):  # (not in place of exc)
                    rec.end_episode(ended_at=ended_at)  # (the last episode ends, no new one)
                raise
            failed = exc
        self._active, self._rendering = active, rendering
        if failed is not None:
            raise failed
        return result

    def step(self, action: ActType) -> tuple[ObsType, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the env and record the step (in the recording's step recorder).

        An interrupted step (Ctrl-C: ``KeyboardInterrupt``, or any ``BaseException`` that is
        not an ``Exception``) may or may not have stepped the env and been recorded: its
        episode ends at its last recorded step, so that no step is missing from the middle
        of an episode, and the next ``reset`` records again.

        Args:
            action: Passed to the env's ``step``, and recorded.

        Returns:
            What the env's ``step`` returned, as it returned it.

        Raises:
            RecordingError: the step cannot be recorded (the message says why: a reward
                that is not a number, an info no reader could read back, ...). The env has
                stepped; its episode is recorded up to the step before, and the rest of the
                episode is not recorded: the next ``reset`` records again.
            WriteError: a batch could not be written (it stays buffered, and is written at
                the next flush or close); the step is recorded, and its episode goes on.
        """
        try:
            result = self.env.step(action)
            if self._autoreset:  # (Gymnasium's Autoreset: the step after an end resets the env)
                if self._env_resets:
                    if self._closed:
                        raise closed_error("step", " (the env has stepped)")
                    return self._begin(None, None, {}, result)
                self._env_resets = bool(result[2] or result[3])
            if self._rendering:
                try:
                    self._record_result(action, result, check_frames(self.env.render()))
                except WriteError:  # (the step is recorded)
                    raise
                except Exception:
                    # (a frame the recording refused, or render() failed: the episode ends
                    # at its last recorded step, as the recording cuts it)
                    self._active = self._rendering = False
                    with contextlib.suppress(WriteError):  # (not in place of this error)
                        self.recording.end_episode()
                    raise
                return result
            record = self._record  # (an instance attribute: LOAD_METHOD would not specialize)
            return record(action, result)
        except Exception:  # (the env's own error: the episode goes on)
            if not self.recording.in_episode:  # (a step refused: the recording cut it)
                self._active = self._rendering = False
            raise
        except BaseException:
            with uninterrupted(), contextlib.suppress(WriteError):  # (a second Ctrl-C waits)
                self._active = self._rendering = False
                self.recording.end_episode()  # (a failed write is raised at its next try)
            raise

    def _record_if_active(self, action: Any, result: Any) -> None:
        """What the step recorder does not record: a legacy result, or any without an episode."""
        if self._active:
            self._record_result(action, result)
        elif self._closed:
            raise closed_error("step", " (the env has stepped)")

    def _record_result(self, action: Any, result: Any, frame: Any = None) -> None:
        n = len(result) if isinstance(result, (tuple, list)) else -1
        if n == 5:
            obs, reward, terminated, truncated, info = result
        elif n == 4 and (result[3] is None or isinstance(result[3], Mapping)):
            obs, reward, done, info = result  # legacy (obs, reward, done, info)
            truncated = bool(info.get("TimeLimit.truncated", False)) if info else False
            terminated = bool(done) and not truncated
        else:  # (the env has stepped: its episode ends at its last recorded step)
            self._active = self._rendering = False
            with contextlib.suppress(WriteError):  # (not in place of this error)
                self.recording.end_episode()
            got = f"a {n}-tuple" if n >= 0 else type(result).__name__
            if n == 4:
                got += f" whose info is a {type(result[3]).__name__}"
            msg = (
                f"expected the env's step ({self.env}) to return (obs, reward, terminated, "
                "truncated, info), or legacy Gym's (obs, reward, done, info), got "
                f"{got}; its episode is recorded up to the step before, and the next reset "
                "records again"
            )
            raise RecordingError(msg)
        if not self.record_infos:
            info = None
        self.recording.add_step(action, obs, reward, terminated, truncated, info, frame)

    def close(self) -> None:
        """Write everything buffered, then close the env. Safe to call more than once.

        Then ``reset`` and ``step`` raise :class:`~gym_recording.RecordingClosedError`.
        """
        if self._closed:
            self.recording.close(keep_empty=False)  # (after an interrupted close: writes it)
            return
        self._closed = True
        self._active = self._rendering = False
        try:
            self.recording.close(keep_empty=False)
        finally:
            self.env.close()

    @property
    def spec(self) -> Any:  # type: ignore[override]
        """The wrapped env's spec."""
        if self._gymnasium_env:
            return super().spec
        return getattr(self.env, "spec", None)

    def _refuse_copy(self, *args: Any) -> NoReturn:
        msg = (
            "a TraceRecordingWrapper cannot be copied or pickled: the copy would share its "
            "recording's writer and lose or mix steps. Make another one instead: "
            "gym.make(env.spec) re-makes the wrapped env with a new writer, or wrap a new env"
        )
        raise RecordingError(msg)

    __copy__ = __deepcopy__ = __reduce_ex__ = _refuse_copy

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        self.close()
        return False


class _InitSignature:
    """``TraceRecordingWrapper.__signature__``: its ``__init__``'s parameters.

    ``__new__`` picks the class: ``help()``, IDEs and ``inspect`` show ``__init__``'s
    parameters all the same (a subclass's own ones: ``None`` there).
    """

    def __get__(self, obj: object, owner: type) -> inspect.Signature | None:
        if obj is not None or owner is not TraceRecordingWrapper:
            return None
        init = inspect.signature(owner.__init__)
        params = list(init.parameters.values())[1:]
        return init.replace(parameters=params, return_annotation=inspect.Signature.empty)


TraceRecordingWrapper.__signature__ = _InitSignature()  # type: ignore[attr-defined]


class _LegacyTraceRecordingWrapper(TraceRecordingWrapper[Any, Any]):
    """A :class:`TraceRecordingWrapper` of a legacy env, forwarding attributes to it.

    Gymnasium's wrappers do not forward attributes; legacy gym wrappers did, and code written
    for them relies on it.
    """

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(self.env, name)

    def render(self, *args: Any, **kwargs: Any) -> Any:
        """The legacy env's ``render``, with its arguments (``render(mode="rgb_array")``)."""
        return self.env.render(*args, **kwargs)
