"""Minari interop: a recording as a Minari dataset, and a Minari dataset as a recording.

Both ways carry what both can hold: each episode's observations, actions, rewards,
terminations and truncations, the reset's seed and options, the infos (in Minari, a dict of
per-step values, the reset's first), the spaces and the environment's spec. The recording's
episode times go in Minari's episode metadata (``gym_recording_started_at``,
``gym_recording_ended_at``, and ``gym_recording_index``, the episode's place in the
recording), its metadata in the dataset's metadata (``gym_recording``); an import reads them
back.

The types Minari's columns and JSON do not keep are noted in each episode's metadata
(``gym_recording_kinds``: the numpy dtype of an option or of an info's numbers, a tuple, a
Python int among numpy ones), and an import gives each value its recorded type back.

What Minari cannot hold is left out and named in one
:class:`~gym_recording.LossyExportWarning`: the info keys not in every info of an episode
(MuJoCo's reset info lacks some; the others are kept), infos that are not dicts of common
keys, an info key whose values are not of one kind at every step (numbers, bools, strings,
dicts of such, arrays or lists of numbers of one shape) or are ints past int64 (the other
keys are kept), the types of an info's values that change between steps (they are stored
as one), options that are not JSON (a dict of numbers, strings, lists, dicts and numpy
values), an empty dict in options in HDF5 storage (which has one attribute per leaf: the
dataset holds the options as Minari's own ``DataCollector`` stores them, without it; the
warning names its place, ``options['a']``), zero-step episodes in HDF5 storage, or in
arrow storage when the actions hold arrays (neither stores an episode without a step
then), and an environment's spec whose kwargs were not JSON when it was recorded; in
Minari's arrow storage, which holds one
layout of infos, the infos of a recording whose episodes' infos differ in keys or types (or
are missing from some). A part of a space the recording could not describe (a
:class:`~gym_recording.format.spaces.UnknownSpace`) is inferred from the recorded values.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import itertools
import json
import math
import os
import shutil
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from gym_recording._errors import (
    DependencyNotInstalled,
    ExportError,
    OutputExistsError,
    RecordingError,
)
from gym_recording._optional import require
from gym_recording._progress import progress
from gym_recording.format.fields import field_step
from gym_recording.format.names import find_manifests
from gym_recording.format.spaces import UnknownSpace
from gym_recording.read.episode import Episode
from gym_recording.read.notebook import step_flags
from gym_recording.read.recording import Recording
from gym_recording.record.recording import TraceRecording
from gym_recording.storage import is_url, open_storage
from gym_recording.tools._minari_values import (
    Lost,
    buffer_infos,
    kind_of,
    layout_of,
    options_of,
    retyped,
)
from gym_recording.tools._source import episodes, open_recording, source_location

__all__ = ["export_minari", "import_minari"]

#: Episodes handed to Minari at a time.
_CHUNK = 64


def _minari() -> Any:
    return require("minari", "minari", "export --to minari / import-minari")


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


def _dataset_path(dataset_id: str, *, reading: bool = False) -> str:
    """Where Minari keeps ``dataset_id`` (its datasets' directory is made if missing).

    Raises:
        RecordingError: that directory cannot be made.
    """
    from minari.storage import get_dataset_path

    root = os.environ.get("MINARI_DATASETS_PATH")
    if not reading and root and not os.path.isabs(root):  # (Minari writes under it twice)
        msg = (
            f"cannot write the Minari dataset {dataset_id}: MINARI_DATASETS_PATH is a "
            f"relative path ({root!r}), which Minari's storage writes to wrongly; set it to an "
            f"absolute path, such as {os.path.abspath(root)}"
        )
        raise RecordingError(msg)
    try:
        return os.fspath(get_dataset_path(dataset_id))
    except OSError as exc:
        raise _place_error(dataset_id, exc, reading=reading) from exc


def _place_error(
    dataset_id: str, exc: OSError, path: str | None = None, *, reading: bool = False
) -> RecordingError:
    """The error of a Minari dataset that cannot be written (or read) where Minari keeps them."""
    where = f" at {path}" if path is not None else ""
    of = f" ({exc.filename})" if exc.filename not in (None, path) else ""
    msg = (
        f"cannot {'read' if reading else 'write'} the Minari dataset {dataset_id}{where}{of}: "
        f"{exc.strerror or exc}; Minari keeps its datasets where MINARI_DATASETS_PATH says "
        "(else ~/.minari/datasets): set it to "
        f"{'the directory that holds it' if reading else 'a directory you may write to'}"
    )
    return RecordingError(msg)


# --------------------------------------------------------------------------------- spaces


def _complete(space: Any, fields: list[Any], where: str) -> Any:
    """``space`` with each unknown part (``None``, :class:`UnknownSpace`) inferred.

    ``fields`` are the values of that part in every episode; those of an episode that holds
    a Dict or Tuple part as per-step values (its layout changed) are not counted.
    """
    from gymnasium import spaces

    if not _any_leaf(space, _unknown):  # (nothing to infer)
        return space
    if _unknown(space):  # (a Dict or Tuple as its values are laid out, else a leaf)
        head = next((f for f in fields if isinstance(f, (dict, tuple))), None)
        if head is None:
            return _infer(fields, where)
        space = dict.fromkeys(head) if isinstance(head, dict) else [None] * len(head)
    if isinstance(space, (dict, spaces.Dict)):
        fields = [f for f in fields if isinstance(f, dict)]
        return spaces.Dict(
            {k: _complete(s, [f[k] for f in fields], f"{where}.{k}") for k, s in space.items()}
        )
    fields = [f for f in fields if isinstance(f, tuple)]  # (else a Tuple, or its positions)
    return spaces.Tuple(
        [_complete(s, [f[i] for f in fields], f"{where}[{i}]") for i, s in enumerate(space)]
    )


def _infer(fields: list[Any], where: str) -> Any:
    """A space for a leaf from its values in every episode (arrays, or per-step strings)."""
    from gymnasium import spaces

    if fields and all(isinstance(f, np.ndarray) and f.dtype.kind in "biuf" for f in fields):
        head = fields[0]
        values = np.concatenate([f.reshape(len(f), math.prod(f.shape[1:])) for f in fields])
        if head.ndim == 1 and head.dtype.kind in "iu":
            low = int(values.min()) if values.size else 0
            high = int(values.max()) if values.size else 0
            return spaces.Discrete(high - low + 1, start=low)
        if head.dtype.kind == "f":
            return spaces.Box(-np.inf, np.inf, shape=head.shape[1:], dtype=head.dtype)
        if head.dtype.kind == "b":
            return spaces.Box(0, 1, shape=head.shape[1:], dtype=head.dtype)
        info = np.iinfo(head.dtype)
        return spaces.Box(info.min, info.max, shape=head.shape[1:], dtype=head.dtype)
    if fields and all(isinstance(f, list) and all(type(v) is str for v in f) for f in fields):
        texts = [v for f in fields for v in f]
        chars = "".join(sorted(set("".join(texts)))) or " "
        return spaces.Text(max(1, *map(len, texts)), min_length=0, charset=chars)
    if not fields:
        why = (
            "no episode holds it as a part of its dict or tuple (their layout changed partway: "
            "the recorder then stores the whole field step by step)"
        )
    elif any(isinstance(f, list) for f in fields):
        why = (
            "its values are per-step values that are not all strings (their type or shape "
            "changed partway, or the env returned lists), which no one space fits"
        )
    else:
        why = "its values are neither numeric arrays nor strings"
    msg = (
        f"cannot infer a space for {where}: the recording did not record it, and {why}; "
        "record the env's spaces (observation_space=, action_space=) to export it, or read "
        "the episodes with gym_recording.load"
    )
    raise ExportError(msg)


def _ordered(f: Any, space: Any, name: str, exact: bool) -> Any:
    """A field's dict keys in the order of its Dict space (Minari encodes by the space).

    With ``exact`` (Minari's arrow storage, which stores values as their space says and
    refuses others), what it would refuse is refused here, naming the field: arrays of
    another dtype or per-step shape than their array space declares (an env whose ``Box``
    says float32 and which returns float64: Gymnasium's checker only warns), per-step values
    of an array space (lists, or values whose type changed) that do not make one array of
    that dtype and shape (those that do go as that array), and a Dict or Tuple field stored
    as per-step values (its layout changed partway).
    """
    from gymnasium import spaces

    if isinstance(f, dict) and isinstance(space, spaces.Dict):
        return {k: _ordered(f[k], space[k], f"{name}.{k}", exact) for k in space.spaces if k in f}
    if isinstance(f, tuple) and isinstance(space, spaces.Tuple):
        children = zip(f, space.spaces, strict=True)
        return tuple(_ordered(v, s, f"{name}.{i}", exact) for i, (v, s) in enumerate(children))
    changed = (
        "(an env that returns them so, or whose values changed type or shape partway: the "
        "recorder then stores them one by one)"
    )
    if not isinstance(f, np.ndarray):
        values = list(f)
        if not (exact and values):
            return values
        if isinstance(space, (spaces.Dict, spaces.Tuple)):
            msg = (
                f"the {name} are per-step values, not one field per part of their "
                f"{type(space).__name__} space {changed}, and Minari's arrow storage stores "
                "them part by part: read the episodes with gym_recording.load instead"
            )
            raise ExportError(msg)
        if not _is_array_space(space):
            return values
        try:
            stacked = np.asarray(values)
        except (ValueError, TypeError):  # (of several shapes)
            got = "of several shapes"
        else:
            if stacked.dtype == space.dtype and stacked.shape[1:] == space.shape:
                return stacked
            got = f"{stacked.dtype}{list(stacked.shape[1:])} together"
        msg = (
            f"the {name} are per-step values ({got}) {changed}, but Minari's arrow "
            f"storage stores them as arrays of their space, {space}: make the env return "
            f"{space.dtype} arrays of shape {space.shape}, or read the episodes with "
            "gym_recording.load instead"
        )
        raise ExportError(msg)
    if exact and _is_array_space(space) and (f.dtype != space.dtype or f.shape[1:] != space.shape):
        msg = (
            f"the {name} were recorded as {f.dtype}{list(f.shape[1:])}, but their space declares "
            f"{space.dtype}{list(space.shape)}, as Minari stores them: make the env return "
            f"{space.dtype} arrays of shape {space.shape}, or export to npz or parquet, which "
            "keep what was recorded"
        )
        raise ExportError(msg)
    return f


def _any_leaf(space: Any, test: Callable[[Any], bool]) -> bool:
    """Whether ``test`` holds for a space of ``space``'s leaves (inside Dicts and Tuples)."""
    from gymnasium import spaces

    if isinstance(space, spaces.Dict):
        return any(_any_leaf(s, test) for s in space.spaces.values())
    if isinstance(space, spaces.Tuple):
        return any(_any_leaf(s, test) for s in space.spaces)
    return test(space)


def _is_array_space(space: Any) -> bool:
    """Whether Minari stores ``space`` as fixed-size lists (Box and the like)."""
    from gymnasium import spaces

    return isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary))


