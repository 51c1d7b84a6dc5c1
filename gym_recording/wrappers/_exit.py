"""The vector wrappers' steps held in columns, handed to their recordings at exit.

A :class:`~gym_recording.TraceRecordingVectorWrapper` holds its sub-envs' steps in columns
until it flushes them. A wrapper never closed is in :data:`holding`; at exit its columns
go to its recordings before they close (:func:`gym_recording.record.lifetime.before_exit`),
once a step another thread is recording has ended. The wrapper's ``_stepper`` is the thread
in its ``step`` once its env has stepped; once ``_exiting`` is set (by the hand-over, or a
close), a step is not recorded. (No lock: an interrupt between a lock's acquire and its
release would leave it held, and the next step waiting.)
"""

from __future__ import annotations

import logging
import os
import weakref
from typing import Any

from gym_recording.record import lifetime

__all__ = ["holding"]

logger = logging.getLogger(__name__)

#: Wrappers holding steps in columns, handed over at exit before the recordings close.
holding: weakref.WeakSet[Any] = weakref.WeakSet()


def _hand_over(early: bool) -> None:
    """Flush each wrapper of :data:`holding` whose recordings close now.

    ``early``: those that close early. Not a wrapper whose recordings are all closed (a
    thread's steps since meet that in the thread).
    """
    for wrapper in list(holding):
        recs = wrapper.recordings
        if early and not any(lifetime.closes_early(r) for r in recs):
            continue  # (its recordings close at atexit: it is handed over then)
        if all(r.closed for r in recs):
            continue
        wrapper._exiting = True  # (first: a step begun after this records nothing)
        if not lifetime.step_ended(lambda: wrapper._stepper):  # noqa: B023 (called here)
            logger.error("a step of %r did not end at exit: its last steps are lost", wrapper)
            continue
        try:
            wrapper._flush()
        except Exception:  # pragma: no cover - reported, the others still flushed
            logger.exception("could not hand %r its last steps at exit", wrapper)


lifetime.before_exit(_hand_over)
if hasattr(os, "register_at_fork"):  # (a forked child's wrappers hold the parent's steps)
    os.register_at_fork(after_in_child=holding.clear)
