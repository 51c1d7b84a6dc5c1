"""The :class:`TraceRecordingVectorWrapper`: records each sub-env of a vector env.

Each sub-environment gets its own :class:`~gym_recording.TraceRecording` (its own writer id) in
the shared directory, so its episodes are ordinary episodes, equal to the ones it would record
alone. The wrapper follows the vector env's autoreset mode (``metadata["autoreset_mode"]``,
https://farama.org/Vector-Autoreset-Mode):

- ``NEXT_STEP`` (the default): the step after an episode's end resets the sub-env, ignores its
  action and returns the reset observation with reward 0. That step starts the next episode; it
  is never recorded as a transition.
- ``SAME_STEP``: the ending step resets the sub-env at once and returns the *reset*
  observation; the episode's last observation is ``info["final_obs"][i]`` (and its info
  ``info["final_info"]``). The step is recorded with the final observation, then the reset
  observation starts the next episode.
- ``DISABLED``: nothing resets by itself; the caller resets sub-envs with
  ``reset(options={"reset_mask": mask})``, which starts new episodes for the masked sub-envs.

Partial resets through ``reset_mask`` work in every mode. Gymnasium's vector envs ``pop`` the
mask out of the options dict they are given (which confuses wrappers above them); this wrapper
hands them a copy, so the caller's dict is left as it was.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import gymnasium
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv, VectorEnv, VectorWrapper

from gym_recording._errors import RecordingError, WriteError
from gym_recording.record import lifetime
from gym_recording.record.columns import Columns
from gym_recording.record.head import env_spec_json
from gym_recording.record.lifetime import uninterrupted
from gym_recording.record.recording import TraceRecording
from gym_recording.wrappers._exit import holding
from gym_recording.wrappers._render import RenderChoice, check_frames, render_choice, render_fps
from gym_recording.wrappers._subenvs import (
    autoreset_mode,
    close_one,
    foreign_vector_error,
    info_dict,
    one_env_spec,
    per_env_seeds,
    sub_infos,
    unbatch,
)
from gym_recording.wrappers._trace_recording import closed_error, options_as_given

if TYPE_CHECKING:
    from typing_extensions import Self  # (typing.Self from Python 3.11)

__all__ = ["TraceRecordingVectorWrapper"]

logger = logging.getLogger(__name__)

_FINAL_KEYS = ("final_obs", "_final_obs", "final_info", "_final_info")
#: Spaces whose batches are one array ``[num_envs, *shape]``: recorded in columns.
_ARRAY_SPACES = (
    gymnasium.spaces.Box,
    gymnasium.spaces.Discrete,
    gymnasium.spaces.MultiDiscrete,
    gymnasium.spaces.MultiBinary,
)
#: Sub-env writers closed at once by :meth:`TraceRecordingVectorWrapper.close`.
CLOSE_THREADS = 16


def _no_episode(action: Any, result: Any) -> None:
    """A sub-env's step recorder was handed a step outside an episode (the wrapper never does)."""
    msg = "a sub-env's step was recorded outside an episode"
    raise RecordingError(msg)


