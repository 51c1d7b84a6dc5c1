"""Interop: export a recording to Parquet, Minari or NumPy ``.npz``; import a Minari dataset.

- ``parquet`` (pyarrow, the ``parquet`` extra): one row per step with columns ``episode``,
  ``step``, ``seed`` (its episode's; null for none), ``obs``, ``action``, ``reward``,
  ``next_obs``, ``terminated``, ``truncated``. A scalar is a plain column; an array of shape
  ``S`` a ``fixed_size_list`` of its ``prod(S)`` values (C order, the shape in the schema
  metadata); Dict/Tuple observations a struct of such columns (tuple members named ``"0"``,
  ``"1"``...); other (per-step) values a column of numbers, bools or text where the first
  episode with steps holds only such scalars, else JSON text (Sequence, Graph, OneOf values).
  ``terminated``/``truncated`` are true on an episode's last step only. Episodes of zero
  steps have no row. Reset options, infos and rendered frames are left out.
- ``npz`` (NumPy only): the recording's arrays concatenated over episodes plus the episode
  boundaries, loadable with ``np.load`` without pickle (see :func:`export_npz`). Reset
  options and infos are left out.
- ``minari`` (the ``minari`` extra): a Minari dataset that ``minari.load_dataset`` reads with
  the same episodes (see :mod:`gym_recording.tools.minari`, which also has
  :func:`import_minari`, a local Minari dataset converted into a recording).
- ``mp4`` (PyAV, the ``video`` extra): a directory of one H.264 video per episode, of its
  :meth:`~gym_recording.Episode.frames` (see :func:`export_mp4`).

Where an export leaves out what some episodes hold, a :class:`~gym_recording.LossyExportWarning`
says what, and of how many episodes.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import tempfile
import warnings
import zipfile
from collections.abc import Iterator
from typing import Any

import numpy as np

from gym_recording._errors import (
    ExportError,
    LossyExportWarning,
    NoFramesError,
    OutputExistsError,
)
from gym_recording._optional import require
from gym_recording.format.fields import named_leaves, slice_field
from gym_recording.format.names import TEMP_PREFIX
from gym_recording.read.episode import Episode
from gym_recording.read.notebook import step_flags
from gym_recording.read.recording import Recording
from gym_recording.read.video import DEFAULT_FPS, write_video
from gym_recording.storage import is_url
from gym_recording.storage.local import atomic_output, directory_mode, make_parent, output_error
from gym_recording.tools._source import (
    episodes,
    episodes_text,
    int64_seed,
    open_recording,
    source_location,
)
from gym_recording.tools.minari import export_minari, import_minari

__all__ = [
    "FORMATS",
    "ExportError",
    "LossyExportWarning",
    "OutputExistsError",
    "export",
    "import_minari",
]

#: The formats :func:`export` writes.
FORMATS = ("parquet", "minari", "npz", "mp4")

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
        to: ``"parquet"``, ``"npz"``, ``"minari"`` or ``"mp4"``.
        out: A file path for parquet and npz (parent directories are created); a Minari
            dataset id such as ``"gym-recording/cartpole-random-v0"`` for minari, created under
            Minari's datasets path (``MINARI_DATASETS_PATH``, else ``~/.minari/datasets``);
            a directory to create for mp4.

    Returns:
        Where the export went: the file written, or the Minari dataset's directory.

    Raises:
        ExportError: ``to`` is not a known format, the directory holds no recording, or the
            data cannot be represented in the target format.
        OutputExistsError: ``out`` exists already.
        DependencyNotInstalled: the format's extra (``parquet``, ``minari`` or ``video``) is
            missing.
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
    if is_url(out):
        msg = f"{out} is a URL: exports are written to a local path (copy the file there after)"
        raise ExportError(msg)
    if os.path.lexists(out):  # (before the recording is read)
        msg = f"{out} exists already; remove it or choose another path"
        raise OutputExistsError(msg)
    if to != "mp4" and out.endswith(("/", os.sep)):
        msg = f"expected OUT to name the {to} file to write, got {out!r}, a directory's name"
        raise ExportError(msg)
    if to == "parquet":
        return export_parquet(directory, out)
    if to == "mp4":
        return export_mp4(directory, out)
    return export_npz(directory, out)


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
        "directory": source_location(rec),
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
    # Per-step values: a column of numbers, bools or text where they are all such scalars,
    # else JSON text; decided by the first episode with steps, so that the column has one
    # type (an episode of empty sequences alone would be typed otherwise than the next).
    values = list(f)
    if not values:  # (a zero-step episode decides nothing)
        return pa.array([], type=pa.string())
    scalars = all(v is None or isinstance(v, _SCALARS) for v in values)
    arr, kind = None, shapes.get(name)
    if scalars and kind != "json":
        try:
            arr = pa.array(values)  # (all None: Arrow's null type, cast to the column's)
        except (TypeError, ValueError, OverflowError, pa.ArrowException):  # (bools among ints)
            arr = None
    if kind is None:  # (the first episode with steps: an Arrow type that is not null)
        typed = arr is not None and not pa.types.is_null(arr.type)
        kind = shapes[name] = "value" if typed else "json"
    if kind == "json":
        return pa.array([_json_text(v) for v in values], type=pa.string())
    if isinstance(kind, list):  # (arrays in the episodes before: the env's values changed)
        msg = (
            f"cannot export {name} to parquet: the episodes before hold it as arrays of "
            f"per-step shape {tuple(kind)}, and this one as per-step values (its env's "
            "values changed type or shape, and the recorder stored them one by one from "
            "then on); parquet needs one type per column: read the episodes with "
            "gym_recording.load instead"
        )
        raise ExportError(msg)
    if arr is None:
        kinds = sorted({type(v).__name__ for v in values})
        msg = (
            f"cannot export {name} to parquet: its column holds numbers, bools or text (from "
            f"the first episode with steps), but this episode holds {', '.join(kinds)} values "
            "it cannot; export to npz, which keeps each value as JSON text"
        )
        raise ExportError(msg)
    return arr


#: Per-step values a parquet column holds as they are (see :func:`_arrow_field`).
_SCALARS = (bool, int, float, str, np.bool_, np.number)


def _episode_table(pa: Any, ep: Episode, shapes: dict[str, Any]) -> Any:
    n = ep.length
    terminated, truncated = step_flags(ep)
    columns = {
        "episode": pa.array(np.full(n, ep.index, dtype=np.int64)),
        "step": pa.array(np.arange(n, dtype=np.int64)),
        # (null: reset without a seed, or with one past int64, which _LeftOut counts)
        "seed": pa.array([int64_seed(ep.seed)] * n, pa.int64()),
        "obs": _arrow_field(pa, slice_field(ep.observations, 0, n), "obs", shapes),
        "action": _arrow_field(pa, ep.actions, "action", shapes),
        "reward": pa.array(np.asarray(ep.rewards, dtype=np.float64)),
        "next_obs": _arrow_field(pa, slice_field(ep.observations, 1, None), "next_obs", shapes),
        "terminated": pa.array(terminated),
        "truncated": pa.array(truncated),
    }
    return pa.table(columns)


def _widened(pa: Any, old: Any, new: Any, name: str, widened: list[str]) -> Any:
    """The Arrow type of column ``name`` that holds its ``old`` and ``new`` values.

    An int leaf of ``old`` where ``new`` has a float leaf becomes float64 (its name goes to
    ``widened``): one env whose values are ints in some episodes and floats in others. Any
    other leaf keeps its ``old`` type, which a cast then checks value by value.
    """
    if old == new:
        return old
    if pa.types.is_integer(old) and pa.types.is_floating(new):
        widened.append(f"{name}: {old}, then {new}")
        return pa.float64()
    if (
        pa.types.is_struct(old)
        and pa.types.is_struct(new)
        and [f.name for f in old] == [f.name for f in new]
    ):
        return pa.struct(
            pa.field(a.name, _widened(pa, a.type, b.type, f"{name}.{a.name}", widened))
            for a, b in zip(old, new, strict=True)
        )
    if (
        pa.types.is_fixed_size_list(old)
        and pa.types.is_fixed_size_list(new)
        and old.list_size == new.list_size
    ):
        item = _widened(pa, old.value_type, new.value_type, f"{name}[]", widened)
        return pa.list_(item, old.list_size)
    return old


def export_parquet(directory: str | os.PathLike[str], out: str) -> str:
    """Write one row per step to the Parquet file ``out`` (see the module docstring).

    A column's type comes from the first episode with steps. A later episode whose values of
    a column of ints are floats (one env whose values are sometimes ints, sometimes floats)
    makes that column float64: the rows written before are written again, their ints as
    float64, which holds every int of at most 2**53 in magnitude exactly; a larger one is
    refused with an :class:`ExportError` naming the column.

    Args:
        directory: A recording directory.
        out: The file to write; must not exist.

    Returns:
        ``out``.
    """
    pa = require("pyarrow", "parquet", "export --to parquet")
    pq = require("pyarrow.parquet", "parquet", "export --to parquet")
    with open_recording(directory) as rec, atomic_output(out) as tmp:
        description = _description(rec)
        shapes: dict[str, Any] = {}
        writer: Any = None
        schema: Any = None
        pending: list[Any] = []
        pending_rows = pending_bytes = 0
        empty = None
        path = tmp  # (the file written; another once a column is widened)

        def with_meta(schema: Any) -> Any:
            # Shapes are those of the first episode with steps: parquet has one type per column.
            description["shapes"] = shapes
            text = json.dumps(description, default=_jsonable).encode()
            return schema.with_metadata({b"gym_recording": text})

        def flush() -> None:
            nonlocal pending, pending_rows, pending_bytes
            if pending:  # (held only once the writer is made)
                writer.write_table(pa.concat_tables(pending).cast(schema))
            pending, pending_rows, pending_bytes = [], 0, 0

        def widen(wider: Any, index: int, widened: list[str]) -> None:
            """Write the rows so far again, to a new file, as the schema ``wider`` types them."""
            nonlocal writer, schema, path
            flush()
            writer.close()  # (made: only an episode after the first with steps widens)
            fd, new_path = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=os.path.dirname(tmp))
            os.close(fd)
            old_path, path = path, new_path  # (removed below if this fails)
            schema = with_meta(wider)
            writer = pq.ParquetWriter(path, schema)
            written = pq.ParquetFile(old_path)
            try:
                for i in range(written.num_row_groups):
                    writer.write_table(written.read_row_group(i).cast(schema))
            except pa.ArrowInvalid as exc:  # (an int that float64 does not hold exactly)
                msg = (
                    f"cannot export to parquet: a column's values are ints in the episodes "
                    f"before episode {index} and floats from it on ({'; '.join(widened)}), "
                    "and parquet needs one type per column; float64 would hold both, but not "
                    f"the ints written before exactly ({exc}). Export to npz, which keeps "
                    "per-step values as JSON text, or read the episodes with "
                    "gym_recording.load and convert the values yourself"
                )
                raise ExportError(msg) from exc
            finally:
                written.close()
                if old_path != tmp:
                    os.unlink(old_path)

        left_out = _LeftOut("parquet")
        done = False
        try:
            for ep in episodes(rec, "parquet"):
                left_out.add(ep)
                try:
                    table = _episode_table(pa, ep, shapes)
                except ExportError as exc:  # (named: the message says what of it)
                    raise ExportError(f"episode {ep.index}: {exc}") from None
                if ep.length == 0:
                    if empty is None:
                        empty = table
                    continue
                if writer is None:
                    schema = with_meta(table.schema)
                    writer = pq.ParquetWriter(path, schema)
                if not table.schema.equals(schema, check_metadata=False):
                    widened: list[str] = []
                    wider = pa.schema(
                        pa.field(a.name, _widened(pa, a.type, b.type, a.name, widened))
                        for a, b in zip(schema, table.schema, strict=True)
                    )
                    if widened:
                        widen(wider, ep.index, widened)
                    try:  # (where the values stay what they are: ints as floats, nulls)
                        cast = table.cast(schema)
                        if not _same(cast.to_pylist(), table.to_pylist()):
                            kinds = [
                                f"{a.name}: {a.type}, not {b.type}"
                                for a, b in zip(table.schema, schema, strict=True)
                                if a.type != b.type
                            ]
                            raise ValueError("; ".join(kinds))
                        table = cast
                    except (pa.ArrowException, ValueError) as exc:
                        msg = (
                            f"episode {ep.index} holds values that the columns' types, set by "
                            f"the episodes before it, do not hold exactly ({exc}); parquet "
                            "needs one type per column, and only a column of ints that floats "
                            "follow is made float64. Export to npz (which joins float32 and "
                            "float64 arrays, and keeps per-step values as JSON text), or read "
                            "the episodes with gym_recording.load and convert the values "
                            "yourself (two envs' recordings in one directory? give each its "
                            "own)"
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
                            "seed": pa.array([], pa.int64()),
                            "reward": pa.array([], pa.float64()),
                            "terminated": pa.array([], pa.bool_()),
                            "truncated": pa.array([], pa.bool_()),
                        }
                    )
                schema = with_meta(table.schema)
                writer = pq.ParquetWriter(path, schema)
            flush()
            done = True
        finally:
            if writer is not None:
                writer.close()
            if path != tmp:  # (the file of a widened column: the export, or a leftover)
                if done:
                    os.replace(path, tmp)
                else:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(path)
        left_out.warn()
    return out


def _same(a: Any, b: Any) -> bool:
    """Whether two rows' values are the same values (NaN is NaN; True is not 1)."""
    if type(a) is bool or type(b) is bool:
        return type(a) is type(b) and a == b
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (a != a and b != b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_same, a, b))
    return bool(a == b)


