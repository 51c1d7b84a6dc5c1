"""The reader: :func:`load` a recording directory as a sequence of :class:`Episode`.

Arrays are read-only views over memory-mapped blobs (zero-copy). A blob stays mapped for as long
as any array made from it is alive, so arrays remain valid after the recording is closed.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import itertools
import os
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

import numpy as np

from gym_recording import _format
from gym_recording._cext import speedups as _speedups
from gym_recording._errors import RecordingClosedError, TraceFormatError
from gym_recording._fields import slice_field
from gym_recording._storage import Storage, open_storage

__all__ = ["Episode", "Recording", "load"]

_BATCH_CACHE = 4

_Batch = _format.LoadedBatch


@dataclass(frozen=True, eq=False)
class Episode:
    """One recorded episode of ``length`` steps.

    Attributes:
        observations: The ``length + 1`` observations (reset first). A Box space gives one
            array of shape ``[length + 1, *shape]``; Discrete an int array; Dict/Tuple spaces a
            dict/tuple of such arrays; other values (Text, variable shapes) a list.
        actions: The ``length`` actions, stored the same way.
        rewards: The ``length`` rewards, a float array.
        terminated: Whether the last step terminated the episode.
        truncated: Whether the last step truncated it (both false if cut by reset or close).
        seed: The seed passed to ``reset``, or ``None``.
        options: The options passed to ``reset``, or ``None``.
        infos: With ``record_infos=True``, the reset info then each step's info
            (``length + 1`` dicts); otherwise ``None``.
        index: The episode's position in the recording.
        writer: The id of the writer that recorded it.
        started_at: Unix time of the reset, if recorded.
        ended_at: Unix time the episode ended, if recorded.
        env_id: The id of the environment its writer recorded, if known (used by
            :meth:`replay`).

    Example:
        >>> import numpy as np
        >>> ep = Episode(np.zeros((3, 2)), np.array([0, 1]), np.array([1.0, 0.5]))
        >>> ep.length, ep.total_reward
        (2, 1.5)
    """

    observations: Any
    actions: Any
    rewards: np.ndarray
    terminated: bool = False
    truncated: bool = False
    seed: int | None = None
    options: Any = None
    infos: list[Any] | None = None
    index: int = 0
    writer: str = ""
    started_at: float | None = None
    ended_at: float | None = None
    env_id: str | None = None

    @classmethod
    def _of(cls, fields: dict[str, Any]) -> Episode:
        """An episode of ``fields``, which name every field in declaration order.

        The reader's constructor: the same object as ``Episode(**fields)``, without the cost
        of a frozen dataclass's ``__init__`` (one ``object.__setattr__`` per field).
        """
        ep = object.__new__(cls)
        ep.__dict__.update(fields)
        return ep

    @property
    def length(self) -> int:
        """The number of steps."""
        return int(self.rewards.shape[0])

    @functools.cached_property
    def total_reward(self) -> float:
        """The sum of the rewards."""
        return float(np.sum(self.rewards, dtype=np.float64))

    def __repr__(self) -> str:
        flags = "terminated" if self.terminated else "truncated" if self.truncated else "cut"
        return (
            f"<Episode {self.index} writer={self.writer} length={self.length} "
            f"return={self.total_reward:g} {flags}>"
        )

    # ---------------------------------------------------------------- notebook helpers

    def _repr_html_(self) -> str:
        """A compact HTML table for Jupyter: the episode's facts and its first steps."""
        from gym_recording import _notebook

        return _notebook.episode_html(self)

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
        from gym_recording import _notebook

        return _notebook.episode_to_pandas(self, next_obs=next_obs, max_columns=max_columns)

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
            >>> axes = rec[0].plot()  # doctest: +SKIP
        """
        from gym_recording import _notebook

        return _notebook.episode_plot(self, max_dims=max_dims)

    def frames(self, key: str | None = None) -> np.ndarray:
        """The image observations as one uint8 array ``[length + 1, H, W, C]``.

        Images are uint8 observations of shape ``[H, W, C]`` (C is 1, 3 or 4) or ``[H, W]``
        (returned with ``C = 1``). For Dict/Tuple observations the image leaf is chosen by
        ``key`` (``"pixels"``, or ``"1"`` for a tuple's second member), else one named pixels,
        image, rgb, frame or render, else the first.

        Args:
            key: The dotted name of the image leaf of a Dict/Tuple observation.

        Returns:
            The frames, reset observation first.

        Raises:
            NoFramesError: The observations hold no image (use :meth:`replay`).

        Example:
            >>> import numpy as np
            >>> ep = Episode(np.zeros((3, 8, 8, 3), np.uint8), np.array([0, 1]), np.zeros(2))
            >>> ep.frames().shape
            (3, 8, 8, 3)
        """
        from gym_recording import _notebook

        return _notebook.episode_frames(self, key)

    def show(
        self,
        *,
        fps: float = 30,
        max_frames: int = 300,
        key: str | None = None,
        replay: bool = False,
        env_id: str | None = None,
    ) -> Any:
        """An inline animation of the episode's frames, with a step slider and play buttons.

        Needs the ``notebook`` extra (matplotlib). The frames are :meth:`frames`; for
        observations that are not images, ``replay=True`` renders them by :meth:`replay`.
        The returned object displays itself in Jupyter (it has ``_repr_html_``) and can be
        saved as an HTML page with ``.save(path)``.

        Args:
            fps: Frames per second when playing.
            max_frames: Longer episodes are shown at this many evenly spaced steps.
            key: The image leaf of a Dict/Tuple observation (see :meth:`frames`).
            replay: Replay the episode through its environment if it has no image observations.
            env_id: The environment to replay (default: the recorded one).

        Returns:
            An ``Animation`` holding self-contained HTML and JavaScript.

        Raises:
            NoFramesError: No image observations and ``replay`` is false.

        Example:
            >>> rec[0].show(fps=15)  # doctest: +SKIP
        """
        from gym_recording import _notebook

        return _notebook.episode_show(
            self, fps=fps, max_frames=max_frames, key=key, replay=replay, env_id=env_id
        )

    def replay(
        self,
        env_id: str | None = None,
        *,
        env_kwargs: dict[str, Any] | None = None,
        render: bool = True,
        rtol: float = 1e-5,
        atol: float = 1e-6,
    ) -> Any:
        """Replay the recorded actions through the environment, render it, and compare.

        Makes ``env_id`` (default: the recorded env) with ``render_mode="rgb_array"``, resets
        it with the recorded seed and options, steps it with the recorded actions and collects
        a rendered frame after the reset and after each step. Every replayed observation and
        reward is compared with the recorded one (numbers within ``rtol``/``atol``); if they
        differ, or the replay ends early, the result says at which step and a
        ``ReplayMismatchWarning`` is issued. Episodes recorded without a seed rarely reproduce.

        Args:
            env_id: The environment to make; default the one recorded with the episode.
            env_kwargs: Extra keyword arguments for ``gymnasium.make``.
            render: Render frames (needs the env's rgb_array support, e.g. pygame for the
                classic-control envs); ``False`` only checks the observations.
            rtol: Relative tolerance for numeric observations.
            atol: Absolute tolerance for numeric observations.

        Returns:
            A ``ReplayResult`` with ``frames`` (``[length + 1, H, W, C]`` uint8 or ``None``),
            ``reproduced``, ``first_mismatch``, ``message`` and ``show()``.

        Raises:
            RecordingError: The environment is unknown, cannot be made or cannot render.

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
        from gym_recording import _notebook

        return _notebook.episode_replay(
            self, env_id, env_kwargs=env_kwargs, render=render, rtol=rtol, atol=atol
        )


#: The fields of an :class:`Episode`, in declaration order (the order of its ``__dict__``).
_EPISODE_FIELDS = tuple(f.name for f in dataclasses.fields(Episode))


def _episode_fields(manifest: _format.Manifest) -> dict[str, Any]:
    """Every field of an :class:`Episode` of ``manifest``'s writer, in declaration order.

    The writer's own are filled in, the rest ``None`` (for :func:`_plain_episode`).
    """
    fields = dict.fromkeys(_EPISODE_FIELDS)
    fields.update(writer=manifest.writer, env_id=manifest.env_id)
    return fields


def _plain_episode_py(
    cls: type[Episode], fields: dict[str, Any], plain: _format.PlainEpisode, index: int
) -> Episode:
    """Episode ``index`` of a plain episode decoded with its batch: ``_speedups.plain_episode``.

    ``fields`` come from :func:`_episode_fields`; ``plain`` is the batch path's tuple.
    """
    ep = cls._of(fields)
    d = ep.__dict__
    (
        d["observations"],
        d["actions"],
        d["rewards"],
        d["terminated"],
        d["truncated"],
        d["seed"],
        d["options"],
        d["started_at"],
        d["ended_at"],
    ) = plain
    d["index"] = index
    return ep


#: Makes a plain episode's :class:`Episode`: in C (``_speedups.plain_episode``) when built.
_plain_episode = getattr(_speedups, "plain_episode", None) or _plain_episode_py


@dataclass(frozen=True)
class _Writer:
    manifest: _format.Manifest
    # Per batch: how many episodes start in it, and the object index of the first one.
    starts: tuple[int, ...]
    first_obj: tuple[int, ...]

    @functools.cached_property
    def cum(self) -> list[int]:
        """Episodes starting before each batch (for a binary search)."""
        return list(itertools.accumulate(self.starts, initial=0))


def _concat(parts: list[Any], drop_first: bool) -> Any:
    """Join the fields of an episode's parts (dropping each later part's repeated first step)."""
    head, rest = parts[0], parts[1:]
    if drop_first:
        rest = [slice_field(p, 1, None) for p in rest]
    if all(isinstance(p, np.ndarray) for p in parts):
        out = np.concatenate([head, *rest])
        out.flags.writeable = False
        return out
    if isinstance(head, dict) and all(
        isinstance(p, dict) and p.keys() == head.keys() for p in rest
    ):
        return {k: _concat([head[k]] + [p[k] for p in rest], False) for k in head}
    if isinstance(head, tuple) and all(isinstance(p, tuple) and len(p) == len(head) for p in rest):
        return tuple(_concat([head[i]] + [p[i] for p in rest], False) for i in range(len(head)))
    out_list: list[Any] = []
    for p in [head, *rest]:
        out_list.extend(_steps(p))
    return out_list


def _steps(f: Any) -> list[Any]:
    """A field as a list of per-step values."""
    if isinstance(f, (np.ndarray, list)):
        return list(f)
    n = _format.field_length(f) or 0
    if isinstance(f, dict):
        cols = {k: _steps(v) for k, v in f.items()}
        return [{k: c[i] for k, c in cols.items()} for i in range(n)]
    tcols = [_steps(v) for v in f]
    return [tuple(c[i] for c in tcols) for i in range(n)]


class Recording(Sequence[Episode]):
    """The episodes of a recording directory, in writer order; random access loads one batch.

    Use :func:`load` to open one. Arrays are read-only, zero-copy views of the files, and stay
    valid after :meth:`close`.

    Args:
        directory: The recording directory, or an fsspec URL (``"s3://bucket/run1"``).
        storage_options: For a URL, options for its filesystem (``{"endpoint_url": ...}``);
            by default the standard configuration applies. Ignored for local paths.

    Raises:
        TraceFormatError: a manifest is damaged or the directory is missing.

    Example:
        >>> import tempfile, gymnasium as gym, gym_recording
        >>> from gym_recording.wrappers import TraceRecordingWrapper
        >>> d = tempfile.mkdtemp()
        >>> with TraceRecordingWrapper(gym.make("CartPole-v1"), d) as env:
        ...     obs, info = env.reset(seed=1)
        ...     obs, *_ = env.step(0)
        >>> with gym_recording.load(d) as rec:
        ...     len(rec), rec[0].observations.shape, rec[0].seed
        (1, (2, 4), 1)
    """

    def __init__(
        self, directory: str | os.PathLike[str], *, storage_options: dict[str, Any] | None = None
    ) -> None:
        self.directory = os.fspath(directory)
        self._storage: Storage = open_storage(
            self.directory, create=False, storage_options=storage_options
        )
        self._cache: OrderedDict[tuple[int, int], _Batch] = OrderedDict()
        self.closed = False
        self._writers: list[_Writer] = []
        self._cum: list[int] = [0]  # episodes before each writer
        self._scan()

    # ---------------------------------------------------------------- index

    def _scan(self) -> None:
        manifests = []
        for name in sorted(self._storage.list_names()):
            if _format.MANIFEST_RE.match(name) is None:
                continue
            path = os.path.join(self.directory, name)
            data = self._storage.read_bytes(name, _format.MAX_MANIFEST_BYTES)
            manifests.append(_format.parse_manifest(data, name, path))
        manifests.sort(key=lambda m: m.sort_key)
        writers, cum = [], [0]
        listed_by: dict[str, str] = {}
        for m in manifests:
            starts, first_obj = [], []
            prev_continues = False
            for b in m.batches:
                other = listed_by.setdefault(b.fn, m.name)
                if other != m.name:  # its episodes would be read twice
                    msg = f"batch {b.fn} is also listed by {other}"
                    raise TraceFormatError(msg, os.path.join(self.directory, m.name))
                skip = 1 if prev_continues else 0
                if b.len < skip or (b.continues and b.len < 1):
                    msg = f"batch {b.fn} is listed as continuing an episode but holds no episode"
                    raise TraceFormatError(msg, os.path.join(self.directory, m.name))
                starts.append(b.len - skip)
                first_obj.append(skip)
                prev_continues = b.continues
            if prev_continues and m.batches:
                # The last part of an episode is not written yet: hide the unfinished episode,
                # which starts in the last batch where any episode starts.
                k = len(starts) - 1
                while k > 0 and starts[k] == 0:
                    k -= 1
                starts[k] -= 1
            writers.append(_Writer(m, tuple(starts), tuple(first_obj)))
            cum.append(cum[-1] + sum(starts))
        self._writers, self._cum = writers, cum

    def refresh(self) -> None:
        """Re-read the manifests, to see batches written since the recording was opened."""
        self._check_open()
        self._scan()

    @property
    def writers(self) -> list[_format.Manifest]:
        """The manifests of the writers, in reading order."""
        return [w.manifest for w in self._writers]

    @property
    def metadata(self) -> dict[str, Any]:
        """The user metadata of the first writer (``{}`` if none)."""
        return dict(self._writers[0].manifest.metadata) if self._writers else {}

    @property
    def env_id(self) -> str | None:
        """The environment id recorded by the first writer that has one."""
        return next((w.manifest.env_id for w in self._writers if w.manifest.env_id), None)

    @property
    def observation_space(self) -> Any:
        """The observation space (a gymnasium space), if recorded."""
        return self._space("observation_space")

    @property
    def action_space(self) -> Any:
        """The action space (a gymnasium space), if recorded."""
        return self._space("action_space")

    def _space(self, key: str) -> Any:
        from gym_recording._spaces import space_from_json

        for w in self._writers:
            d = getattr(w.manifest, key)
            if d is not None:
                return space_from_json(d)
        return None

    # ---------------------------------------------------------------- access

    def __len__(self) -> int:
        return self._cum[-1]

    @overload
    def __getitem__(self, i: int) -> Episode: ...

    @overload
    def __getitem__(self, i: slice) -> list[Episode]: ...

    def __getitem__(self, i: int | slice) -> Episode | list[Episode]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if not isinstance(i, (int, np.integer)) or isinstance(i, bool):
            msg = f"episode indices must be integers or slices, not {type(i).__name__}"
            raise TypeError(msg)
        n = len(self)
        idx = int(i) + n if i < 0 else int(i)
        if not 0 <= idx < n:
            msg = f"episode index {i} out of range for a recording of {n} episodes"
            raise IndexError(msg)
        self._check_open()
        w = bisect.bisect_right(self._cum, idx) - 1
        writer = self._writers[w]
        k = idx - self._cum[w]
        cum = writer.cum
        b = bisect.bisect_right(cum, k) - 1  # the last batch starting at or before k
        return self._episode(idx, w, b, writer.first_obj[b] + k - cum[b])

    def __iter__(self) -> Iterator[Episode]:
        idx = 0
        check_open, episode, make = self._check_open, self._episode, _plain_episode
        for w, writer in enumerate(list(self._writers)):
            fields = _episode_fields(writer.manifest)
            for b, (n, first) in enumerate(zip(writer.starts, writer.first_obj, strict=True)):
                if not n:
                    continue
                check_open()
                batch = self._batch(w, b, plain=True)  # once per batch, not per episode
                plain = batch.plain or [None] * (first + n)
                for j in range(first, first + n):
                    if self.closed:
                        check_open()
                    p = plain[j]
                    if p is None:
                        yield episode(idx, w, b, j, batch)
                    else:  # the common case
                        yield make(Episode, fields, p, idx)
                    idx += 1

    def _batch(self, w: int, b: int, plain: bool = False) -> _Batch:
        """Batch ``b`` of writer ``w``, cached; with ``plain``, its plain episodes decoded.

        Iteration asks for ``plain`` (all the batch's episodes will be read: they are decoded
        at once); random access does not (one episode: the general path decodes just that).
        """
        key = (w, b)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            if plain:
                hit.decode_plain()
            return hit
        writer = self._writers[w]
        entry = writer.manifest.batches[b]
        path = os.path.join(self.directory, entry.fn)
        data = self._storage.read_bytes(entry.fn, _format.MAX_BATCH_JSON_BYTES)
        batch = _format.load_batch(
            data, entry, path, self._storage.map, strict=not writer.manifest.legacy, plain=plain
        )
        self._cache[key] = batch
        while len(self._cache) > _BATCH_CACHE:
            self._cache.popitem(last=False)
        return batch

    def _decoded(self, w: int, b: int, j: int, batch: _Batch | None = None) -> dict[str, Any]:
        if batch is None:
            batch = self._batch(w, b)
        objs, ctx, plain = batch.objs, batch.ctx, batch.plain
        decoded = None if plain is None else plain[j]
        if plain is not None and decoded is not None:  # decoded with the batch
            ep = _format.plain_decoded(decoded)
            count = len(plain)
        elif objs is not None:
            ep = _format.decode_episode(objs[j], ctx, f"episodes[{j}]")
            count = len(objs)
        else:  # pragma: no cover - a batch drops its objects only once all are decoded
            msg = f"episodes[{j}] of batch {b} was neither decoded nor kept"
            raise RuntimeError(msg)
        # Only a batch's last episode object may continue, exactly when the manifest says so:
        # otherwise parts would be joined wrongly, read twice or skipped.
        last = j == count - 1
        if ep["continues"] != (last and self._writers[w].manifest.batches[b].continues):
            if not ep["continues"]:
                msg = (
                    f"episodes[{j}] does not continue, but the manifest lists this batch as "
                    "continuing an episode in the next batch"
                )
            elif not last:
                msg = f"episodes[{j}] continues, but only a batch's last episode may continue"
            else:
                msg = (
                    f"episodes[{j}] continues, but the manifest does not list this batch as "
                    "continuing"
                )
            raise TraceFormatError(msg, ctx.path)
        return ep

    def _episode(
        self,
        idx: int,
        w: int,
        b: int,
        j: int,
        batch: _Batch | None = None,
    ) -> Episode:
        """Episode ``idx``: object ``j`` of batch ``b`` of writer ``w``, joined with its parts.

        ``batch``, if given, is that batch (as :meth:`_batch` returns it).
        """
        writer = self._writers[w]
        if batch is None:
            batch = self._batch(w, b)
        plain = None if batch.plain is None else batch.plain[j]
        if plain is not None:  # a single-part episode, decoded with its batch
            return _plain_episode(Episode, _episode_fields(writer.manifest), plain, idx)
        first = self._decoded(w, b, j, batch)
        if first["part"] != 0:
            path = os.path.join(self.directory, writer.manifest.batches[b].fn)
            msg = f"episodes[{j}] is part {first['part']} of an episode, but no part precedes it"
            raise TraceFormatError(msg, path)
        manifest = writer.manifest
        if not first["continues"]:  # one part: the common case
            return Episode._of(
                {
                    "observations": first["observations"],
                    "actions": first["actions"],
                    "rewards": first["rewards"],
                    "terminated": first["terminated"],
                    "truncated": first["truncated"],
                    "seed": first["seed"],
                    "options": first["options"],
                    "infos": first["infos"],
                    "index": idx,
                    "writer": manifest.writer,
                    "started_at": first["started_at"],
                    "ended_at": first["ended_at"],
                    "env_id": manifest.env_id,
                }
            )
        parts = [first]
        while parts[-1]["continues"]:
            b, j = b + 1, 0
            path = os.path.join(self.directory, writer.manifest.name)
            if b >= len(writer.manifest.batches):
                msg = "an episode continues past the last batch listed"
                raise TraceFormatError(msg, path)
            nxt = self._decoded(w, b, j)
            if nxt["part"] != parts[-1]["part"] + 1:
                msg = (
                    f"expected part {parts[-1]['part'] + 1} of an episode at the start of "
                    f"{writer.manifest.batches[b].fn}, found part {nxt['part']}"
                )
                raise TraceFormatError(msg, path)
            parts.append(nxt)
        first, last = parts[0], parts[-1]
        if len(parts) == 1:
            obs, acts, rew, infos = (
                first["observations"],
                first["actions"],
                first["rewards"],
                first["infos"],
            )
        else:
            try:
                obs = _concat([p["observations"] for p in parts], drop_first=True)
                acts = _concat([p["actions"] for p in parts], drop_first=False)
                rew = _concat([p["rewards"] for p in parts], drop_first=False)
                infos = (
                    None
                    if any(p["infos"] is None for p in parts)
                    else _concat([p["infos"] for p in parts], drop_first=True)
                )
            except (ValueError, TypeError) as exc:  # e.g. parts of different array shapes
                path = os.path.join(self.directory, writer.manifest.name)
                msg = f"the {len(parts)} parts of episode {idx} do not join: {exc}"
                raise TraceFormatError(msg, path) from None
        return Episode(
            observations=obs,
            actions=acts,
            rewards=rew,
            terminated=last["terminated"],
            truncated=last["truncated"],
            seed=first["seed"],
            options=first["options"],
            infos=infos,
            index=idx,
            writer=writer.manifest.writer,
            started_at=first["started_at"],
            ended_at=last["ended_at"],
            env_id=writer.manifest.env_id,
        )

    # ---------------------------------------------------------------- lifetime

    def _check_open(self) -> None:
        if self.closed:
            msg = f"the recording {self.directory!r} is closed; load() it again to read more"
            raise RecordingClosedError(msg)

    def close(self) -> None:
        """Drop the cached batches. Arrays already handed out stay valid."""
        self._cache.clear()
        self.closed = True

    def __enter__(self) -> Recording:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"<Recording {self.directory!r}: {len(self)} episodes from "
            f"{len(self._writers)} writer(s)>"
        )

    # ---------------------------------------------------------------- notebook helpers

    def _repr_html_(self) -> str:
        """A compact HTML summary for Jupyter: counts from the manifests, the first episodes.

        Cheap on any size of recording: it reads the manifests (already loaded) and only the
        batches holding the first 10 episodes.
        """
        from gym_recording import _notebook

        return _notebook.recording_html(self)

    def summary(self) -> Any:
        """One row per episode as a pandas DataFrame (needs the ``notebook`` extra).

        Indexed by episode ``index``, with columns ``writer``, ``length``, ``total_reward``,
        ``terminated``, ``truncated``, ``seed`` (nullable int) and, when the writer recorded
        wall-clock times, ``started_at``/``ended_at`` (UTC timestamps) and ``duration``
        (seconds). Reads every batch once.

        Returns:
            A ``pandas.DataFrame``.

        Example:
            >>> import tempfile, numpy as np, gym_recording
            >>> d = tempfile.mkdtemp()
            >>> with gym_recording.TraceRecording(d) as w:
            ...     w.add_reset(np.zeros(2), seed=3)
            ...     w.add_step(0, np.ones(2), 1.5, terminated=True)
            >>> gym_recording.load(d).summary()[["length", "total_reward", "seed"]]
                   length  total_reward  seed
            index
            0           1           1.5     3
        """
        from gym_recording import _notebook

        return _notebook.recording_summary(self)

    def steps(self, episodes: Any = None, *, next_obs: bool = False, max_columns: int = 16) -> Any:
        """Every step of the chosen episodes as one pandas DataFrame (``notebook`` extra).

        The columns of :meth:`Episode.to_pandas`, preceded by ``episode``. Reads every chosen
        episode: choose a few with ``episodes`` on a large recording.

        Args:
            episodes: An episode index, a slice, or indices; ``None`` for all.
            next_obs: Also add the observation each step led to.
            max_columns: The most components an array may have to be split into columns.

        Returns:
            A ``pandas.DataFrame``, one row per step.

        Example:
            >>> import tempfile, numpy as np, gym_recording
            >>> d = tempfile.mkdtemp()
            >>> with gym_recording.TraceRecording(d) as w:
            ...     w.add_reset(np.zeros(2, np.float32))
            ...     w.add_step(1, np.ones(2, np.float32), 0.5, terminated=True)
            >>> gym_recording.load(d).steps().columns.tolist()
            ['episode', 'step', 'obs_0', 'obs_1', 'action', 'reward', 'terminated', 'truncated']
        """
        from gym_recording import _notebook

        return _notebook.recording_steps(self, episodes, next_obs=next_obs, max_columns=max_columns)

    def plot_returns(self, window: int = 10, ax: Any = None) -> Any:
        """Plot each episode's return and their rolling mean (needs the ``notebook`` extra).

        Args:
            window: The episodes averaged by the rolling mean.
            ax: A matplotlib ``Axes`` to draw on; default a new figure.

        Returns:
            The matplotlib ``Axes`` (``ax.figure`` is the figure).

        Example:
            >>> ax = rec.plot_returns(window=20)  # doctest: +SKIP
        """
        from gym_recording import _notebook

        return _notebook.recording_plot_returns(self, window=window, ax=ax)


def load(
    directory: str | os.PathLike[str], *, storage_options: dict[str, Any] | None = None
) -> Recording:
    """Open the recording in ``directory`` for reading.

    Args:
        directory: A directory written by :class:`~gym_recording.wrappers.TraceRecordingWrapper`,
            :class:`~gym_recording.TraceRecording` or the original gym-recording; or an fsspec
            URL such as ``"s3://bucket/run1"`` (needs the ``remote`` extra).
        storage_options: For a URL, options for its filesystem (``{"endpoint_url": ...}``);
            by default the standard configuration applies (``AWS_ENDPOINT_URL``, fsspec's
            config). Ignored for local paths.

    Returns:
        A :class:`Recording`: a sequence of :class:`Episode`, usable as a context manager.

    Raises:
        TraceFormatError: the directory is missing or a manifest is damaged. Damaged batches
            raise when their episodes are read.
    """
    return Recording(directory, storage_options=storage_options)
