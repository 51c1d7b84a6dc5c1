"""The hot path: a wrapper's ``step`` hands each result to a step recorder, which stores it.

:func:`step_recorder` builds the recorder of a :class:`~gym_recording.TraceRecording`. It is
the one place that chooses between the two implementations, which store the same bytes:

- the plain one, :class:`PlainStepRecorder`: ``record(action, result)`` calls the
  recording's own Python code for every step;
- the accelerated one, ``StepRecorder`` of the optional C extension (see
  :mod:`gym_recording._accel`): it stores the commonest steps itself (an array or scalar
  observation and action, each of the layout the buffer chose, a float reward) by
  appending their bytes to the buffer's ``bytearray`` rows, and their infos (when infos are
  kept) to the recording's Python code, or, while they are of the rows the recording
  handed it (:attr:`StepRecorder.rows`), their values to those rows. It hands every other
  step to that code.
  ``benchmarks/bench.py --ablate`` measures what it buys.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, NoReturn, Protocol

import numpy as np

from gym_recording._accel import speedups
from gym_recording.record.buffer import Field, OpenSpan, Rewards, RowLeaf
from gym_recording.record.infos import Values

__all__ = [
    "ACCELERATED",
    "INFO_ROWS_IN_C",
    "PlainStepRecorder",
    "Recorders",
    "Rows",
    "StepRecorder",
    "step_recorder",
]

#: Whether the C step recorder is in use.
ACCELERATED = speedups is not None
#: Whether the C step recorder appends step infos kept as rows itself (else each goes to
#: ``keep_info``; ``benchmarks/bench.py --ablate`` measures both).
INFO_ROWS_IN_C = True

Record = Callable[[Any, Any], Any]
KeepInfo = Callable[[Any], None]
#: A leaf the C recorder may append to: its rows, dtype, shape, and whether a Python int is
#: one of its values (an int64 scalar leaf).
Layout = tuple[bytearray, np.dtype[Any], tuple[int, ...], bool]
#: Step infos a recorder may keep itself: ``(values, keys, types)`` (see StepRecorder.rows).
Rows = tuple[list[Any], tuple[str, ...], tuple[type, ...]]


class StepRecorder(Protocol):
    """What both implementations offer."""

    #: Steps it may store before handing the next to the Python code (which makes room);
    #: ``-1`` while no episode is recorded.
    room: int
    #: ``(values, keys, types)``, or ``None``: the C recorder keeps up to :attr:`row_room`
    #: step infos that are dicts of the ``keys`` (the same objects, in that order), each
    #: value of exactly its type in ``types`` (an int within 64 bits, whose digits need no
    #: check), by appending their values to ``values`` instead of calling ``keep_info``
    #: (the recording counts them later, see :class:`~gym_recording.record.infos.Values`).
    #: The plain one keeps none itself.
    rows: Rows | None
    row_room: int
    #: The thread in :meth:`record` while it may store a step itself (0: none), set before
    #: it reads :attr:`room` with no Python code run between: a call that sets ``room`` to
    #: -1, then finds it 0, runs while no step is stored here (see Recorders.halt). The
    #: plain one stores none (0): its steps go to ``add_step``, which marks them itself.
    stepper: int

    def record(self, action: Any, result: Any, /) -> Any:
        """Store the step ``env.step(action)`` returned ``result``; return ``result``."""
        ...

    def configure(
        self,
        observations: Layout | None,
        actions: Layout | None,
        keep_info: KeepInfo | None = None,
        /,
    ) -> None:
        """Say which layouts it may store itself (``None``: it stores no step itself).

        ``keep_info(info)``, if given, is called with the info of each step it stores,
        before it stores anything of the step; if it raises, the step is not stored.
        """
        ...


class PlainStepRecorder:
    """The plain implementation: every step goes to the recording's Python code.

    Args:
        slow: ``slow(action, result)`` records the step (the recording's code) and returns
            ``result``. It is :attr:`record` itself, so that a step costs no call more.
    """

    def __init__(self, slow: Record) -> None:
        #: Store the step ``env.step(action)`` returned ``result``; return ``result``.
        self.record: Record = slow
        self.room = -1
        self.rows: Rows | None = None
        self.row_room = 0
        self.stepper = 0

    def configure(self, *layouts: Any) -> None:
        """Nothing to do: every step takes the Python code."""


def step_recorder(
    slow: Record,
    on_flags: Callable[[Any, Any], None],
    on_failure: Callable[[Exception | None], NoReturn],
    rewards: Rewards,
    *,
    accelerated: bool,
) -> StepRecorder:
    """A step recorder that stores into a recording's buffer.

    Args:
        slow: Records a step the accelerated recorder does not store itself, and returns
            the result it was given.
        on_flags: Called with ``(terminated, truncated)`` before it stores a step that sets
            either (the step is stored only if it returns).
        on_failure: Called with the error (``MemoryError``) when the accelerated recorder
            could store a step only in part (after its flags and info): it takes the step
            back and raises.
        rewards: The buffer's rewards (appended last: a step is stored once they hold it).
        accelerated: Use the C recorder if it is built.
    """
    if accelerated and speedups is not None:
        return speedups.StepRecorder(slow, on_flags, on_failure, rewards.buf)
    return PlainStepRecorder(slow)


def _layout(leaf: Any) -> Layout | None:
    if not isinstance(leaf, RowLeaf):
        return None
    return leaf.buf, leaf.dtype, leaf.shape, leaf.shape == () and leaf.dtype == _INT64


_INT64 = np.dtype(np.int64)


class Recorders:
    """The step recorders of one recording (one per wrapper), told what they may do together."""

    def __init__(self) -> None:
        self._all: list[StepRecorder] = []
        #: Whether one of them keeps info rows itself (the C recorder, see
        #: :data:`INFO_ROWS_IN_C`): then :meth:`sync` hands them rows.
        self.keep_rows = False

    def __iter__(self) -> Iterator[StepRecorder]:
        return iter(self._all)

    def add(self, recorder: StepRecorder) -> None:
        """Tell ``recorder`` too, from now on."""
        self._all.append(recorder)
        self.keep_rows |= INFO_ROWS_IN_C and not isinstance(recorder, PlainStepRecorder)

    def configure(self, observations: Field, actions: Field, keep_info: KeepInfo | None) -> None:
        """Tell each the layouts it may store itself: both fields one RowLeaf, else none."""
        o, a = _layout(observations.root), _layout(actions.root)
        for r in self._all:
            r.configure(None, None) if o is None or a is None else r.configure(o, a, keep_info)

    def sync(self, room: int, open_span: OpenSpan | None, values: Values) -> None:
        """Tell each the steps it may store, and the open episode's info rows it may append to.

        ``room`` is -1 while no episode is open. The rows are those of ``open_span``, if its step
        infos are such rows; the batch's room for rows (``values``) is shared out among the
        recorders (see :attr:`StepRecorder.rows`).
        """
        rows: Any = open_span.info_rows if open_span is not None and self.keep_rows else None
        given: Rows | None = None
        share = 0
        if rows is not None and not rows.arrays:  # (rows of arrays copy them: Python's, not C's)
            given = (rows.values, rows.keys, rows.types)
            share = values.room_for(rows) // len(self._all) if self._all else 0
        room = room if open_span is not None else -1
        for r in self._all:
            r.room, r.rows, r.row_room = room, given, share

    def halt(self) -> int:
        """Tell each to store no step (room -1, first), then :meth:`stepper`."""
        for r in self._all:
            r.room = -1
        return self.stepper()

    def stepper(self) -> int:
        """The thread in one's step (0: none; see :attr:`StepRecorder.stepper`)."""
        for r in self._all:
            if stepper := r.stepper:
                return stepper
        return 0

    def withdraw_rows(self) -> None:
        """Stop each appending to info rows (before the rows change hands)."""
        for r in self._all:
            r.rows, r.row_room = None, 0
