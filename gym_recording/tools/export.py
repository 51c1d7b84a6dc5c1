"""Interop: export a recording to Parquet, Minari or NumPy ``.npz``; import a Minari dataset.

- ``parquet`` (pyarrow, the ``parquet`` extra): one row per step with columns ``episode``,
  ``step``, ``obs``, ``action``, ``reward``, ``next_obs``, ``terminated``, ``truncated``. A scalar
  is a plain column; an array of shape ``S`` a ``fixed_size_list`` of its ``prod(S)`` values
  (C order, the shape in the schema metadata); Dict/Tuple observations a struct of such
  columns (tuple members named ``"0"``, ``"1"``...); other values (text) a string column, or
  JSON text. ``terminated``/``truncated`` are true on an episode's last step only. Episodes of
  zero steps have no row.
- ``npz`` (NumPy only): the recording's arrays concatenated over episodes plus the episode
  boundaries, loadable with ``np.load`` without pickle (see :func:`export_npz`).
- ``minari`` (the ``minari`` extra): a Minari dataset that ``minari.load_dataset`` reads with
  the same episodes, seeds and options.

:func:`import_minari` converts a local Minari dataset into a recording.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import json
import math
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np

from gym_recording._errors import (
    DependencyNotInstalled,
    ExportError,
    LossyExportWarning,
    OutputExistsError,
    RecordingError,
)
from gym_recording._optional import require
from gym_recording._progress import progress
from gym_recording.format.fields import field_step, leaves, slice_field
from gym_recording.read.episode import Episode
from gym_recording.read.recording import Recording, load
from gym_recording.record.recording import TraceRecording

__all__ = [
    "FORMATS",
    "ExportError",
    "LossyExportWarning",
    "OutputExistsError",
    "export",
    "import_minari",
]

#: The formats :func:`export` writes.
FORMATS = ("parquet", "minari", "npz")

#: Parquet row groups are written when this many rows, or bytes, have accumulated.
_ROW_GROUP_ROWS = 65_536
_ROW_GROUP_BYTES = 64 * 1024 * 1024


# --------------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------------


def export(directory: str | os.PathLike[str], *, to: str, out: str | os.PathLike[str]) -> str:
    """Export the recording in ``directory`` as ``to`` to ``out``.

    Args:
        directory: A recording directory.
        to: ``"parquet"``, ``"npz"`` or ``"minari"``.
        out: A file path for parquet and npz (parent directories are created); a Minari
            dataset id such as ``"gym-recording/cartpole-random-v0"`` for minari, created under
            Minari's datasets path (``MINARI_DATASETS_PATH``, else ``~/.minari/datasets``).

    Returns:
        Where the export went: the file written, or the Minari dataset's directory.

    Raises:
        ExportError: ``to`` is not a known format, the directory holds no recording, or the
            data cannot be represented in the target format.
        OutputExistsError: ``out`` exists already.
        DependencyNotInstalled: the format's extra (``parquet`` or ``minari``) is missing.
        TraceFormatError: the recording is damaged.

    Example:
        >>> import tempfile, os, numpy as np, gym_recording
        >>> d = tempfile.mkdtemp()
        >>> with gym_recording.TraceRecording(d) as w:
        ...     w.add_reset(np.zeros(2))
        ...     w.add_step(1, np.ones(2), 0.5, terminated=True)
        >>> path = export(d, to="npz", out=os.path.join(d, "export", "data.npz"))
        >>> np.load(path)["rewards"].tolist()
        [0.5]
    """
    if to not in FORMATS:
        msg = f"unknown export format {to!r}; expected one of {', '.join(FORMATS)}"
        raise ExportError(msg)
    out = os.fspath(out)
    if to == "minari":
        return export_minari(directory, out)
    if os.path.lexists(out):
        msg = f"{out} exists already; remove it or choose another path"
        raise OutputExistsError(msg)
    if to == "parquet":
        return export_parquet(directory, out)
    return export_npz(directory, out)


def _open(directory: str | os.PathLike[str]) -> Recording:
    rec = load(directory)
    if not rec.writers:
        rec.close()
        msg = f"{os.fspath(directory)} holds no recording (no openaigym.trace.*.manifest.json file)"
        raise ExportError(msg)
    return rec


def _episodes(rec: Recording, desc: str) -> Iterator[Episode]:
    yield from progress(rec, total=len(rec), desc=desc)


@contextlib.contextmanager
def _atomic_file(out: str) -> Iterator[str]:
    """A temporary path beside ``out``, renamed to ``out`` on success and removed otherwise."""
    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".gymrec-tmp-export-", dir=parent)
    os.close(fd)
    try:
        yield tmp
        if os.path.lexists(out):
            msg = f"{out} appeared while exporting; remove it or choose another path"
            raise OutputExistsError(msg)
        os.replace(tmp, out)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (bytes, bytearray)):
        return value.decode("latin-1")
    return repr(value)


def _json_text(value: Any) -> str:
    return json.dumps(value, default=_jsonable, allow_nan=True, ensure_ascii=False)


def _description(rec: Recording) -> dict[str, Any]:
    """What the export says about its source (stored as metadata)."""
    first = rec.writers[0]
    return {
        "source": "gym-recording",
        "directory": os.path.abspath(rec.directory),
        "env_id": rec.env_id,
        "observation_space": first.observation_space,
        "action_space": first.action_space,
        "metadata": rec.metadata,
        "writers": [m.writer for m in rec.writers],
    }


# --------------------------------------------------------------------------------------------
# Parquet
# --------------------------------------------------------------------------------------------


def _arrow_field(pa: Any, f: Any, name: str, shapes: dict[str, Any]) -> Any:
    """An Arrow array of the ``n`` steps of a field; records leaf shapes in ``shapes``."""
    if isinstance(f, dict):
        keys = list(f)
        children = [_arrow_field(pa, f[k], f"{name}.{k}", shapes) for k in keys]
        return pa.StructArray.from_arrays(children, names=keys)
    if isinstance(f, tuple):
        children = [_arrow_field(pa, v, f"{name}.{i}", shapes) for i, v in enumerate(f)]
        return pa.StructArray.from_arrays(children, names=[str(i) for i in range(len(f))])
    if isinstance(f, np.ndarray) and f.dtype.kind in "biuf":
        shapes[name] = list(f.shape[1:])
        if f.ndim == 1:
            return pa.array(f)
        width = math.prod(f.shape[1:])
        if width == 0:
            msg = f"cannot export {name}: its per-step arrays of shape {f.shape[1:]} are empty"
            raise ExportError(msg)
        flat = np.ascontiguousarray(f).reshape(-1)
        return pa.FixedSizeListArray.from_arrays(pa.array(flat), width)
    if isinstance(f, np.ndarray):
        msg = f"cannot export {name} to parquet: arrays of dtype {f.dtype} have no Arrow type"
        raise ExportError(msg)
    values = list(f)
    try:
        arr = pa.array(values)
        nulls_for_values = pa.types.is_null(arr.type) and any(v is not None for v in values)
        if pa.types.is_struct(arr.type) or nulls_for_values:
            raise TypeError
        shapes[name] = "value"
        return arr
    except (TypeError, ValueError, pa.ArrowException):
        shapes[name] = "json"
        return pa.array([_json_text(v) for v in values], type=pa.string())


def _episode_table(pa: Any, ep: Episode, shapes: dict[str, Any]) -> Any:
    n = ep.length
    terminated = np.zeros(n, dtype=bool)
    truncated = np.zeros(n, dtype=bool)
    if n:
        terminated[-1], truncated[-1] = ep.terminated, ep.truncated
    columns = {
        "episode": pa.array(np.full(n, ep.index, dtype=np.int64)),
        "step": pa.array(np.arange(n, dtype=np.int64)),
        "obs": _arrow_field(pa, slice_field(ep.observations, 0, n), "obs", shapes),
        "action": _arrow_field(pa, ep.actions, "action", shapes),
        "reward": pa.array(np.asarray(ep.rewards, dtype=np.float64)),
        "next_obs": _arrow_field(pa, slice_field(ep.observations, 1, None), "next_obs", shapes),
        "terminated": pa.array(terminated),
        "truncated": pa.array(truncated),
    }
    return pa.table(columns)


def export_parquet(directory: str | os.PathLike[str], out: str) -> str:
    """Write one row per step to the Parquet file ``out`` (see the module docstring).

    Args:
        directory: A recording directory.
        out: The file to write; must not exist.

    Returns:
        ``out``.
    """
    pa = require("pyarrow", "parquet", "export --to parquet")
    pq = require("pyarrow.parquet", "parquet", "export --to parquet")
    with _open(directory) as rec, _atomic_file(out) as tmp:
        description = _description(rec)
        shapes: dict[str, Any] = {}
        writer = None
        schema = None
        pending: list[Any] = []
        pending_rows = pending_bytes = 0
        empty = None

        def with_meta(schema: Any) -> Any:
            # Shapes are those of the first episode with steps: parquet has one type per column.
            description["shapes"] = shapes
            text = json.dumps(description, default=_jsonable).encode()
            return schema.with_metadata({b"gym_recording": text})

        def flush() -> None:
            nonlocal pending, pending_rows, pending_bytes
            if pending and writer is not None:
                writer.write_table(pa.concat_tables(pending).cast(schema))
            pending, pending_rows, pending_bytes = [], 0, 0

        try:
            for ep in _episodes(rec, "parquet"):
                table = _episode_table(pa, ep, shapes)
                if ep.length == 0:
                    if empty is None:
                        empty = table
                    continue
                if writer is None:
                    schema = with_meta(table.schema)
                    writer = pq.ParquetWriter(tmp, schema)
                if not table.schema.equals(schema, check_metadata=False):
                    try:
                        table = table.cast(schema)
                    except (pa.ArrowException, ValueError) as exc:
                        msg = (
                            f"episode {ep.index} holds values of other types than the "
                            f"episodes before it ({exc}); parquet needs one type per column"
                        )
                        raise ExportError(msg) from exc
                pending.append(table)
                pending_rows += table.num_rows
                pending_bytes += table.nbytes
                if pending_rows >= _ROW_GROUP_ROWS or pending_bytes >= _ROW_GROUP_BYTES:
                    flush()
            if writer is None:  # no steps at all: write the columns, with no rows
                table = empty
                if table is None:
                    table = pa.table(
                        {
                            "episode": pa.array([], pa.int64()),
                            "step": pa.array([], pa.int64()),
                            "reward": pa.array([], pa.float64()),
                            "terminated": pa.array([], pa.bool_()),
                            "truncated": pa.array([], pa.bool_()),
                        }
                    )
                schema = with_meta(table.schema)
                writer = pq.ParquetWriter(tmp, schema)
            flush()
        finally:
            if writer is not None:
                writer.close()
    return out


# --------------------------------------------------------------------------------------------
# npz
# --------------------------------------------------------------------------------------------


def _npz_leaves(f: Any, name: str) -> Iterator[tuple[str, np.ndarray]]:
    for leaf_name, leaf in leaves(f, name):
        if isinstance(leaf, np.ndarray) and leaf.dtype != object:
            yield leaf_name, np.asarray(leaf)
        else:  # text, variable shapes: JSON strings keep np.load pickle-free
            yield leaf_name, np.array([_json_text(v) for v in leaf], dtype=str)


def export_npz(directory: str | os.PathLike[str], out: str) -> str:
    """Write the recording as one NumPy ``.npz`` archive, loadable without pickle.

    Keys (``E`` episodes of ``N_e`` steps):

    - ``observations``: all observations, ``[sum(N_e + 1), ...]``, each episode's reset
      observation first; Dict/Tuple observations as ``observations.<key>`` per leaf.
    - ``actions`` (``actions.<key>``), ``rewards``: ``[sum(N_e), ...]``.
    - ``episode_lengths``, ``episode_starts`` (offset of each episode's first step in
      ``actions``/``rewards``), ``observation_starts`` (offset of its first observation):
      ``[E]`` int64.
    - ``terminated``, ``truncated`` ``[E]`` bool; ``seeds`` ``[E]`` int64 (``-1``: none).
    - ``metadata``: a JSON string (env id, spaces, the recording's metadata).

    Values that are not fixed-shape numbers (text) are stored as JSON strings. Episode ``e``::

        s, n, o = d["episode_starts"][e], d["episode_lengths"][e], d["observation_starts"][e]
        obs, actions = d["observations"][o : o + n + 1], d["actions"][s : s + n]

    Args:
        directory: A recording directory.
        out: The file to write; must not exist (no ``.npz`` suffix is added).

    Returns:
        ``out``.
    """
    with _open(directory) as rec:
        parts: dict[str, list[np.ndarray]] = {}
        layout: list[str] | None = None
        lengths, terminated, truncated, seeds = [], [], [], []
        for ep in _episodes(rec, "npz"):
            leaves = list(_npz_leaves(ep.observations, "observations"))
            leaves += list(_npz_leaves(ep.actions, "actions"))
            names = [n for n, _ in leaves]
            if layout is None:
                layout = names
            elif names != layout:
                msg = (
                    f"episode {ep.index} stores its observations or actions as {names}, "
                    f"unlike the episodes before it ({layout})"
                )
                raise ExportError(msg)
            for name, arr in leaves:
                prev = parts.setdefault(name, [])
                if prev and prev[0].shape[1:] != arr.shape[1:] and arr.dtype.kind != "U":
                    msg = (
                        f"{name} of episode {ep.index} has per-step shape {arr.shape[1:]}, "
                        f"unlike {prev[0].shape[1:]} before; npz needs one shape per array"
                    )
                    raise ExportError(msg)
                prev.append(arr)
            parts.setdefault("rewards", []).append(np.asarray(ep.rewards, dtype=np.float64))
            lengths.append(ep.length)
            terminated.append(ep.terminated)
            truncated.append(ep.truncated)
            seeds.append(-1 if ep.seed is None else ep.seed)
        arrays: dict[str, np.ndarray] = {}
        for name, chunks in parts.items():
            arrays[name] = np.concatenate(chunks) if chunks else np.zeros(0)
        if "rewards" not in arrays:
            arrays["rewards"] = np.zeros(0, dtype=np.float64)
        n = np.asarray(lengths, dtype=np.int64)
        arrays["episode_lengths"] = n
        arrays["episode_starts"] = np.concatenate([[0], np.cumsum(n)[:-1]]).astype(np.int64)
        arrays["observation_starts"] = np.concatenate([[0], np.cumsum(n + 1)[:-1]]).astype(np.int64)
        if not len(n):
            arrays["episode_starts"] = arrays["observation_starts"] = np.zeros(0, np.int64)
        arrays["terminated"] = np.asarray(terminated, dtype=bool)
        arrays["truncated"] = np.asarray(truncated, dtype=bool)
        arrays["seeds"] = np.asarray(seeds, dtype=np.int64)
        arrays["metadata"] = np.array(json.dumps(_description(rec), default=_jsonable))
        with _atomic_file(out) as tmp, open(tmp, "wb") as f:
            np.savez_compressed(f, **arrays)  # type: ignore[arg-type]
    return out


# --------------------------------------------------------------------------------------------
# Minari
# --------------------------------------------------------------------------------------------


def _minari() -> Any:
    minari = require("minari", "minari", "export --to minari / import-minari")
    return minari


def _check_dataset_id(dataset_id: str) -> None:
    from minari.dataset.minari_dataset import parse_dataset_id

    try:
        parse_dataset_id(dataset_id)
    except (ValueError, TypeError):
        msg = (
            f"{dataset_id!r} is not a Minari dataset id; expected namespace/name-v0 "
            "(letters, digits, - and _, and a version)"
        )
        raise ExportError(msg) from None


def _dataset_path(dataset_id: str) -> str:
    from minari.storage import get_dataset_path

    return os.fspath(get_dataset_path(dataset_id))


def _infer_space(f: Any, where: str) -> Any:
    """A gymnasium space for a field of a recording that did not record its spaces."""
    from gymnasium import spaces

    if isinstance(f, dict):
        return spaces.Dict({k: _infer_space(v, f"{where}.{k}") for k, v in f.items()})
    if isinstance(f, tuple):
        return spaces.Tuple([_infer_space(v, f"{where}.{i}") for i, v in enumerate(f)])
    if isinstance(f, np.ndarray) and f.dtype.kind in "biuf":
        if f.ndim == 1 and f.dtype.kind in "iu":
            start = min(int(f.min()), 0) if f.size else 0
            high = int(f.max()) if f.size else 0
            return spaces.Discrete(max(high - start + 1, 1), start=start)
        if f.dtype.kind == "f":
            return spaces.Box(-np.inf, np.inf, shape=f.shape[1:], dtype=f.dtype)
        info = np.iinfo(f.dtype) if f.dtype.kind in "iu" else None
        low_v, high_v = (info.min, info.max) if info is not None else (0, 1)
        return spaces.Box(low_v, high_v, shape=f.shape[1:], dtype=f.dtype)
    msg = f"cannot infer a space for {where}; the recording did not record its spaces"
    raise ExportError(msg)


def _ordered(f: Any, space: Any) -> Any:
    """A field's dict keys in the order of its Dict space (Minari encodes by the space)."""
    from gymnasium import spaces

    if isinstance(f, dict) and isinstance(space, spaces.Dict):
        return {k: _ordered(f[k], space[k]) for k in space.spaces if k in f}
    if isinstance(f, tuple) and isinstance(space, spaces.Tuple):
        return tuple(_ordered(v, s) for v, s in zip(f, space.spaces, strict=True))
    if isinstance(f, np.ndarray):
        return f
    return list(f)


def _json_or_none(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return None
    return value


def _env_spec(env_id: str | None) -> Any:
    """The registered spec of ``env_id`` if it can be made here, else ``None``."""
    if not env_id:
        return None
    import gymnasium

    try:
        spec = gymnasium.spec(env_id)
        gymnasium.make(spec).close()
    except Exception:  # not registered here, or missing dependencies: export without it
        return None
    return spec


def export_minari(directory: str | os.PathLike[str], dataset_id: str) -> str:
    """Create the Minari dataset ``dataset_id`` with the episodes of the recording.

    Uses ``minari.create_dataset_from_buffers`` with one ``EpisodeBuffer`` per episode, in
    Minari's Arrow format (pyarrow) when available, else HDF5 (h5py), losslessly (no JPEG
    encoding of images where Minari supports turning it off).

    Args:
        directory: A recording directory.
        dataset_id: ``namespace/name-v0``; must not exist under Minari's datasets path.

    Returns:
        The dataset's directory.
    """
    minari = _minari()
    from minari.data_collector import EpisodeBuffer

    _check_dataset_id(dataset_id)
    path = _dataset_path(dataset_id)
    if os.path.lexists(path):
        msg = f"the Minari dataset {dataset_id} exists already at {path}; choose another id"
        raise OutputExistsError(msg)
    formats = [
        fmt
        for fmt, module in (("arrow", "pyarrow"), ("hdf5", "h5py"))
        if importlib.util.find_spec(module) is not None
    ]
    if not formats:
        msg = "export --to minari needs pyarrow (or h5py) to write the dataset"
        raise DependencyNotInstalled(f'{msg}; run `pip install "gym-recording[minari]"`')

    with _open(directory) as rec:
        first = rec[0] if len(rec) else None
        obs_space = rec.observation_space
        act_space = rec.action_space
        if obs_space is None or act_space is None:
            if first is None:
                msg = f"{rec.directory} records no spaces and no episode to infer them from"
                raise ExportError(msg)
            obs_space = obs_space or _infer_space(first.observations, "observations")
            act_space = act_space or _infer_space(first.actions, "actions")
        kwargs: dict[str, Any] = {
            "observation_space": obs_space,
            "action_space": act_space,
            "data_format": formats[0],
            "algorithm_name": str(rec.metadata.get("policy", "unknown")),
            "author": str(rec.metadata.get("author", "gym-recording")),
            "author_email": str(rec.metadata.get("author_email", "unknown")),
            "code_permalink": str(rec.metadata.get("code_permalink", "unknown")),
            "description": (
                f"Exported by gym-recording from {os.path.abspath(rec.directory)} "
                f"({len(rec)} episodes of {rec.env_id or 'an unknown environment'})."
            ),
        }
        params = inspect.signature(minari.create_dataset_from_buffers).parameters
        if "jpeg_encoding" in params:
            kwargs["jpeg_encoding"] = False
        elif _has_image_space(obs_space) or _has_image_space(act_space):
            warnings.warn(
                f"minari {getattr(minari, '__version__', '?')} stores image observations as "
                "JPEG, which is lossy; minari 0.5.4 or newer exports them exactly",
                LossyExportWarning,
                stacklevel=2,
            )
        spec = _env_spec(rec.env_id)
        if spec is not None:
            kwargs["env"] = spec

        def buffers() -> Iterator[Any]:
            for ep in _episodes(rec, "minari"):
                n = ep.length
                terminations = np.zeros(n, dtype=bool)
                truncations = np.zeros(n, dtype=bool)
                if n:
                    terminations[-1], truncations[-1] = ep.terminated, ep.truncated
                options = _json_or_none(ep.options)
                yield EpisodeBuffer(
                    id=ep.index,
                    seed=ep.seed,
                    options=options if isinstance(options, dict) else None,
                    observations=_ordered(ep.observations, obs_space),
                    actions=_ordered(ep.actions, act_space),
                    rewards=np.asarray(ep.rewards, dtype=np.float64),
                    terminations=terminations,
                    truncations=truncations,
                    infos=None,
                )

        chunk = 64
        dataset = None
        try:
            with warnings.catch_warnings():
                # Minari warns about metadata it would like (eval_env, env_spec...).
                warnings.simplefilter("ignore", UserWarning)
                batch: list[Any] = []
                for buf in buffers():
                    batch.append(buf)
                    if len(batch) >= chunk:
                        dataset = _minari_write(minari, dataset, dataset_id, batch, kwargs)
                        batch = []
                if batch or dataset is None:
                    dataset = _minari_write(minari, dataset, dataset_id, batch, kwargs)
        except BaseException as exc:
            shutil.rmtree(path, ignore_errors=True)
            if isinstance(exc, (AssertionError, ValueError, TypeError)) and not isinstance(
                exc, RecordingError
            ):
                msg = f"Minari could not store the recording as {dataset_id}: {exc}"
                raise ExportError(msg) from exc
            raise
    return path


def _has_image_space(space: Any) -> bool:
    """Whether Minari would JPEG-encode (part of) a space, by Minari's own test."""
    try:
        from minari.dataset.minari_storage import is_image_space
    except ImportError:  # a Minari without JPEG encoding
        return False
    from gymnasium import spaces

    if isinstance(space, spaces.Dict):
        return any(_has_image_space(s) for s in space.spaces.values())
    if isinstance(space, spaces.Tuple):
        return any(_has_image_space(s) for s in space.spaces)
    return bool(is_image_space(space))


def _minari_write(
    minari: Any, dataset: Any, dataset_id: str, batch: list[Any], kwargs: dict[str, Any]
) -> Any:
    if dataset is None:
        return minari.create_dataset_from_buffers(dataset_id, batch, **kwargs)
    dataset.update_dataset_from_buffer(batch)
    return dataset


def import_minari(dataset_id: str, out: str | os.PathLike[str]) -> str:
    """Convert the local Minari dataset ``dataset_id`` into a recording in ``out``.

    Observations, actions, rewards, terminations, truncations, seeds and options are kept;
    the manifest records the dataset's env id and spaces, and ``{"source": "minari",
    "dataset_id": ...}`` as metadata.

    Args:
        dataset_id: A dataset under Minari's datasets path (``MINARI_DATASETS_PATH``); download
            remote ones first with ``minari download``.
        out: The recording directory to create; must not exist or be empty.

    Returns:
        The recording directory.

    Raises:
        ExportError: no such local dataset.
        OutputExistsError: ``out`` exists and is not empty.
    """
    minari = _minari()

    out = os.fspath(out)
    if os.path.exists(out) and (not os.path.isdir(out) or os.listdir(out)):
        msg = f"{out} exists and is not an empty directory; choose another output directory"
        raise OutputExistsError(msg)
    _check_dataset_id(dataset_id)
    try:
        dataset = minari.load_dataset(dataset_id)
    except FileNotFoundError as exc:
        msg = (
            f"no local Minari dataset {dataset_id} (looked in {_dataset_path(dataset_id)}); "
            f"download it first with `minari download {dataset_id}`"
        )
        raise ExportError(msg) from exc
    spec = dataset.env_spec
    env_id = getattr(spec, "id", None)
    env_spec = None
    if spec is not None:
        with contextlib.suppress(Exception):
            env_spec = json.loads(spec.to_json())
    indices = [int(i) for i in dataset.episode_indices]
    metas = list(dataset.storage.get_episode_metadata(indices))
    metadata = {
        "source": "minari",
        "dataset_id": dataset_id,
        "minari_version": getattr(minari, "__version__", None),
    }
    rec = TraceRecording(
        out,
        env_id=env_id,
        env_spec=env_spec,
        observation_space=dataset.observation_space,
        action_space=dataset.action_space,
        metadata=metadata,
    )
    with rec:
        episodes = dataset.iterate_episodes(indices)
        for ep, meta in progress(
            zip(episodes, metas, strict=True), total=len(indices), desc="importing"
        ):
            seed = meta.get("seed")
            options = meta.get("options")
            obs, actions = ep.observations, ep.actions
            rec.add_reset(
                field_step(obs, 0),
                seed=None if seed is None else int(seed),
                options=options,
            )
            for t in range(len(ep.rewards)):
                rec.add_step(
                    field_step(actions, t),
                    field_step(obs, t + 1),
                    float(ep.rewards[t]),
                    terminated=bool(ep.terminations[t]),
                    truncated=bool(ep.truncations[t]),
                )
            rec.end_episode()
    return rec.directory
