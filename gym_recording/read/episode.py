"""The :class:`Episode`: what a reader hands out for each recorded episode."""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from gym_recording.format.wire import EPISODE_KEYS, EpisodeKeys
from gym_recording.read import notebook, replay, video
from gym_recording.read.notebook import Animation
from gym_recording.read.replay import ReplayResult

__all__ = ["Episode"]

_KEYS = frozenset(EPISODE_KEYS)
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(EpisodeKeys)}


@dataclass(frozen=True, eq=False, init=False)
class Episode(EpisodeKeys):
    """One recorded episode of ``length`` steps.

    Besides the attributes below, an episode has the per-episode keys of the format
    (``terminated``, ``truncated``, ``seed``, the times, ...), each described in
    :class:`~gym_recording.format.wire.EpisodeKeys`, and given to the constructor by name.

    Attributes:
        observations: The ``length + 1`` observations (reset first). A Box space gives one
            array of shape ``[length + 1, *shape]``; Discrete an int array; Dict/Tuple spaces a
            dict/tuple of such arrays; other values (Text, variable shapes) a list.
        actions: The ``length`` actions, stored the same way.
        rewards: The ``length`` rewards, a float array.
        options: The options passed to ``reset``, or ``None``.
        infos: With ``record_infos=True``, the reset info then each step's info
            (``length + 1`` dicts); otherwise ``None``.
        index: The episode's position in the recording.
        writer: The id of the writer that recorded it.
        env_id: The id of the environment its writer recorded, if known.
        env_spec: The spec of that environment as the writer recorded it (JSON), if known;
            :meth:`replay` makes the environment from it. Every episode of the writer shares
            this dict: change a copy (``copy.deepcopy``), not it.
        render_frames: With ``record_render``, what ``env.render()`` drew after the reset and
            after each step: one ``uint8[length + 1, H, W, 3]`` array; otherwise ``None``.
        render_fps: The frame rate the environment declares for its rendered frames
            (``metadata["render_fps"]``), if recorded.

    Change log:
        2.3.0: the per-episode keys come from ``EpisodeKeys``: the fourth argument is
        ``keys`` (a mapping; ``terminated`` and the others are given by name), and they
        come first in ``dataclasses.fields``, not in ``__match_args__``.

    Example:
        >>> import numpy as np
        >>> ep = Episode(np.zeros((3, 2)), np.array([0, 1]), np.array([1.0, 0.5]), seed=7)
        >>> ep.length, ep.total_reward, ep.seed, ep.terminated
        (2, 1.5, 7, False)
    """

    observations: Any
    actions: Any
    rewards: np.ndarray
    options: Any = None
    infos: list[Any] | None = None
    index: int = 0
    writer: str = ""
    env_id: str | None = None
    env_spec: Any = None
    render_frames: np.ndarray | None = None
    render_fps: float | None = None

    def __init__(
        self,
        observations: Any,
        actions: Any,
        rewards: np.ndarray,
        keys: Mapping[str, Any] | None = None,
        options: Any = None,
        infos: list[Any] | None = None,
        index: int = 0,
        writer: str = "",
        env_id: str | None = None,
        env_spec: Any = None,
        render_frames: np.ndarray | None = None,
        render_fps: float | None = None,
        **named_keys: Any,
    ) -> None:
        """Make an episode.

        Each argument but the keys sets the attribute of its name (see the class).

        Args:
            observations: The observations.
            actions: The actions.
            rewards: The rewards.
            keys: Values of the per-episode keys (:class:`~gym_recording.format.wire.EpisodeKeys`)
                by name; a key not given takes its default.
            options: The reset's options.
            infos: The infos.
            index: The position in a recording.
            writer: The writer's id.
            env_id: The environment's id.
            env_spec: The environment's spec.
            render_frames: The rendered frames.
            render_fps: Their frame rate.
            named_keys: Per-episode keys as keyword arguments (``terminated=True``).

        Raises:
            TypeError: a key the format does not have, or ``keys`` not a mapping (the fourth
                argument was ``terminated`` before gym-recording 2.3: give it by name).
        """
        # The dataclass's own __init__ sets each field through object.__setattr__ (it is
        # frozen): several times slower, which a reader making millions of episodes notices.
        d = self.__dict__
        if keys is not None:
            if type(keys) is not dict and not isinstance(keys, Mapping):
                msg = (
                    f"expected keys to be a mapping of per-episode keys, got {keys!r:.40}; "
                    "give terminated, seed, ... by name"
                )
                raise TypeError(msg)
            if named_keys:
                keys = {**keys, **named_keys}
        elif named_keys:
            keys = named_keys
        if keys:
            if not _KEYS.issuperset(keys):
                unknown = sorted(set(keys) - _KEYS)
                msg = f"expected per-episode keys among {list(EPISODE_KEYS)}, got {unknown}"
                raise TypeError(msg)
            if len(keys) != len(_KEYS):  # (every key in the instance's dict, as vars() shows)
                d.update(_DEFAULTS)
            d.update(keys)
        else:
            d.update(_DEFAULTS)
        d["observations"] = observations
        d["actions"] = actions
        d["rewards"] = rewards
        d["options"] = options
        d["infos"] = infos
        d["index"] = index
        d["writer"] = writer
        d["env_id"] = env_id
        d["env_spec"] = env_spec
        d["render_frames"] = render_frames
        d["render_fps"] = render_fps

    @property
    def length(self) -> int:
        """The number of steps."""
        return int(self.rewards.shape[0])

    @functools.cached_property
    def total_reward(self) -> float:
        """The sum of the rewards."""
        return float(np.sum(self.rewards, dtype=np.float64))

    def __repr__(self) -> str:
        return (
            f"<Episode {self.index} writer={self.writer} length={self.length} "
            f"return={self.total_reward:g} {notebook._ending(self)}>"
        )

    # ---------------------------------------------------------------- notebook helpers

    def _repr_html_(self) -> str:
        """A compact HTML table for Jupyter: the episode's facts and its first steps."""
        return notebook.episode_html(self)

    def to_pandas(self, *, next_obs: bool = False, max_columns: int = 16) -> Any:
        """The episode as a pandas DataFrame, one row per step (needs the ``notebook`` extra).

        Columns: ``step``, the observation before the step (``obs``), the ``action``, the
        ``reward``, ``terminated`` and ``truncated`` (true only on the last step), and with
        ``next_obs=True`` the observation after the step. A scalar becomes one column; an
        array of at most ``max_columns`` components one column per component (``obs_0``,
        ``obs_1``...); a larger array (an image) an object column of per-step arrays. Dict and
        tuple observations are named by key: ``obs.position_0``, ``obs.1``.

        Args:
            next_obs: Also add the observation each step led to.
            max_columns: The most components an array may have to be split into columns.

        Returns:
            A ``pandas.DataFrame`` of ``length`` rows.

        Example:
            >>> import numpy as np
            >>> ep = Episode(np.arange(6.0).reshape(3, 2), np.array([0, 1]), np.array([1.0, 2.0]))
            >>> ep.to_pandas().columns.tolist()
            ['step', 'obs_0', 'obs_1', 'action', 'reward', 'terminated', 'truncated']
        """
        return notebook.episode_to_pandas(self, next_obs=next_obs, max_columns=max_columns)

    def plot(self, *, max_dims: int = 8) -> Any:
        """Plot rewards, actions and low-dimensional observations against the step.

        Needs the ``notebook`` extra (matplotlib). One panel for the rewards (and the return so
        far), one for the actions, and one per numeric observation leaf, showing at most
        ``max_dims`` components each. Image observations are left to :meth:`show`.

        Args:
            max_dims: The most components of one array to draw.

        Returns:
            A numpy array of the matplotlib ``Axes``, top to bottom (``axes[0].figure`` is
            the figure).

        Example:
            >>> import numpy as np
            >>> ep = Episode(np.zeros((3, 2)), np.array([0, 1]), np.array([1.0, 0.5]))
            >>> len(ep.plot())  # observations, actions, rewards
            3
        """
        return notebook.episode_plot(self, max_dims=max_dims)

    def frames(self, key: str | None = None) -> np.ndarray:
        """The episode as pictures: one uint8 array ``[length + 1, H, W, C]``.

        The rule, in order:

        1. Rendered frames (:attr:`render_frames`, recorded with ``record_render=True``)
           are the frames, unless ``key`` names an observation.
        2. Else an image observation: uint8 of shape ``[H, W, C]`` per step (C is 1, 3 or 4)
           or ``[H, W]`` (returned with ``C = 1``).
        3. Or a frame stack: uint8 ``[k, H, W]`` per step (2 <= k <= 16, the stack first, as
           Gymnasium's ``FrameStackObservation`` makes it), shown as grayscale frames of the
           newest of each stack; ``[k, H, W, C]`` (C is 1 or 3) likewise in colour.
        4. Anything else is not a picture: arrays of another dtype, and uint8 arrays with a
           side of fewer than 16 pixels, such as MiniGrid's symbolic 7x7x3 grid (object,
           colour and state indices, not colours).

        For Dict/Tuple observations the image leaf is chosen by ``key`` (``"pixels"``, or
        ``"1"`` for a tuple's second member), else one named pixels, image, rgb, frame or
        render, else the first.

        Args:
            key: The dotted name of the image leaf of a Dict/Tuple observation.

        Returns:
            The frames, the reset's first.

        Raises:
            NoFramesError: No rendered frames and no picture observations (use
                :meth:`replay`).

        Example:
            >>> import numpy as np
            >>> ep = Episode(np.zeros((3, 16, 16, 3), np.uint8), np.array([0, 1]), np.zeros(2))
            >>> ep.frames().shape
            (3, 16, 16, 3)
        """
        return notebook.episode_frames(self, key)

    def to_video(
        self,
        path: str | os.PathLike[str],
        *,
        fps: float | None = None,
        key: str | None = None,
        overwrite: bool = False,
    ) -> str:
        """Write the episode's :meth:`frames` as an H.264 MP4 video (needs the ``video`` extra).

        The video has one frame per observation (``length + 1``) of the frames' size, at
        ``fps``: by default the frame rate the environment declares (:attr:`render_fps`), else
        30. It is written to a temporary file beside ``path``, then renamed.

        Args:
            path: The ``.mp4`` file to write.
            fps: Frames per second.
            key: The image leaf of a Dict/Tuple observation (see :meth:`frames`).
            overwrite: Replace ``path`` if it exists.

        Returns:
            ``path``.

        Raises:
            NoFramesError: no rendered frames and no picture observations.
            ExportError: ``path`` does not end in ``.mp4``.
            OutputExistsError: ``path`` exists and ``overwrite`` is false.
            DependencyNotInstalled: PyAV is missing (``pip install "gym-recording[video]"``).

        Example:
            >>> import os, tempfile, numpy as np
            >>> ep = Episode(np.zeros((3, 16, 16, 3), np.uint8), np.array([0, 1]), np.zeros(2))
            >>> path = ep.to_video(os.path.join(tempfile.mkdtemp(), "episode.mp4"), fps=10)
        """
        rate = fps if fps is not None else self.render_fps or video.DEFAULT_FPS
        return video.write_video(self.frames(key), path, rate, overwrite=overwrite)

    def show(
        self,
        *,
        fps: float | None = None,
        max_frames: int = 300,
        key: str | None = None,
        replay: bool = False,
        env_id: str | None = None,
        trust_env_spec: bool = False,
    ) -> Animation:
        """An inline animation of the episode's frames, with a step slider and play buttons.

        Needs the ``notebook`` extra (matplotlib). The frames are :meth:`frames` (rendered
        frames first); for an episode with neither rendered frames nor picture observations,
        ``replay=True`` renders them by :meth:`replay`.
        It plays at ``fps``: by default the frame rate the environment declares
        (:attr:`render_fps`), else 30, as :meth:`to_video` and ``export --to mp4`` do.
        The returned object displays itself in Jupyter (it has ``_repr_html_``) and can be
        saved as an HTML page with ``.save(path)``.

        Args:
            fps: Frames per second when playing.
            max_frames: Longer episodes are shown at this many evenly spaced steps.
            key: The image leaf of a Dict/Tuple observation (see :meth:`frames`).
            replay: Replay the episode through its environment if it has no image observations.
            env_id: The environment to replay (default: the recorded one).
            trust_env_spec: As for :meth:`replay`.

        Returns:
            An ``Animation`` holding self-contained HTML and JavaScript.

        Raises:
            NoFramesError: No image observations and ``replay`` is false.
            ValueError: ``fps`` is not a positive number, or ``max_frames`` is below 1.
            TypeError: ``max_frames`` is not an int.

        Example:
            >>> import numpy as np
            >>> ep = Episode(np.zeros((3, 16, 16, 3), np.uint8), np.array([0, 1]), np.zeros(2))
            >>> ep.show(fps=15)  # (in a notebook, the player itself)
            <Animation of 3 frames (... bytes of HTML)>
        """
        try:
            frames = notebook.episode_frames(self, key)
        except notebook.NoFramesError:
            if not replay:
                raise
            rendered = self.replay(env_id, trust_env_spec=trust_env_spec).frames  # (not None)
            frames = rendered if rendered is not None else np.zeros((0, 0, 0, 3), np.uint8)
        rate = fps if fps is not None else self.render_fps or video.DEFAULT_FPS
        return notebook.animate(frames, fps=rate, max_frames=max_frames)

    def replay(
        self,
        env_id: str | None = None,
        *,
        env_kwargs: dict[str, Any] | None = None,
        render: bool = True,
        rtol: float = 1e-5,
        atol: float = 1e-6,
        trust_env_spec: bool = False,
    ) -> ReplayResult:
        """Replay the recorded actions through the environment, render it, and compare.

        Makes the environment as it was recorded (from :attr:`env_spec`: its id and the
        keyword arguments it was made with), or ``env_id`` if given, with
        ``render_mode="rgb_array"``. A recorded spec names code to import and call (its
        entry point, its wrappers), and a recording may come from anyone: unless
        ``trust_env_spec`` is true, the recorded environment is made only if its id is
        registered in this process with the recorded entry point, and inside none of the
        recorded wrappers but Gymnasium's own (not ``RecordVideo`` or ``HumanRendering``):
        import the package that registers it first, or pass ``env_id``. It resets
        it with the recorded seed and options, steps it with the recorded actions and
        collects a rendered frame after the reset and after each step. Every replayed
        observation and reward is compared with the recorded one (numbers within
        ``rtol``/``atol``); if they differ, or the replay ends early, the result says at
        which step and a ``ReplayMismatchWarning`` is issued. Episodes recorded without a
        seed rarely reproduce.

        Args:
            env_id: The environment to make instead of the recorded one.
            env_kwargs: Keyword arguments for ``gymnasium.make``, over the recorded ones.
            render: Render frames (needs the env's rgb_array support, e.g. pygame for the
                classic-control envs); ``False`` only checks the observations.
            rtol: Relative tolerance for numeric observations.
            atol: Absolute tolerance for numeric observations.
            trust_env_spec: Make the environment as the recorded spec says, importing its
                entry point and wrappers, registered here or not: only for a recording whose
                maker you trust.

        Returns:
            A ``ReplayResult`` with ``frames`` (``[length + 1, H, W, C]`` uint8 or ``None``),
            ``reproduced``, ``first_mismatch``, ``message`` and ``show()``.

        Raises:
            RecordingError: The environment is unknown, names code this process has not
                registered (without ``trust_env_spec``), cannot be made or rendered, or failed
                while replaying (the message says which, and the env's own error is its cause).
            TypeError, ValueError: ``env_kwargs`` is not a dict, or a tolerance is not a
                number of at least 0.

        Example:
            >>> import tempfile, gymnasium as gym, gym_recording
            >>> from gym_recording.wrappers import TraceRecordingWrapper
            >>> d = tempfile.mkdtemp()
            >>> with TraceRecordingWrapper(gym.make("CartPole-v1"), d) as env:
            ...     _ = env.reset(seed=3)
            ...     _ = env.step(1)
            >>> result = gym_recording.load(d)[0].replay(render=False)
            >>> result.reproduced, result.first_mismatch
            (True, None)

            With ``render=True`` (the default), ``result.frames`` holds the rendered frames
            and ``result.show()`` animates them.
        """
        return replay.replay_episode(
            self,
            env_id,
            env_kwargs=env_kwargs,
            render=render,
            rtol=rtol,
            atol=atol,
            trust_env_spec=trust_env_spec,
        )