def _unknown(space: Any) -> bool:
    return space is None or isinstance(space, UnknownSpace)


def _has_image_space(space: Any) -> bool:
    """Whether Minari would JPEG-encode (part of) a space, by Minari's own test."""
    try:
        from minari.dataset.minari_storage import is_image_space
    except ImportError:  # a Minari without JPEG encoding
        return False
    return _any_leaf(space, lambda s: bool(is_image_space(s)))


def _check_not_empty(space: Any, what: str) -> None:
    """Refuse a space with a leaf of no elements (Minari's storage divides by its size)."""
    if _any_leaf(space, lambda s: _is_array_space(s) and 0 in s.shape):
        msg = (
            f"cannot export to Minari: the {what} space {space} holds arrays of no elements, "
            "which Minari cannot store; export to npz instead"
        )
        raise ExportError(msg)


def _one_layout(rec: Recording, lost: Lost, skip_empty: bool) -> bool:
    """Whether the infos of every episode exported take one layout in Minari (or none has).

    (Minari's arrow storage cannot read back a dataset of two: it fills the infos of an
    episode given none with NaN, and refuses arrays of other shapes or types.) If so, what
    each episode's infos lose goes to ``lost``.
    """
    seen, trial = set(), Lost()  # (what they lose, said only if they are kept)
    for ep in rec:
        if ep.length or not skip_empty:  # (a zero-step episode left out is not exported)
            infos, _ = buffer_infos(ep.infos, trial, arrow=True)
            seen.add(None if infos is None else layout_of(infos))
    if len(seen) > 1:
        return False
    lost.counts.update(trial.counts)
    return True