# --------------------------------------------------------------------------------------------
# npz
# --------------------------------------------------------------------------------------------


class _Spool:
    """An npz array's rows as the episodes come, written out as one ``.npy`` at the end.

    The rows wait in a temporary file, not in memory: a recording's arrays may be larger.

    Args:
        where: The directory of the temporary file (the export's).
        stack: Closes the file.
    """

    def __init__(self, where: str, stack: contextlib.ExitStack) -> None:
        self._where, self._stack = where, stack
        self._file: Any = None
        #: The first rows' dtype and per-step shape (no rows), ``None`` before any.
        self.first: np.ndarray | None = None
        self._chunks: list[tuple[np.dtype[Any], int]] = []  # (dtype, bytes) of each add
        self._dtype: np.dtype[Any] | None = None
        self._rows = 0

    def add(self, rows: np.ndarray) -> None:
        """Append ``rows`` (of the first rows' kind and per-step shape)."""
        rows = np.ascontiguousarray(rows)
        if self._file is None:
            self._file = self._stack.enter_context(  # (closed with the stack)
                tempfile.TemporaryFile(dir=self._where, prefix=TEMP_PREFIX)  # noqa: SIM115
            )
            self.first = rows[:0]
        self._file.write(rows.data)
        self._chunks.append((rows.dtype, rows.nbytes))
        # (the dtype np.concatenate makes of them all: float32 and float64 as float64)
        self._dtype = (
            rows.dtype if self._dtype is None else np.promote_types(self._dtype, rows.dtype)
        )
        self._rows += len(rows)

    def write_npy(self, f: Any) -> None:
        """Write the rows to ``f`` as one ``.npy`` array, as ``np.lib.format.write_array``."""
        assert self.first is not None and self._dtype is not None  # (add() came first)
        header = {
            "descr": np.lib.format.dtype_to_descr(self._dtype),
            "fortran_order": False,
            "shape": (self._rows, *self.first.shape[1:]),
        }
        np.lib.format.write_array_header_1_0(f, header)
        self._file.seek(0)
        for dtype, nbytes in self._chunks:
            if dtype == self._dtype:
                while nbytes:
                    piece = self._file.read(min(nbytes, 1 << 24))
                    f.write(piece)
                    nbytes -= len(piece)
            else:
                rows = np.frombuffer(self._file.read(nbytes), dtype)
                f.write(rows.astype(self._dtype).tobytes())


