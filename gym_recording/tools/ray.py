"""Read recordings with Ray Data: :func:`read_traces` turns one into a ``ray.data.Dataset``.

Needs the optional ``ray`` extra (``pip install "gym-recording[ray]"``); Ray is imported only when
:func:`read_traces` is called, so importing this module is cheap and never shadows the ``ray``
package. The manifests are read once, by the caller; then one Ray task per batch file reads the
episodes that start in that batch, in parallel, on any worker that can reach the location (a
shared filesystem, or an fsspec URL such as ``s3://``; ``memory://`` is private to one process).
Every worker needs gym-recording installed.
"""

from __future__ import annotations

import os
from typing import Any, Literal

import numpy as np

from gym_recording._optional import require
from gym_recording.format.fields import as_array, named_leaves
from gym_recording.read.episode import Episode
from gym_recording.read.recording import Recording, load
from gym_recording.tools._source import int64_seed

__all__ = ["read_traces"]


def _batch_tasks(rec: Recording) -> list[dict[str, Any]]:
    """One descriptor per batch file: the range of episode indices that start in it.

    The ranges only decide which task reads which episodes (each task reads ``rec[i]`` through
    the reader), so they always cover ``range(len(rec))`` exactly, whatever the layout.
    """
    tasks: list[dict[str, Any]] = []
    start = 0
    for w in rec._writers:  # (the episodes that start in each batch, as the reader counts them)
        for entry, count in zip(w.manifest.batches, w.starts, strict=True):
            if count > 0:
                tasks.append(
                    {
                        "start": start,
                        "stop": start + count,
                        "writer": w.manifest.writer,
                        "batch": entry.fn,
                    }
                )
                start += count
    return tasks


def _arrow_column(values: np.ndarray) -> Any:
    """A column of per-row values: plain Arrow for scalars, a tensor column for arrays."""
    pa = require("pyarrow", "ray", "gym_recording.ray.read_traces()")
    if values.dtype != object and values.ndim > 1:
        from ray.data.extensions import ArrowTensorArray

        return ArrowTensorArray.from_numpy(np.ascontiguousarray(values))
    try:
        return pa.array(values if values.dtype != object else values.tolist())
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError):
        return pa.array([repr(v) for v in values.tolist()], pa.string())


def _ragged_column(arrays: list[np.ndarray]) -> Any:
    """A column holding one array per row, shapes differing (an episode's steps)."""
    if any(a.dtype == object for a in arrays):  # (as _arrow_column: values, else their repr)
        pa = require("pyarrow", "ray", "gym_recording.ray.read_traces()")
        try:
            return pa.array([a.tolist() for a in arrays])
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError):
            return pa.array([[repr(x) for x in a.tolist()] for a in arrays])
    from ray.data.extensions import ArrowVariableShapedTensorArray

    return ArrowVariableShapedTensorArray.from_numpy([np.ascontiguousarray(a) for a in arrays])


def _leaves(
    episodes: list[tuple[int, Episode]], field: str, prefix: str
) -> dict[str, list[np.ndarray]]:
    """Per leaf column of each episode's ``field`` (named from ``prefix``): its arrays."""
    leaves: dict[str, list[np.ndarray]] = {}
    for _, ep in episodes:
        for col, values in named_leaves(getattr(ep, field), prefix):
            leaves.setdefault(col, []).append(as_array(values))
    return leaves


def _episode_table(episodes: list[tuple[int, Episode]]) -> Any:
    pa = require("pyarrow", "ray", "gym_recording.ray.read_traces()")
    cols: dict[str, Any] = {
        "episode": pa.array([i for i, _ in episodes], pa.int64()),
        "writer": pa.array([ep.writer for _, ep in episodes], pa.string()),
        "length": pa.array([ep.length for _, ep in episodes], pa.int64()),
        "total_reward": pa.array([ep.total_reward for _, ep in episodes], pa.float64()),
        "terminated": pa.array([ep.terminated for _, ep in episodes], pa.bool_()),
        "truncated": pa.array([ep.truncated for _, ep in episodes], pa.bool_()),
        "seed": pa.array([int64_seed(ep.seed) for _, ep in episodes], pa.int64()),
    }
    for name in ("observations", "actions"):
        for col, arrays in _leaves(episodes, name, name).items():
            cols[col] = _ragged_column(arrays)
    cols["rewards"] = _ragged_column([np.asarray(ep.rewards, np.float64) for _, ep in episodes])
    return pa.table(cols)


