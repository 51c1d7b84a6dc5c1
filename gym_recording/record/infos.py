"""A batch's buffered infos and options: kept, and counted against what a batch may hold.

:class:`Values` keeps each reset's options and info, and each step's info, as a recording
buffers them (a step info of numbers as a row of :class:`~gym_recording.format.batch.InfoRows`,
which the C step recorder may append to itself), and counts them against the batch's size
and against what readers accept (FORMAT.md §9).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gym_recording._errors import RecordingError
from gym_recording.format.arrays import blob_dtype
from gym_recording.format.batch import InfoRows, Span
from gym_recording.format.limits import MAX_NDIM, MAX_VALUE_COST
from gym_recording.format.values import (
    flat_dict_cost,
    json_int,
    plain_dict,
    snapshot_cost,
    value_cost,
)
from gym_recording.record.buffer import refusal

__all__ = ["Values"]


@dataclass(slots=True)
class _Rows(InfoRows):
    """Step infos kept as rows: the types of a row's values, and what a row costs."""

    types: tuple[type, ...] = ()
    cost: int = 0  # (as JSON)
    as_info: int = 0  # (as info columns)
    ints: tuple[int, ...] = ()  # (where a row's Python ints are: checked a row at a time)
    counted: int = 0  # (rows counted so far)
    #: Where a row's arrays are, and each one's dtype and shape (a row holds copies of them:
    #: the C step, which would keep the env's own, takes no such rows).
    arrays: tuple[tuple[int, np.dtype[Any], tuple[int, ...]], ...] = ()

    def row(self, values: list[Any]) -> list[Any] | None:
        """``values`` as a row of these rows (its arrays copied), or ``None`` if they are not."""
        if tuple(map(type, values)) != self.types or (
            self.ints and not _small_ints(values, self.ints)
        ):
            return None
        for i, dtype, shape in self.arrays:
            a = values[i]
            if a.dtype != dtype or a.shape != shape:
                return None
            values[i] = a.copy()
        return values


#: The bytes a step info kept as a row takes in a batch besides its values: its ``{}`` in
#: the JSON once its values went to ``info_columns``.
_EMPTY_INFO_BYTES = 4