def _npz_kind(arr: np.ndarray) -> str:
    """What an npz column of an episode holds, for a message."""
    if arr.dtype.kind == "U":
        return "per-step values stored as JSON strings"
    return f"{arr.dtype} arrays of per-step shape {arr.shape[1:]}"


def _npz_leaves(f: Any, name: str) -> Iterator[tuple[str, np.ndarray]]:
    try:
        named = named_leaves(f, name)
    except ValueError as exc:  # (their rows would go to one array)
        raise ExportError(f"cannot export to npz: {exc}") from None
    for leaf_name, leaf in named:
        if isinstance(leaf, np.ndarray) and leaf.dtype != object:
            yield leaf_name, np.asarray(leaf)
        else:  # text, variable shapes: JSON strings keep np.load pickle-free
            yield leaf_name, np.array([_json_text(v) for v in leaf], dtype=str)


class _LeftOut:
    """What an export leaves out of its episodes, counted; :meth:`warn` says so."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.counts = {"rendered frames": 0, "infos": 0, "reset options": 0, "seeds": 0}

    def add(self, ep: Episode, *, frames: bool = True) -> None:
        """Count what ``ep`` has that the export leaves out (its frames too, with ``frames``)."""
        c = self.counts
        c["rendered frames"] += frames and ep.render_frames is not None
        c["infos"] += ep.infos is not None and any(
            i is not None and not (type(i) is dict and not i) for i in ep.infos
        )
        c["reset options"] += ep.options is not None and not (
            type(ep.options) is dict and not ep.options
        )
        c["seeds"] += ep.seed is not None and int64_seed(ep.seed) is None  # (the column's type)

    def warn(self) -> None:
        """A :class:`~gym_recording.LossyExportWarning` naming each part left out."""
        frames = self.counts["rendered frames"]
        rest = [(k, n) for k, n in self.counts.items() if n and k != "rendered frames"]
        said = []
        if frames:
            said.append(
                f"the rendered frames of {episodes_text(frames)} "
                "(`export --to mp4` writes them as videos)"
            )
        if rest:
            said.append(
                " and ".join(f"the {k} of {episodes_text(n)}" for k, n in rest)
                + " (`export --to minari` keeps what Minari can)"
            )
        if said:
            msg = f"{self.what} leaves out {'; and '.join(said)}"
            warnings.warn(msg, LossyExportWarning, stacklevel=4)


def export_npz(directory: str | os.PathLike[str], out: str) -> str:
    """Write the recording as one NumPy ``.npz`` archive, loadable without pickle.

    The episodes are read one at a time; their rows wait in temporary files beside ``out``
    (as much disk as the arrays' raw size) until the archive is written.

    Keys (``E`` episodes of ``N_e`` steps):

    - ``observations``: all observations, ``[sum(N_e + 1), ...]``, each episode's reset
      observation first; Dict/Tuple observations as ``observations.<key>`` per leaf.
    - ``actions`` (``actions.<key>``), ``rewards``: ``[sum(N_e), ...]``.
    - ``episode_lengths``, ``episode_starts`` (offset of each episode's first step in
      ``actions``/``rewards``), ``observation_starts`` (offset of its first observation):
      ``[E]`` int64.
    - ``terminated``, ``truncated`` ``[E]`` bool; ``seeds`` ``[E]`` int64 (``-1``: none, or
      one past int64, which a :class:`~gym_recording.LossyExportWarning` counts).
    - ``metadata``: a JSON string (env id, spaces, the recording's metadata).
    - ``render_frames``: with ``record_render``, every episode's rendered frames,
      ``[sum(N_e + 1), H, W, 3]`` uint8, indexed as the observations are; where only some
      episodes have frames, or of different sizes, they are left out with a
      :class:`~gym_recording.LossyExportWarning`.

    Values that are not fixed-shape numbers (text) are stored as JSON strings. Episode ``e``::

        s, n, o = d["episode_starts"][e], d["episode_lengths"][e], d["observation_starts"][e]
        obs, actions = d["observations"][o : o + n + 1], d["actions"][s : s + n]

    Args:
        directory: A recording directory.
        out: The file to write; must not exist (no ``.npz`` suffix is added).

    Returns:
        ``out``.
    """
    where = os.path.dirname(os.path.abspath(out))  # (the rows wait beside the export)
    with (
        open_recording(directory) as rec,
        atomic_output(out) as tmp,  # (its errors name out: a missing or full disk's too)
        contextlib.ExitStack() as spools_open,
    ):
        parts: dict[str, _Spool] = {}
        empty: dict[str, np.ndarray] = {}
        layout: list[str] | None = None
        lengths, terminated, truncated, seeds = [], [], [], []
        frames = _Spool(where, spools_open)
        frame_shapes: set[tuple[int, ...]] = set()
        no_frames = 0
        left_out = _LeftOut("npz")
        for ep in episodes(rec, "npz"):
            if ep.render_frames is None:
                no_frames += 1
            else:
                frames.add(ep.render_frames)
                frame_shapes.add(ep.render_frames.shape[1:])
            left_out.add(ep, frames=False)
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
            for name, arr in [*leaves, ("rewards", np.asarray(ep.rewards, dtype=np.float64))]:
                if name not in parts:
                    parts[name] = _Spool(where, spools_open)
                prev = parts[name]
                if not len(arr):  # (no rows: a zero-step episode's actions, of no layout)
                    empty.setdefault(name, arr)  # (the layout, if no episode has rows)
                    continue
                text = arr.dtype.kind == "U"  # (values stored as JSON strings)
                kind = (arr.shape[1:], arr.dtype.kind) if not text else None
                first = prev.first
                if first is not None and (
                    text != (first.dtype.kind == "U")
                    or (kind is not None and kind != (first.shape[1:], first.dtype.kind))
                ):  # (numpy makes one dtype of two: float32 and float64 as float64, exactly,
                    # but int64 and uint64 as float64, which is not)
                    msg = (
                        f"episode {ep.index}'s {name} are {_npz_kind(arr)}, but the episodes "
                        f"before it hold {_npz_kind(first)}: npz needs one kind and shape "
                        "per array (two envs' recordings in one directory? give each its own; "
                        "an env whose values changed type or shape partway? read the episodes "
                        "with gym_recording.load instead)"
                    )
                    raise ExportError(msg)
                prev.add(arr)
            lengths.append(ep.length)
            terminated.append(ep.terminated)
            truncated.append(ep.truncated)
            seed = int64_seed(ep.seed)
            left_out.counts["seeds"] += seed == -1  # (npz's "no seed": that one is lost)
            seeds.append(-1 if seed is None else seed)
        arrays: dict[str, _Spool | np.ndarray] = {
            name: c if c.first is not None else empty[name] for name, c in parts.items()
        }
        arrays.setdefault("rewards", np.zeros(0, dtype=np.float64))  # (no episode)
        n = np.asarray(lengths, dtype=np.int64)
        arrays["episode_lengths"] = n
        arrays["episode_starts"] = np.cumsum(n) - n
        arrays["observation_starts"] = np.cumsum(n + 1) - (n + 1)
        arrays["terminated"] = np.asarray(terminated, dtype=bool)
        arrays["truncated"] = np.asarray(truncated, dtype=bool)
        arrays["seeds"] = np.asarray(seeds, dtype=np.int64)
        arrays["metadata"] = np.array(json.dumps(_description(rec), default=_jsonable))
        if frames.first is not None and not no_frames and len(frame_shapes) == 1:
            arrays["render_frames"] = frames
        elif frames.first is not None:
            left_out.what += " (frames of some episodes only, or of sizes that differ)"
            left_out.counts["rendered frames"] = len(lengths) - no_frames
        left_out.warn()
        # (np.savez_compressed as it writes, with its ZipFile closed on an error too: NumPy
        # before 2.2 left it to the garbage collector, which printed a second error)
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, value in arrays.items():
                with zf.open(f"{name}.npy", "w", force_zip64=True) as f:
                    if isinstance(value, _Spool):
                        value.write_npy(f)
                    else:
                        np.lib.format.write_array(f, np.asanyarray(value), allow_pickle=True)
    return out


def export_mp4(directory: str | os.PathLike[str], out: str) -> str:
    """Write one H.264 MP4 video per episode into the new directory ``out``.

    Episode ``i`` becomes ``episode-<i:06d>.mp4``: its :meth:`~gym_recording.Episode.frames`
    (rendered frames first, else picture observations), ``length + 1`` frames of their size,
    at the frame rate its environment declares (``render_fps``; else 30). Episodes with no
    pictures are left out, and a :class:`~gym_recording.LossyExportWarning` says how many.
    The directory appears whole: it is written beside ``out`` and renamed.

    Args:
        directory: A recording directory.
        out: The directory to create; must not exist.

    Returns:
        ``out``.

    Raises:
        ExportError: no episode has pictures to show.
        DependencyNotInstalled: PyAV is missing (the ``video`` extra).
    """
    out = os.path.abspath(out)
    parent = os.path.dirname(out)
    with open_recording(directory) as rec:  # (first: no directory is made for a bad source)
        make_parent(parent, out)
        try:
            tmp = tempfile.mkdtemp(prefix=".gymrec-tmp-export-", dir=parent)
        except OSError as exc:
            raise output_error(out, exc) from exc
        try:
            written = skipped = 0
            for ep in episodes(rec, "mp4"):
                try:
                    frames = ep.frames()
                except NoFramesError:
                    skipped += 1
                    continue
                name = os.path.join(tmp, f"episode-{ep.index:06d}.mp4")
                write_video(frames, name, ep.render_fps or DEFAULT_FPS)
                written += 1
            if not written:
                msg = (
                    f"no episode of {os.fspath(directory)} has pictures to put in a video: "
                    "record rendered frames with record_render=True (gym-recording record "
                    "--record-render), or image observations"
                )
                raise ExportError(msg)
            if skipped:
                msg = (
                    f"{skipped} of {written + skipped} episodes have no rendered frames or "
                    "picture observations and have no video"
                )
                warnings.warn(msg, LossyExportWarning, stacklevel=3)
            if os.path.lexists(out):
                msg = f"{out} appeared while exporting; remove it or choose another path"
                raise OutputExistsError(msg)
            os.chmod(tmp, directory_mode())
            os.rename(tmp, out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return out