def _recorded_spec(rec: Recording, lost: Lost) -> Any:
    """The environment's spec as the recording holds it, rebuilt, or ``None``."""
    from gymnasium.envs.registration import EnvSpec

    spec = rec[0].env_spec
    if spec is None:
        return None
    try:
        return EnvSpec.from_json(json.dumps(spec))
    except Exception:  # a summary of a spec (record/head.py: not JSON, or too large)
        lost.add("the environment's spec (it was recorded as a summary: not JSON, or too large)")
        return None


# ------------------------------------------------------------------------- export


def export_minari(directory: str | os.PathLike[str], dataset_id: str) -> str:
    """Create the Minari dataset ``dataset_id`` with the episodes of the recording.

    Uses ``minari.create_dataset_from_buffers`` with one ``EpisodeBuffer`` per episode, in
    Minari's Arrow format (pyarrow) when available, else HDF5 (h5py), losslessly (no JPEG
    encoding of images where Minari supports turning it off). What is carried, and what is
    left out with a warning, is said in :mod:`gym_recording.tools.minari`.

    Args:
        directory: A recording directory.
        dataset_id: ``namespace/name-v0``; must not exist under Minari's datasets path.

    Returns:
        The dataset's directory.

    Raises:
        ExportError: ``dataset_id`` is not a Minari id, the recording is empty, a space
            cannot be inferred, or Minari refuses the data.
        OutputExistsError: the dataset exists already.
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
    lost = Lost()
    with open_recording(directory) as rec:
        if not len(rec):
            msg = f"{rec.directory} holds no episode to export"
            raise ExportError(msg)
        _check_one_env(rec)
        obs_space = rec.observation_space
        act_space = rec.action_space
        if _any_leaf(obs_space, _unknown) or _any_leaf(act_space, _unknown):
            everything = list(rec)
            obs_space = _complete(obs_space, [e.observations for e in everything], "observations")
            act_space = _complete(act_space, [e.actions for e in everything], "actions")
            del everything
        _check_not_empty(obs_space, "observation")
        _check_not_empty(act_space, "action")
        kwargs: dict[str, Any] = {
            "observation_space": obs_space,
            "action_space": act_space,
            "data_format": formats[0],
            "algorithm_name": str(rec.metadata.get("policy", "unknown")),
            "author": str(rec.metadata.get("author", "gym-recording")),
            "author_email": str(rec.metadata.get("author_email", "unknown")),
            "code_permalink": str(rec.metadata.get("code_permalink", "unknown")),
            "description": (
                f"Exported by gym-recording from {source_location(rec)} "
                f"({len(rec)} episodes of {rec.env_id or 'an unknown environment'})."
            ),
        }
        if "jpeg_encoding" in inspect.signature(minari.create_dataset_from_buffers).parameters:
            kwargs["jpeg_encoding"] = False
        elif _has_image_space(obs_space) or _has_image_space(act_space):
            lost.add("exact image observations (this Minari stores them as JPEG)")
        # (Minari would make the env to check it: the spec goes in the metadata afterwards, so
        # that an env that cannot be made here still exports with its spec.)
        spec = _recorded_spec(rec, lost)
        arrow = formats[0] == "arrow"  # (hdf5 takes the recorded dtypes)
        # (zero-step episodes: HDF5 storage needs a step, arrow one for array actions)
        skip_empty = not arrow or _any_leaf(act_space, _is_array_space)

        # (Minari's arrow storage holds one layout of infos: every episode's, or none)
        record_infos = any(m.record_infos for m in rec.writers)
        said, keep_infos = lost, True  # (where what the infos lose is said: once)
        if arrow and record_infos:
            keep_infos, said = _one_layout(rec, lost, skip_empty), Lost()
        if not keep_infos:
            lost.add(
                "the infos (their keys or types differ between episodes, and Minari's arrow "
                "storage holds one layout)"
            )

        def buffers() -> Iterator[tuple[dict[str, Any], Any]]:
            for ep in episodes(rec, "minari"):
                n = ep.length
                if ep.render_frames is not None:
                    lost.add("rendered frames (export them with --to mp4, or to npz)")
                if not n and skip_empty:
                    needs = (
                        "arrow storage needs a step for array actions"
                        if arrow
                        else "HDF5 storage needs a step"
                    )
                    lost.add(f"zero-step episodes (Minari's {needs})")
                    continue
                terminations, truncations = step_flags(ep)
                infos, info_kinds = (
                    buffer_infos(ep.infos, said, arrow=arrow) if keep_infos else (None, None)
                )
                options = options_of(ep.options, lost, arrow=arrow)
                kinds = {
                    "options": kind_of(ep.options) if options is not None else None,
                    "infos": info_kinds,
                }
                try:
                    observations = _ordered(ep.observations, obs_space, "observations", arrow)
                    actions = _ordered(ep.actions, act_space, "actions", arrow)
                except ExportError as exc:
                    raise ExportError(f"episode {ep.index}: {exc}") from None
                yield (
                    _episode_metadata(ep, kinds),
                    EpisodeBuffer(
                        seed=ep.seed,
                        options=options,
                        observations=observations,
                        actions=actions,
                        rewards=np.asarray(ep.rewards, dtype=np.float64),
                        terminations=terminations,
                        truncations=truncations,
                        infos=infos,
                    ),
                )

        try:
            _write(minari, dataset_id, buffers(), kwargs, rec, spec, keep_infos and record_infos)
        except BaseException as exc:
            shutil.rmtree(path, ignore_errors=True)
            refused = (AssertionError, ValueError, TypeError, KeyError, IndexError, OverflowError)
            if isinstance(exc, refused) and not isinstance(exc, RecordingError):
                why = str(exc) or type(exc).__name__  # (an assert's may hold the values)
                why = why if len(why) <= 300 else f"{why[:300]}... ({type(exc).__name__})"
                msg = f"Minari could not store the recording as {dataset_id}: {why}"
                raise ExportError(msg) from exc
            if isinstance(exc, OSError):  # (a full disk, a directory one may not write to)
                raise _place_error(dataset_id, exc, path) from exc
            raise
    lost.warn(dataset_id)
    return path


def _check_one_env(rec: Recording) -> None:
    """Refuse a recording whose writers recorded other envs or spaces (a dataset has one).

    A space the recording could not describe (``Unknown``, which holds its ``repr``: a
    function's address, say, that differs between processes) is not compared.
    """
    first = rec.writers[0]
    for w in rec.writers[1:]:
        for key in ("env_id", "observation_space", "action_space"):
            a, b = getattr(first, key), getattr(w, key)
            if a != b and not (key != "env_id" and ('"Unknown"' in _text(a) + _text(b))):
                msg = (
                    f"{rec.directory} holds the episodes of writers whose {key} differs "
                    f"({first.writer}: {_text(a)[:120]}, {w.writer}: {_text(b)[:120]}); a "
                    "Minari dataset holds one env: record each env into a directory of its own"
                )
                raise ExportError(msg)


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr)


def _write(
    minari: Any,
    dataset_id: str,
    buffers: Iterator[tuple[dict[str, Any], Any]],
    kwargs: dict[str, Any],
    rec: Recording,
    spec: Any,
    record_infos: bool,
) -> None:
    """Hand the buffers to Minari a chunk at a time (numbered from 0), then the metadata.

    Each chunk's episode metadata goes with it; the dataset's comes last.
    """
    dataset = None
    written = 0
    with warnings.catch_warnings():
        # Minari warns about metadata it would like (eval_env, ref scores...).
        warnings.simplefilter("ignore", UserWarning)
        while True:
            chunk = list(itertools.islice(buffers, _CHUNK))
            bufs = [dataclasses.replace(b, id=written + j) for j, (_, b) in enumerate(chunk)]
            if dataset is None:
                dataset = minari.create_dataset_from_buffers(dataset_id, bufs, **kwargs)
            elif bufs:
                dataset.update_dataset_from_buffer(bufs)
            if chunk:
                dataset.storage.update_episode_metadata(
                    [meta for meta, _ in chunk],
                    range(written, written + len(chunk)),
                )
            written += len(chunk)
            if len(chunk) < _CHUNK:
                break
        if spec is not None:
            dataset.storage.update_metadata({"env_spec": spec.to_json()})
        dataset.storage.update_metadata(
            {
                "gym_recording": {
                    "directory": source_location(rec),
                    "env_id": rec.env_id,
                    "metadata": rec.metadata,
                    "writers": [m.writer for m in rec.writers],
                    # (Minari stores infos of no keys as none: this tells {} from None)
                    "record_infos": record_infos,
                }
            }
        )


def _episode_metadata(ep: Episode, kinds: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"gym_recording_index": ep.index}
    if any(k is not None for k in kinds.values()):  # (JSON text: HDF5 attributes are flat)
        out["gym_recording_kinds"] = json.dumps(kinds)
    if ep.started_at is not None:
        out["gym_recording_started_at"] = ep.started_at
    if ep.ended_at is not None:
        out["gym_recording_ended_at"] = ep.ended_at
    return out


# ------------------------------------------------------------------------- import


def import_minari(dataset_id: str, out: str | os.PathLike[str]) -> str:
    """Convert the local Minari dataset ``dataset_id`` into a recording in ``out``.

    Observations, actions, rewards, terminations, truncations, seeds, options and infos are
    kept; the manifest records the dataset's env id, spec and spaces, and as metadata
    ``{"source": "minari", "dataset_id": ..., "minari_version": ...}`` (with the metadata of
    the recording a dataset was exported from, and its episode times, where it holds them).

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
    if is_url(out):  # (an object store's "directory": refused if it holds a recording)
        if find_manifests(open_storage(out, create=True).list_names()):
            msg = f"{out} already holds a recording; choose another output directory"
            raise OutputExistsError(msg)
    elif os.path.exists(out) and (not os.path.isdir(out) or os.listdir(out)):
        msg = f"{out} exists and is not an empty directory; choose another output directory"
        raise OutputExistsError(msg)
    _check_dataset_id(dataset_id)
    try:
        dataset = minari.load_dataset(dataset_id)
    except FileNotFoundError as exc:
        where = _dataset_path(dataset_id, reading=True)
        msg = (
            f"no local Minari dataset {dataset_id} (looked in {where}); download it first "
            f"with `minari download {dataset_id}`"
        )
        raise ExportError(msg) from exc
    except OSError as exc:  # (its datasets' directory, made by Minari if missing)
        raise _place_error(dataset_id, exc, reading=True) from exc
    spec = dataset.env_spec
    env_spec = None
    if spec is not None:
        try:
            env_spec = json.loads(spec.to_json())
        except Exception:  # kwargs that do not serialise: the id alone
            env_spec = None
    source = dataset.storage.metadata.get("gym_recording")
    metadata: dict[str, Any] = {}
    if isinstance(source, dict) and isinstance(source.get("metadata"), dict):
        metadata.update(source["metadata"])
    metadata.update(
        source="minari", dataset_id=dataset_id, minari_version=getattr(minari, "__version__", None)
    )
    indices = [int(i) for i in dataset.episode_indices]
    metas = list(dataset.storage.get_episode_metadata(indices))
    infos = (isinstance(source, dict) and source.get("record_infos") is True) or (
        bool(indices) and bool(next(iter(dataset.iterate_episodes(indices[:1]))).infos)
    )
    rec = TraceRecording(
        out,
        env_id=getattr(spec, "id", None),
        env_spec=env_spec,
        observation_space=dataset.observation_space,
        action_space=dataset.action_space,
        metadata=metadata,
        record_infos=infos,
    )
    with rec:
        episodes_ = dataset.iterate_episodes(indices)
        for ep, meta in progress(
            zip(episodes_, metas, strict=True), total=len(indices), desc="importing"
        ):
            _import_episode(rec, ep, meta)
    return rec.directory


def _import_episode(rec: TraceRecording, ep: Any, meta: dict[str, Any]) -> None:
    seed = meta.get("seed")
    try:
        kinds = json.loads(meta.get("gym_recording_kinds", "{}"))
        info_kinds, option_kinds = kinds.get("infos"), kinds.get("options")
    except (TypeError, ValueError, AttributeError, RecursionError):  # (made elsewhere: as is)
        info_kinds = option_kinds = None
    obs, actions = ep.observations, ep.actions
    infos = ep.infos or None
    empty: dict[str, Any] | None = {} if rec.record_infos else None  # (where Minari has none)
    rec.add_reset(
        field_step(obs, 0),
        seed=None if seed is None else int(seed),
        options=retyped(meta.get("options"), option_kinds),
        info=retyped(_info_at(infos, 0), info_kinds) if infos else empty,
        started_at=_time(meta.get("gym_recording_started_at")),
    )
    for t in range(len(ep.rewards)):
        rec.add_step(
            field_step(actions, t),
            field_step(obs, t + 1),
            float(ep.rewards[t]),
            terminated=bool(ep.terminations[t]),
            truncated=bool(ep.truncations[t]),
            info=retyped(_info_at(infos, t + 1), info_kinds) if infos else empty,
        )
    rec.end_episode(ended_at=_time(meta.get("gym_recording_ended_at")))


def _info_at(infos: dict[str, Any], t: int) -> dict[str, Any]:
    """Step ``t``'s info of Minari's dict of per-step values."""
    return {k: _info_at(v, t) if isinstance(v, dict) else v[t] for k, v in infos.items()}


def _time(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float, np.number)) else None