class Values:
    """What fills a batch besides its arrays: infos, options, per-step values, counted.

    Infos and options are kept here; the observations and actions stored as per-step values
    (:class:`~gym_recording.record.buffer.ListLeaf`) are counted (:meth:`count`).

    Each value is counted twice (FORMAT.md §9): as stored, against ``batch_bytes``, and as
    JSON, against what readers accept; past either bound, :attr:`full`. A step info kept as
    a row (see :meth:`keep_step_info`) is stored as the ``info_columns`` it becomes (the
    bytes of its values, and its ``{}``), until its rows turn into dicts (then as their
    JSON); anything else, as its JSON.

    The C step recorder appends rows itself, as many as :meth:`room_for` allowed; they are
    counted when anything next is (rows of one span at a time: the last kept).

    Args:
        batch_bytes: The recording's batch size.
    """

    def __init__(self, batch_bytes: int) -> None:
        self._budget = min(batch_bytes, MAX_VALUE_COST)
        self._live: _Rows | None = None  # (the rows counted last: the C recorder's, if any)
        self.clear()

    def clear(self) -> None:
        """Count nothing (the batch is handed to the write)."""
        self._stored = self._json = 0
        self.full = False
        if self._live is not None:  # (its rows so far are not counted again)
            self._live.counted = len(self._live)

    def _count(self, cost: int, as_info: int) -> None:
        live = self._live
        if live is not None and (n := len(live) - live.counted):  # (rows appended in C)
            live.counted += n
            cost += n * live.cost
            as_info += n * live.as_info
        self._stored += as_info
        self._json += cost
        self.full = self._stored > self._budget or self._json > MAX_VALUE_COST

    def _track(self, rows: _Rows | None) -> None:
        """Count the rows kept so far, then keep counting ``rows``'s from its uncounted on."""
        if rows is not self._live:
            self._count(0, 0)
            self._live = rows
        self._count(0, 0)

    def room_for(self, rows: InfoRows) -> int:
        """How many more rows ``rows`` may take before the batch is full, all counted."""
        r: Any = rows
        self._track(r)
        if self.full:
            return 0
        return min(
            (self._budget - self._stored) // r.as_info, (MAX_VALUE_COST - self._json) // r.cost
        )

    def count(self, cost: int) -> None:
        """Count a per-step observation or action stored as JSON, taking ``cost`` bytes.

        Such values vary in size (text, arrays of varying shapes), so a batch is sized by
        what they take, as by its infos.
        """
        self._count(cost, cost)

    def keep(self, value: Any, what: str) -> Any:
        """A storable copy of ``value`` (``None`` as it is), counted.

        Raises:
            RecordingError: ``value`` cannot be stored, or alone would take more of its
                batch than readers accept (``what`` names it in the message).
        """
        if value is None:
            return None
        try:
            kept, cost = snapshot_cost(value)
        except Exception as exc:  # (see refusal)
            raise refusal(what, exc) from None
        if cost > MAX_VALUE_COST:
            msg = (
                f"cannot record {what}: it would take about {cost >> 20} MiB of its batch "
                f"once read, more than the {MAX_VALUE_COST >> 20} MiB readers accept "
                "(FORMAT.md §9); split it, or record it in the observations"
            )
            raise RecordingError(msg)
        self._count(cost, cost)
        return kept

    def keep_step_info(self, span: Span, info: Any) -> None:
        """Keep a step's info in ``span`` (whose ``infos`` hold at least the first), counted.

        The step infos of a span are kept as rows of values (:class:`InfoRows`, no dict per
        step) while they are flat dicts of the same ASCII str keys (or of none), each
        value of the type it had in the first (a Python or numpy scalar, not ``None``): as
        they go to ``info_columns``. From the first that is not, as copies.

        Raises:
            RecordingError: as :meth:`keep`; nothing is kept.
        """
        rows: Any = span.info_rows  # (a _Rows, made here)
        if type(info) is dict:
            if rows is not None:
                if self._keep_row(rows, info):
                    return
            elif len(span.infos) == 1:  # type: ignore[arg-type]
                new = _new_rows(info)
                if new is not None and self._keep_row(new, info):
                    span.info_rows = new
                    return
        kept = self.keep(info, "the step's info")
        if rows is not None:  # (not all rows: dicts from now on, counted as their JSON)
            self._track(rows)
            self._live = None
            span.infos.extend(rows.dicts())  # type: ignore[union-attr]
            span.info_rows = None
            self._count(0, len(rows) * (rows.cost - rows.as_info))
        span.infos.append(kept)  # type: ignore[union-attr]

    def take_back(self, span: Span, steps: int) -> None:
        """Forget the step infos ``span`` keeps after its first ``steps`` (a step taken back)."""
        rows: Any = span.info_rows
        if rows is not None:
            del rows.values[steps * (len(rows.keys) or 1) :]
            for j in [j for j in rows.extras if j >= steps]:
                del rows.extras[j]
        elif span.infos is not None:
            del span.infos[steps + 1 :]

    def _keep_row(self, rows: _Rows, info: dict[Any, Any]) -> bool:
        """Keep ``info`` as a row of ``rows``, if it is one.

        Keys it has after the rows' own are kept with the row (as RecordEpisodeStatistics'
        last step info: a row, then ``"episode"``).

        Raises:
            RecordingError: as :meth:`keep` (for the further keys); nothing is kept.
        """
        n, keys = len(rows.keys), tuple(info)
        if keys[:n] != rows.keys:
            return False
        values = list(info.values())
        more = dict(zip(keys[n:], values[n:], strict=True)) if len(keys) > n else None
        if more is not None and not plain_dict(more):
            return False
        row = rows.row(values[:n])
        if row is None:
            return False
        if more is not None:
            rows.extras[len(rows)] = self.keep(more, "the step's info")
        rows.add(row)
        self._track(rows)
        return True


_NONE_TYPE = type(None)


def _new_rows(info: dict[Any, Any]) -> _Rows | None:
    """Rows (none yet) of the step info ``info``'s layout, if it is one.

    A row is a flat dict (see :func:`~gym_recording.format.values.flat_dict_cost`) but for
    arrays of a blob dtype (as Humanoid's ``tendon_length``; of fewer dimensions than a
    column may have), none of its values ``None``.
    """
    values = list(info.values())
    types = tuple(map(type, values))
    if _NONE_TYPE in types:
        return None
    at = [i for i, t in enumerate(types) if t is np.ndarray]
    if not at:
        cost = flat_dict_cost(info)
    elif all(0 < values[i].ndim < MAX_NDIM and blob_dtype(values[i].dtype) for i in at):
        flat = flat_dict_cost({k: 0.0 if type(v) is np.ndarray else v for k, v in info.items()})
        cost = None if flat is None else flat + sum(value_cost(values[i]) for i in at)
    else:
        return None
    if cost is None or cost > MAX_VALUE_COST:
        return None
    return _Rows(
        tuple(info),
        [],
        types=types,
        cost=cost,
        as_info=_row_bytes(values),
        ints=tuple(i for i, t in enumerate(types) if t is int),
        arrays=tuple((i, values[i].dtype, values[i].shape) for i in at),
    )


def _row_bytes(values: list[Any]) -> int:
    """What a row of ``values`` takes in a batch as info columns.

    Each value's bytes (a Python bool one, an int or a float eight), and the ``{}`` left
    in the infos.
    """
    return _EMPTY_INFO_BYTES + sum(
        v.nbytes if isinstance(v, (np.ndarray, np.generic)) else 1 if type(v) is bool else 8
        for v in values
    )


def _small_ints(values: list[Any], at: tuple[int, ...]) -> bool:
    """Whether the ints ``values[i]`` (``i`` in ``at``) have a JSON reader's digits at most."""
    return all(json_int(values[i]) for i in at)
