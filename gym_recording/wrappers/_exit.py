"""The vector wrappers' steps held in columns, handed to their recordings at exit.

A :class:`~gym_recording.TraceRecordingVectorWrapper` holds its sub-envs' steps in columns
until it flushes them. A wrapper never closed is in :data:`holding`; at exit its columns
go to its recordings before they close (:func:`gym_recording.record.lifetime.before_exit`),
once a step another thread is taking has ended. The wrapper's ``_stepper`` is the thread in
its ``step``; once ``_exiting`` is set, a step is not recorded. (No lock: an interrupt
between a lock's acquire and its release would leave it held, and the next step waiting.)
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from typing import Any

from gym_recording.record import lifetime

__all__ = ["EXIT_STEP_WAIT", "holding"]

logger = logging.getLogger(__name__)

#: Seconds the hand-over at exit waits for a step another thread is taking.
EXIT_STEP_WAIT = 60.0
#: Wrappers holding steps in columns, handed over at exit before the recordings close.
holding: weakref.WeakSet[Any] = weakref.WeakSet()


def _hand_over(early: bool) -> None:
    """Flush each wrapper of :data:`holding` whose recordings close now.

    ``early``: those that close early. Not a wrapper whose recordings are all closed (a
    thread's steps since meet that in the thread).
    """
    for wrapper in list(holding):
        recs = wrapper.recordings
        if early and not any(lifetime.closes_early(id(r)) for r in recs):
            continue  # (its recordings close at atexit: it is handed over then)
        if all(r.closed for r in recs):
            continue
        wrapper._exiting = True  # (first: a step begun after this records nothing)
        if not _step_ended(wrapper):
            logger.error("a step of %r did not end at exit: its last steps are lost", wrapper)
            continue
        try:
            wrapper._flush()
        except Exception:  # pragma: no cover - reported, the others still flushed
            logger.exception("could not hand %r its last steps at exit", wrapper)


def _step_ended(wrapper: Any) -> bool:
    """Wait up to :data:`EXIT_STEP_WAIT` s for a step of another (live) thread to end."""
    deadline = time.monotonic() + EXIT_STEP_WAIT
    while (ident := wrapper._stepper) not in (None, threading.get_ident()):
        if not any(t.ident == ident for t in threading.enumerate()):
            return True  # (a thread gone, or a parent's before a fork)
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


lifetime.before_exit(_hand_over)
if hasattr(os, "register_at_fork"):  # (a forked child's wrappers hold the parent's steps)
    os.register_at_fork(after_in_child=holding.clear)