def _step_table(episodes: list[tuple[int, Episode]]) -> Any:
    pa = require("pyarrow", "ray", "gym_recording.ray.read_traces()")
    lengths = [ep.length for _, ep in episodes]
    total = sum(lengths)
    terminated = np.zeros(total, bool)
    truncated = np.zeros(total, bool)
    end = 0
    for (_, ep), n in zip(episodes, lengths, strict=True):
        end += n
        if n:
            terminated[end - 1] = ep.terminated
            truncated[end - 1] = ep.truncated
    cols: dict[str, Any] = {
        "episode": pa.array(np.repeat([i for i, _ in episodes], lengths).astype(np.int64)),
        "step": pa.array(
            np.concatenate([np.arange(n, dtype=np.int64) for n in lengths] or [np.zeros(0, int)])
        ),
    }
    obs_leaves = _leaves(episodes, "observations", "")
    act_leaves = _leaves(episodes, "actions", "action")
    for suffix, arrays in obs_leaves.items():
        cols[f"obs{suffix}"] = _arrow_column(np.concatenate([a[:-1] for a in arrays]))
    for col, arrays in act_leaves.items():
        cols[col] = _arrow_column(np.concatenate(arrays))
    rewards = [np.asarray(ep.rewards, np.float64) for _, ep in episodes]
    cols["reward"] = pa.array(np.concatenate(rewards) if rewards else np.zeros(0))
    for suffix, arrays in obs_leaves.items():
        cols[f"next_obs{suffix}"] = _arrow_column(np.concatenate([a[1:] for a in arrays]))
    cols["terminated"] = pa.array(terminated)
    cols["truncated"] = pa.array(truncated)
    return pa.table(cols)


def _read_task(batch: dict[str, np.ndarray], recording: Recording, per: str) -> Any:
    """Ray task: read the episodes that start in the batch files described by ``batch``."""
    episodes: list[tuple[int, Episode]] = []
    for start, stop in zip(batch["start"].tolist(), batch["stop"].tolist(), strict=True):
        episodes.extend((i, recording[i]) for i in range(start, stop))
    return _episode_table(episodes) if per == "episode" else _step_table(episodes)


def read_traces(
    path: str | os.PathLike[str],
    *,
    per: Literal["episode", "step"] = "episode",
    storage_options: dict[str, Any] | None = None,
) -> Any:
    """Read a recording as a ``ray.data.Dataset``, one read task per batch file.

    Episodes are numbered as :func:`gym_recording.load` numbers them, from the manifests present
    when this is called (batches written later are not read). Observations and actions of a
    Dict or Tuple space become one column per leaf (``observations.<key>``,
    ``observations.<index>``); arrays are Ray tensor columns. Rendered frames, step infos
    and reset options are not read into the rows (:func:`gym_recording.load` gives them).

    Args:
        path: A recording directory or an fsspec URL (``"s3://bucket/run1"``) that every Ray
            worker can reach.
        per: ``"episode"``: a row per episode with the columns ``episode``, ``writer``,
            ``length``, ``total_reward``, ``terminated``, ``truncated``, ``seed`` (null
            without one, or for one past int64, which ``load`` gives), ``observations``
            (``length + 1`` steps), ``actions`` and ``rewards``. ``"step"``: a row per step
            with ``episode``, ``step``, ``obs``, ``action``, ``reward``, ``next_obs``,
            ``terminated``, ``truncated`` (true only on an episode's last step).
        storage_options: Options for the filesystem of a URL, as for :func:`gym_recording.load`.

    Returns:
        A ``ray.data.Dataset`` (lazy; it reads when consumed).

    Raises:
        DependencyNotInstalled: Ray Data is not installed (the ``ray`` extra).
        TraceFormatError: a manifest is damaged (batches are checked when read).

    Example::

        import ray
        from gym_recording.ray import read_traces

        ray.init()
        steps = read_traces("s3://bucket/run1", per="step")
        for batch in steps.iter_batches(batch_size=4096):  # obs, action, reward, next_obs ...
            ...
    """
    if per not in ("episode", "step"):
        msg = f"expected per to be 'episode' or 'step', got {per!r}"
        raise ValueError(msg)
    ray = require("ray", "ray", "gym_recording.ray.read_traces()")
    require("ray.data", "ray", "gym_recording.ray.read_traces()")
    recording = load(path, storage_options=storage_options)
    tasks = _batch_tasks(recording)
    ds = ray.data.from_items(tasks, override_num_blocks=max(len(tasks), 1))
    return ds.map_batches(
        _read_task,
        batch_size=None,
        batch_format="numpy",
        fn_kwargs={"recording": recording, "per": per},
    )