class TraceRecordingVectorWrapper(VectorWrapper):
    """Records every sub-environment of a vector env as ordinary episodes in one directory.

    Works with :class:`gymnasium.vector.SyncVectorEnv`, :class:`gymnasium.vector.AsyncVectorEnv`
    and any :class:`gymnasium.vector.VectorEnv` that declares ``metadata["autoreset_mode"]``,
    under each mode (``NEXT_STEP``, ``SAME_STEP``, ``DISABLED``): the reset observation an
    autoreset returns starts the next episode and is never recorded as a transition, and no
    episode loses its final observation (under ``SAME_STEP`` it is Gymnasium's
    ``info["final_obs"]``, which a sub-env that reuses its observation buffer overwrites by
    its own reset before the vector env keeps it). Each sub-env is one writer; its manifest's
    ``metadata["vector_env"]`` holds its ``index``, the ``num_envs`` and the ``autoreset_mode``.
    Seeds given to ``reset(seed=...)`` are recorded per sub-env (an int ``s`` gives sub-env
    ``i`` the seed ``s + i``, as the vector env does); episodes begun by an autoreset have no
    seed. A vector env that is neither sync nor async (``make_vec``'s
    ``"vector_entry_point"``) has no sub-envs of their own: its episodes record no seed, and
    as spec the one that makes a single env of its id (its spec without the vector
    arguments; none if its id has no single env). Call :meth:`close` (or use ``with``) to
    write the last batches.

    Args:
        env: The vector environment to record.
        directory: Where to write (a path or an fsspec URL); created if missing. ``None`` makes
            a fresh directory under the system temporary directory.
        batch_bytes: The size each sub-env's batch files aim at.
        record_infos: Also record each sub-env's reset and step infos (unbatched: a number
            comes back as the numpy scalar the vector env batched it into). Under
            ``SAME_STEP``, the info of a step that ends a sub-env's episode holds, as
            Gymnasium lays it out, its ``final_info`` (recorded as that last step's info)
            and the next episode's reset info (recorded as such): so keys a vector wrapper
            adds there, such as RecordEpisodeStatistics' ``"episode"``, go with the next
            episode's reset info.
        episode_trigger: Called with a sub-env's episode index (0, 1, ... for each sub-env) at
            each of its resets; the episode is recorded only if it returns true.
        metadata: A JSON-able dict stored with each sub-env's recording.
        storage_options: Options for the filesystem of an fsspec URL ``directory``.
        compression: ``"zstd"`` compresses every array losslessly on each sub-env's writer
            thread; ``None`` (the default) writes raw arrays. See
            :class:`~gym_recording.TraceRecording`.
        compression_level: zstd's level, 1 to 22 (default 3).
        record_render: Also record each sub-env's rendered frames (a vector env made with
            ``render_mode="rgb_array"``, whose ``render()`` returns one frame per sub-env),
            as :class:`~gym_recording.wrappers.TraceRecordingWrapper` does: True for every
            recorded episode, or a callable taking a sub-env's episode index. Not under
            ``SAME_STEP``, whose step resets a sub-env before its last frame can be drawn.

    Raises:
        RecordingError: ``record_render`` with a vector env that does not render RGB frames,
            or under the ``SAME_STEP`` autoreset mode.
        TypeError: ``env`` is not a vector env (a single env: use ``TraceRecordingWrapper``).

    Example:
        >>> import tempfile, gymnasium as gym, gym_recording
        >>> from gym_recording.wrappers import TraceRecordingVectorWrapper
        >>> envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2)
        >>> with TraceRecordingVectorWrapper(envs, tempfile.mkdtemp()) as venv:
        ...     obs, info = venv.reset(seed=[1, 2])
        ...     for _ in range(3):
        ...         obs, *_ = venv.step(venv.action_space.sample())
        >>> with gym_recording.load(venv.directory) as rec:
        ...     sorted((ep.seed, ep.length) for ep in rec)
        [(1, 3), (2, 3)]

    Change log:
        2.2.0: ``record_render``.
        2.1.0: ``compression``, ``compression_level``.
        2.0.0: added.
    """

    def __init__(
        self,
        env: VectorEnv,
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
        if (legacy := foreign_vector_error(env)) is not None:
            raise legacy
        if not isinstance(env, VectorEnv):
            msg = (
                f"expected a vector env (gymnasium.vector.VectorEnv), got {type(env).__name__}: "
                "record a single env with TraceRecordingWrapper(env, directory)"
            )
            raise TypeError(msg)
        super().__init__(env)
        if episode_trigger is not None and not callable(episode_trigger):
            msg = f"expected episode_trigger to be callable or None, got {episode_trigger!r}"
            raise TypeError(msg)
        if metadata is not None and not isinstance(metadata, Mapping):
            msg = f"expected metadata to be a dict, got {type(metadata).__name__}"
            raise TypeError(msg)
        n = int(env.num_envs)
        #: The autoreset mode followed (read from the vector env's metadata).
        self.autoreset_mode = autoreset_mode(env)
        self._render_choice = render_choice(record_render, env, vector=True)
        if self._render_choice is not None and self.autoreset_mode == AutoresetMode.SAME_STEP:
            msg = (
                "record_render cannot record a vector env under the SAME_STEP autoreset mode: "
                "its step resets a sub-env that ends an episode before render() can draw that "
                "episode's last frame. Use NEXT_STEP (the default) or DISABLED"
            )
            raise RecordingError(msg)
        fps = render_fps(env)
        if directory is None:
            directory = tempfile.mkdtemp(prefix="gym-recording-")
        specs = self._sub_specs(n)
        self.recordings: list[TraceRecording] = []
        try:
            for i in range(n):
                meta = dict(metadata or {})
                meta["vector_env"] = {
                    "index": i,
                    "num_envs": n,
                    "autoreset_mode": self.autoreset_mode.value,
                }
                self.recordings.append(
                    TraceRecording(
                        directory,
                        batch_bytes=batch_bytes,
                        metadata=meta,
                        env_id=getattr(specs[i] or env.spec, "id", None),
                        env_spec=env_spec_json(specs[i]),
                        observation_space=env.single_observation_space,
                        action_space=env.single_action_space,
                        record_infos=record_infos,
                        storage_options=storage_options,
                        compression=compression,
                        compression_level=compression_level,
                        render_fps=fps,
                    )
                )
        except BaseException:
            for rec in self.recordings:
                rec.close()
            raise
        #: Where the traces are written.
        self.directory: str = self.recordings[0].directory if n else os.fspath(directory)
        self.record_infos = record_infos
        self.episode_trigger = episode_trigger
        self._episode_ids = [-1] * n  # (steps held in columns aside: see episode_ids)
        #: The sub-envs the reset under way is to reset, once it knows (before: none).
        self._resetting: Iterable[int] = ()
        self._active = [False] * n  # recording the sub-env's current episode
        self._rendering = [False] * n  # recording its rendered frames
        self._pending_reset = [False] * n  # NEXT_STEP: the next step resets the sub-env
        self._closed = False
        # Steps not handed to the recordings yet, when the spaces batch into single arrays.
        columns = not (record_infos or self._render_choice is not None)
        self._columns = self._make_columns(n) if columns else None
        # The thread in step(), if any, and whether the exit's hand-over (see _exit), or a
        # close, has begun; the thread that last stepped it, which feeds its recordings (see
        # lifetime.fed).
        self._stepper: int | None = None
        self._exiting = self._closing = False
        self._fed_by: int | None = None
        # Steps that do not go to columns go to each sub-env's step recorder, one by one.
        self._step_recorders = [rec.step_recorder(_no_episode).record for rec in self.recordings]
        if self._columns is not None:
            holding.add(self)

    def _make_columns(self, n: int) -> Columns | None:
        """Columns for this env's batched arrays, or ``None`` if its spaces batch otherwise."""
        spaces = (self.single_observation_space, self.single_action_space)
        batched = (self.observation_space, self.action_space)
        if not n or not all(isinstance(s, _ARRAY_SPACES) for s in spaces + batched):
            return None
        arrays: list[np.ndarray] = []
        for s in batched:
            if s.shape is None or s.shape[:1] != (n,) or np.dtype(s.dtype).byteorder == ">":
                return None
            arrays.append(np.empty(s.shape, np.dtype(s.dtype)))
        return Columns(arrays[0], arrays[1], n)

    def _sub_specs(self, n: int) -> list[Any]:
        """Each sub-env's spec (for the manifest), or ``None`` where it is not known.

        (Not the vector env's own: ``make_vec``'s holds its vector arguments, with which no
        sub-env could be made.)
        """
        # (the vector env itself: vector wrappers such as RecordEpisodeStatistics do not
        # forward get_attr)
        unwrapped = getattr(self.env, "unwrapped", self.env)
        get_attr = getattr(unwrapped, "get_attr", None)
        try:
            specs = list(get_attr("spec")) if callable(get_attr) else []
            if len(specs) == n:
                return specs
        except Exception:  # a sub-env without a spec attribute, or an unpicklable spec
            pass
        return [one_env_spec(getattr(unwrapped, "spec", None))] * n

    # ---------------------------------------------------------------- env API

    @property
    def episode_ids(self) -> list[int]:
        """Per sub-env, the index of its current episode (``-1`` before its first reset).

        Steps held in columns count the episodes they begin (as their hand-over will).
        """
        ids, cols = list(self._episode_ids), self._columns
        t = cols.t if cols is not None else 0
        if t and cols is not None and self.autoreset_mode != AutoresetMode.DISABLED:
            ended = cols.term[:t] | cols.trunc[:t]
            if self.autoreset_mode == AutoresetMode.NEXT_STEP:  # (the row after an end)
                begun = np.count_nonzero(ended[: t - 1], axis=0) + self._pending_reset
            else:  # SAME_STEP: at the row that ends one
                begun = np.count_nonzero(ended, axis=0)
            ids = [i + int(b) for i, b in zip(ids, begun, strict=True)]
        return ids

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the sub-envs (all, or those in ``options["reset_mask"]``); start their episodes.

        If the env's reset raises, the episodes of the sub-envs it was to reset end.

        Args:
            seed: Passed to the vector env's ``reset``: one int (sub-env ``i`` is seeded with
                ``seed + i``, as Gymnasium does) or one per sub-env; each episode records
                its sub-env's seed.
            options: Passed to the vector env's ``reset`` (a copy of them is recorded with
                each episode it starts), with ``reset_mask`` choosing the sub-envs.

        Returns:
            The vector env's ``(observations, infos)``.

        Raises:
            RecordingClosedError: the wrapper is closed (the env is not reset).
            RecordingError: as :meth:`step`, once every sub-env is reset and recorded.
        """
        if self._closed:
            raise closed_error("reset")
        self._fed_by = None  # (its episodes start in this thread: the next step's says again)
        try:
            return self._reset(seed, options)
        except Exception:
            raise
        except BaseException:  # (as step's: the episodes begun may not all be recorded)
            self._interrupted(self._resetting)  # (those it was to reset, once it knows)
            raise
        finally:
            self._resetting = ()  # (the next reset's Ctrl-C, before it knows: none)

    def _reset(self, seed: Any, options: dict[str, Any] | None) -> tuple[Any, dict[str, Any]]:
        errors: list[RecordingError] = []  # (every sub-env is handled first; then raised)
        self._kept(errors, self._flush)
        n = self.num_envs
        mask = None
        sub_options: Any = options_as_given(options)  # (recorded as given: envs may edit it)
        if options is not None:
            options = dict(options)  # the vector env pops "reset_mask" from the dict it gets
            if "reset_mask" in options:
                mask = np.asarray(options["reset_mask"])
                # (what each reset sub-env gets: the rest of the dict, ``{}`` if nothing)
                sub_options = {k: v for k, v in sub_options.items() if k != "reset_mask"}
        targets = range(n) if mask is None else np.flatnonzero(mask).tolist()
        self._resetting = targets
        try:
            obs, infos = self.env.reset(seed=seed, options=options)
        except Exception:  # (some may have reset: their episodes end, as TraceRecordingWrapper's)
            if not self._exiting:
                self._interrupted(targets)
            raise
        own = isinstance(self.env.unwrapped, (SyncVectorEnv, AsyncVectorEnv))  # (sub-envs)
        seeds = per_env_seeds(seed if own else None, n)
        all_obs = unbatch(self.single_observation_space, self.observation_space, obs, n)
        frames, failure = None, None
        if self._render_choice is not None:
            try:
                frames = self._frames()
            except Exception as exc:  # (the episodes start without frames; then it is raised)
                failure = exc
        subs = sub_infos(info_dict(infos, n), n) if self.record_infos else None
        for i in targets:
            self._pending_reset[i] = False
            info = subs[i] if subs is not None else None
            start = (i, all_obs[i], seeds[i], sub_options, info)
            self._kept(errors, self._start, *start, frames=frames)
        if failure is not None:
            raise failure
        self._raise(errors)
        return obs, infos

    def _frames(self) -> Any:
        """Each sub-env's rendered frame (``render()`` of the vector env), checked for number."""
        frames = self.env.render()
        if not isinstance(frames, (tuple, list)) or len(frames) != self.num_envs:
            got = f"{len(frames)} frames" if isinstance(frames, (tuple, list)) else repr(frames)
            msg = (
                f"expected the vector env's render() to return one frame per sub-env "
                f"({self.num_envs}), got {str(got)[:80]}"
            )
            raise RecordingError(msg)
        return check_frames(frames)

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Step every sub-env and record each sub-env's step (or the start of its next episode).

        An interrupted step (Ctrl-C), or the env's error (the other sub-envs may have stepped),
        ends every sub-env's episode at its last recorded step; each records from its next one.

        Raises:
            RecordingError: once every sub-env's step is recorded: the first refusal (that
                sub-env's episode ends at its last recorded step, and it records again from
                its next reset), else the first :class:`~gym_recording.WriteError` (a batch
                stays buffered, for the next flush or close; every step is recorded).
        """
        ident = threading.get_ident()
        if ident != self._fed_by:  # (another thread steps it: exit waits for that one)
            self._fed_by = ident
            for rec in self.recordings:
                lifetime.fed(rec)
        try:
            return self._step(actions, ident)
        except Exception:
            raise
        except BaseException:
            self._interrupted()
            raise
        finally:
            self._stepper = None

    def _interrupted(self, targets: Iterable[int] | None = None) -> None:
        """After an interrupt, or the env's error: keep the columns' steps, end the episodes.

        Those of ``targets`` (default: every sub-env's) end at their last recorded step: which
        of them the call stepped or reset is not known. Each records again from its next reset.
        """
        cols = self._columns
        with uninterrupted():  # (a second Ctrl-C waits until every episode is ended)
            try:
                with contextlib.suppress(RecordingError):  # (not in place of what is raised)
                    self._flush()
            finally:
                if cols is not None:
                    cols.t = 0
                    cols.final.clear()
                for i in range(self.num_envs) if targets is None else targets:
                    if self._active[i]:
                        with contextlib.suppress(WriteError):  # (not in place of the Ctrl-C)
                            self.recordings[i].end_episode()
                    self._active[i] = self._rendering[i] = self._pending_reset[i] = False

    def _step(self, actions: Any, ident: int) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        try:
            result = self.env.step(actions)
        except Exception:  # (a sub-env's: the others may have stepped, their steps lost)
            if not self._exiting:  # (else a close, or the exit, holds the columns)
                self._interrupted()
            raise
        self._stepper = ident  # (first: a close, or the exit's hand-over, waits for the rest)
        if self._exiting:  # (they have begun: the steps since are not recorded)
            if self._closing:
                raise closed_error("step", " (the env has stepped)")
            return result
        try:
            failure = self._record(actions, result)
        except RecordingError:
            raise
        except Exception as exc:  # (what it returned: every sub-env's episode ends there)
            self._interrupted()
            msg = (
                f"cannot record the step of {self.env}: {type(exc).__name__}: {exc}; expected "
                "(obs, rewards, terminations, truncations, infos) of its spaces, one row per "
                "sub-env. Each sub-env's episode ends at its last recorded step, and each "
                "records again from its next episode"
            )
            raise RecordingError(msg) from exc
        if failure is not None:  # (render() failed)
            raise failure
        return result

    def _record(self, actions: Any, result: Any) -> Exception | None:
        """Record the step ``env.step(actions)`` returned ``result``; ``render()``'s error."""
        obs, rewards, terminations, truncations, infos = result
        if type(infos) is list:  # (DictInfoToList's: each sub-env's)
            infos = info_dict(infos, self.num_envs)
        cols = self._columns
        if cols is not None and cols.fits(obs, actions, rewards, terminations, truncations):
            # The common case: the step's arrays go to columns, one copy each; the sub-envs'
            # episodes are cut out of them when they are full (_flush).
            if self.autoreset_mode == AutoresetMode.SAME_STEP:  # (all found before a row is kept)
                for i, final in self._final_obs(infos, terminations, truncations).items():
                    final = final.copy() if isinstance(final, np.ndarray) else final
                    cols.final[(cols.t, i)] = final
            cols.put(obs, actions, rewards, terminations, truncations)
            if cols.t == cols.size:
                self._flush()
            return None
        n, mode = self.num_envs, self.autoreset_mode
        flags = (("rewards", rewards), ("terminations", terminations), ("truncations", truncations))
        for name, x in flags:
            if np.shape(x) != (n,):  # (checked before any sub-env's step is recorded)
                raise ValueError(f"expected {name} of shape ({n},), got {np.shape(x)}")
        ended = {}  # (SAME_STEP: each ended sub-env's final observation, all found first)
        if mode == AutoresetMode.SAME_STEP:
            ended = self._final_obs(infos, terminations, truncations)
        errors: list[RecordingError] = []  # (every sub-env's step is handled first)
        self._kept(errors, self._flush)
        all_acts = unbatch(self.single_action_space, self.action_space, actions, n)
        all_obs = unbatch(self.single_observation_space, self.observation_space, obs, n)
        keep_infos = self.record_infos
        frames, failure = None, None
        if self._render_choice is not None and (any(self._rendering) or any(self._pending_reset)):
            try:
                frames = self._frames()
            except Exception as exc:
                # render() failed: each rendered episode ends at its last recorded step (as
                # the single-env wrapper's), the others go on; then the error is raised.
                failure = exc
                for i in range(n):
                    if self._rendering[i]:
                        self._kept(errors, self.recordings[i].end_episode)
                        self._active[i] = self._rendering[i] = False
        subs: list[Any] = sub_infos(infos, n) if keep_infos else [None] * n
        finals, resets = subs, subs  # (SAME_STEP: the ended episodes' last infos, and resets')
        if keep_infos and ended:
            finals = sub_infos(infos.get("final_info"), n)
            resets = sub_infos({k: v for k, v in infos.items() if k not in _FINAL_KEYS}, n)
        for i in range(n):
            rec = self.recordings[i]
            if self._pending_reset[i]:
                # NEXT_STEP: this step reset sub-env i (its action was ignored).
                self._pending_reset[i] = False
                self._kept(errors, self._start, i, all_obs[i], None, None, subs[i], frames=frames)
                continue
            terminated, truncated = bool(terminations[i]), bool(truncations[i])
            done = terminated or truncated
            if done and mode == AutoresetMode.SAME_STEP:
                final_obs = ended[i]
                if self._active[i]:
                    last = (all_acts[i], final_obs, rewards[i], terminated, truncated, finals[i])
                    self._kept(errors, rec.add_step, *last)
                self._kept(errors, self._start, i, all_obs[i], None, None, resets[i])
                continue
            if self._active[i]:
                frame = frames[i] if self._rendering[i] and frames is not None else None
                try:
                    step = (all_obs[i], rewards[i], terminated, truncated, subs[i])
                    if frame is None:  # (the step recorder: its C step where it is built)
                        self._step_recorders[i](all_acts[i], step)
                    else:
                        rec.add_step(all_acts[i], *step, frame)
                except WriteError as exc:  # (the step is recorded)
                    errors.append(exc)
                except RecordingError as exc:
                    self._active[i] = self._rendering[i] = False  # (its episode was cut)
                    errors.append(exc)
            if done:
                self._kept(errors, rec.end_episode)
                self._active[i] = self._rendering[i] = False
                if mode == AutoresetMode.NEXT_STEP:
                    self._pending_reset[i] = True
        if failure is None:
            self._raise(errors)
        return failure

    def _kept(
        self, errors: list[RecordingError], call: Callable[..., Any], *args: Any, **kw: Any
    ) -> bool:
        """``call(*args, **kw)`` on a sub-env's recording; whether it recorded what it brought.

        A :class:`~gym_recording.WriteError` (it did record it) or a refusal (it did not: the
        sub-env's episode ends at its last recorded step, and it records again from its
        next reset) goes to ``errors``, raised once every sub-env is handled.
        """
        try:
            call(*args, **kw)
        except WriteError as exc:
            errors.append(exc)
        except RecordingError as exc:
            errors.append(exc)
            return False
        return True

    def _raise(self, errors: list[RecordingError]) -> None:
        """Raise the first of ``errors`` (a refusal before a write error), if any."""
        if errors:
            raise next((e for e in errors if not isinstance(e, WriteError)), errors[0])

    def _final_obs(
        self, infos: Mapping[str, Any], terminations: Any, truncations: Any
    ) -> dict[int, Any]:
        """Under ``SAME_STEP``, each sub-env that ended an episode: its final observation."""
        final = infos.get("final_obs")
        mask = infos.get("_final_obs")
        out = {}
        for i in np.flatnonzero(np.logical_or(terminations, truncations)).tolist():
            if final is None or (mask is not None and not bool(mask[i])):
                msg = (
                    f"sub-env {i} ended an episode under the SAME_STEP autoreset mode, but the "
                    "step's info has no final_obs for it; the episode's last observation would "
                    "be lost. Is metadata['autoreset_mode'] right for this vector env?"
                )
                raise RuntimeError(msg)
            out[i] = final[i]
        return out

    def _start(
        self,
        i: int,
        obs: Any,
        seed: int | None,
        options: Any,
        info: Any,
        started_at: float | None = None,
        frames: Any = None,
    ) -> None:
        """Begin sub-env ``i``'s next episode with its reset observation (and frame).

        Raises:
            WriteError: once the episode is begun.
        """
        rec, failed = self.recordings[i], None
        try:
            rec.end_episode(ended_at=started_at)
        except WriteError as exc:  # (the last episode is ended)
            failed = exc
        self._episode_ids[i] += 1
        trigger, choice = self.episode_trigger, self._render_choice
        active = trigger is None or bool(trigger(self._episode_ids[i]))
        rendering = (
            active
            and frames is not None
            and choice is not None
            and bool(choice(self._episode_ids[i]))
        )
        self._active[i] = self._rendering[i] = False
        if active:
            frame = frames[i] if rendering and frames is not None else None
            try:
                rec.add_reset(
                    obs,
                    seed=seed,
                    options=options,
                    info=info,
                    started_at=started_at,
                    render_frame=frame,
                )
            except WriteError as exc:  # (the reset is recorded)
                failed = failed or exc
        self._active[i], self._rendering[i] = active, rendering
        if failed is not None:
            raise failed

    def _flush(self) -> None:
        """Hand the steps held in columns to each sub-env's recording, in order.

        The same calls as :meth:`step` makes one step at a time, made per sub-env for all
        its rows at once (:meth:`~gym_recording.TraceRecording.add_rows`) where its rows are
        steps and ``NEXT_STEP`` resets, and otherwise per run of rows between its episodes'
        ends, with the times the steps were taken.
        """
        cols = self._columns
        if cols is None or not cols.t:
            return
        with uninterrupted():  # (every sub-env takes its rows, or none does)
            self._flush_columns(cols)

    def _flush_columns(self, cols: Columns) -> None:
        """Each sub-env's rows; then the first error, if any (see :meth:`_kept`)."""
        t, errors = cols.t, list[RecordingError]()
        cols.t = 0
        ended = cols.term[:t] | cols.trunc[:t]
        try:
            for i, rec in enumerate(self.recordings):
                try:
                    self._flush_rows(i, rec, cols, t, ended, errors)
                except RecordingError as exc:  # (a value refused: its episode was cut)
                    errors.append(exc)
                    with contextlib.suppress(RecordingError):
                        rec.end_episode()
                    self._active[i] = self._pending_reset[i] = False  # (until its next reset)
        finally:
            cols.final.clear()
        self._raise(errors)

    def _flush_rows(
        self,
        i: int,
        rec: TraceRecording,
        cols: Columns,
        t: int,
        ended: np.ndarray,
        errors: list[RecordingError],
    ) -> None:
        mode = self.autoreset_mode

        def rows(a: int, b: int, reset_first: bool) -> None:  # (rows a:b to the recording)
            act, obs, rew, term, trunc = (
                x[a:b, i] for x in (cols.act, cols.obs, cols.rew, cols.term, cols.trunc)
            )
            try:
                rec.add_rows(act, obs, rew, term, trunc, cols.times[a:b], reset_first=reset_first)
            except WriteError as exc:  # (every row is recorded)
                errors.append(exc)

        if (
            mode == AutoresetMode.NEXT_STEP
            and self.episode_trigger is None
            and (self._active[i] or self._pending_reset[i])
        ):
            first = self._pending_reset[i]
            rows(0, t, first)
            self._episode_ids[i] += first + int(np.count_nonzero(ended[: t - 1, i]))
            self._active[i] = rec.in_episode
            self._pending_reset[i] = not rec.in_episode
            return
        stops = np.flatnonzero(ended[:, i]).tolist()  # (the rows that end an episode)
        r = k = 0
        while r < t:
            if self._pending_reset[i]:  # NEXT_STEP: row r reset sub-env i
                self._pending_reset[i] = False
                when = float(cols.times[r])
                self._kept(errors, self._start, i, cols.obs[r, i], None, None, None, when)
                r += 1
                continue
            while k < len(stops) and stops[k] < r:
                k += 1
            d = stops[k] if k < len(stops) else t
            if d > r and self._active[i]:
                rows(r, d, False)
            if d == t:
                break
            k += 1
            terminated, truncated = bool(cols.term[d, i]), bool(cols.trunc[d, i])
            when = float(cols.times[d])
            if mode == AutoresetMode.SAME_STEP:
                final = cols.final.pop((d, i))
                if self._active[i]:
                    step = (cols.act[d, i], final, cols.rew[d, i], terminated, truncated)
                    self._kept(errors, rec.add_step, *step)
                self._kept(errors, self._start, i, cols.obs[d, i], None, None, None, when)
            else:
                if self._active[i]:
                    step = (cols.act[d, i], cols.obs[d, i], cols.rew[d, i], terminated, truncated)
                    self._kept(errors, rec.add_step, *step)
                self._kept(errors, rec.end_episode, ended_at=when)
                self._active[i] = False
                if mode == AutoresetMode.NEXT_STEP:
                    self._pending_reset[i] = True
            r = d + 1

    def close(self, **kwargs: Any) -> None:
        """Write every sub-env's buffered episodes, then close the vector env. Safe to repeat.

        Episodes still buffered are lost if the process is killed before this runs (it also
        runs at interpreter exit). Then ``reset`` and ``step`` raise
        :class:`~gym_recording.RecordingClosedError`. A write that fails raises its
        :class:`~gym_recording.WriteError` once every writer is closed; what it held stays
        buffered, and the next ``close()`` (or exit) writes it. From another thread than the
        one stepping, it waits for the step that thread is recording (not for its env's step).
        """
        if self._closed:  # (after a close that failed or was interrupted: the rest)
            errors = [e for e in map(close_one, self.recordings) if e]
            if errors:
                raise errors[0]
            return
        flushed: list[RecordingError] = []  # (every sub-env's rows are handed over first)
        self._exiting = self._closing = True  # (first: a step of another thread stops there)
        try:
            ended = lifetime.step_ended(lambda: self._stepper)  # (or ends, if it is recording)
        except BaseException:  # (interrupted: not closed, its steps still held)
            self._exiting = self._closing = False
            raise
        if not ended:
            logger.error("a step of %r in another thread did not end: close() goes on", self)
        try:
            self._kept(flushed, self._flush)
        finally:
            holding.discard(self)
            self._columns = None  # (handed over: their memory is freed)
            self._closed = True
            self._active = [False] * len(self._active)
            self._rendering = [False] * len(self._rendering)
        try:
            # The sub-envs' writers close side by side: each one's last batch is encoded in
            # turn and written in the background, then each waits for its write and fsyncs
            # its directory (their fsyncs share the disk's journal commits).
            started = [close_one(rec, wait=False) for rec in self.recordings]
            try:
                with ThreadPoolExecutor(min(CLOSE_THREADS, len(self.recordings) or 1)) as pool:
                    closed = list(pool.map(close_one, self.recordings))
            except RuntimeError:  # (no thread pool as the interpreter exits: one by one)
                closed = [close_one(rec) for rec in self.recordings]
            errors = [e for e in [*flushed, *started, *closed] if e]
            if errors:  # (every writer was closed; the first error is reported)
                raise errors[0]
        finally:
            self.env.close(**kwargs)

    def __del__(self) -> None:
        # Dropped without close(): its columns go to its recordings, which exit then writes.
        # (No module global here: at interpreter shutdown they may be gone.)
        try:
            if not self._closed:
                self._flush()
        except Exception:  # (nothing to tell it to: the recordings say what failed)
            pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<TraceRecordingVectorWrapper {self.directory!r}, {self.env}>"
