"""A recording's life in its process: flushed at interpreter exit, forgotten in a forked child.

An open :class:`~gym_recording.TraceRecording` is registered (:func:`register`) until it
closes (:func:`unregister`). At interpreter exit each one still registered is closed, which
writes what it buffered. A forked child forgets its parent's recordings (they are the
parent's to write) and counts the fork in :data:`forks`: a recording made under another
count refuses to record. Nor can a recording be copied or pickled (:func:`refuse_copy`).
A Ctrl-C waits while a recording updates its books at a batch (:func:`uninterrupted`), and
a thread that closes a recording waits for another's call that starts, ends or writes
episodes, or its step, and the other way round (:func:`serialized`).
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # (no stub: signal's C functions)
import atexit
import concurrent.futures.thread  # (its exit hook first: see the end)
import contextlib
import faulthandler
import functools
import logging
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

from gym_recording._errors import RecordingError, WriteError

__all__ = [
    "before_exit",
    "fed",
    "forks",
    "refuse_copy",
    "register",
    "serialized",
    "step_ended",
    "uninterrupted",
    "unregister",
]

logger = logging.getLogger(__name__)

#: Forks this process descends from (a recording remembers the count it was made under).
forks = 0

# Per open recording, by its id() (not its hash: a subclass may define __eq__), which stays
# its own while it is registered (its entry's close holds it): how to close it at exit, how
# to forget it in a forked child, and whether it is closed early (see register).
_open: dict[int, tuple[str, Callable[[], None], Callable[[], None], bool]] = {}
_lock = threading.Lock()
#: The thread that last fed each open recording (see :func:`fed`).
_feeders: dict[int, threading.Thread] = {}


def register(
    key: object,
    where: str,
    close: Callable[[], None],
    forget: Callable[[], None],
    *,
    early: bool = False,
) -> None:
    """Close a recording (``key``, writing to ``where``) at exit, or ``forget`` it in a child.

    ``early``: its storage needs thread pools to write (fsspec's s3fs resolves hosts on
    one), which ``concurrent.futures`` stops before ``atexit``: it is closed before them,
    as the main thread ends, once, or again at ``atexit`` if a Ctrl-C stopped it. Before,
    the threads the interpreter waits for (not daemons, nor a thread pool's workers) that
    last fed one (:func:`fed`: started an episode, took rows, stepped a vector wrapper) are
    waited for, so that their steps are recorded; a thread that waits for the main thread
    to end never does, and a message says so every minute. (An ``atexit`` handler meets a
    closed recording; so does a daemon thread, a pool's worker, a thread that only steps a
    single env's episode another thread began, still recording to it then: the close waits
    for its call that starts, ends or writes an episode, or its step (:func:`serialized`),
    and its steps after it are not recorded. Close it in that thread to keep them.) Others
    are closed at ``atexit``, after the user's handlers and the threads the interpreter
    waits for (in a ``multiprocessing`` worker, at its exit, before its threads are joined).
    """
    with _lock:
        _open[id(key)] = (where, close, forget, early)
    _close_at_worker_exit()


_finalized_in = 0  # (the process whose multiprocessing exit closes its recordings)


def _close_at_worker_exit() -> None:
    """Have a ``multiprocessing`` worker close its recordings when it exits.

    A worker started by fork or forkserver ends with ``os._exit``, after multiprocessing's
    own finalizers but without ``atexit``: a finalizer of its own closes the recordings
    then (in other processes it runs at exit too, before :func:`_close_at_exit`). Python
    3.13 runs a worker's finalizers only after joining its threads, so that a thread that
    never ends kept it from closing them (and from ending, see :func:`_exit_on_sigterm`):
    a worker also closes them in threading's exit hooks, which run before the joins.
    """
    global _finalized_in
    util = sys.modules.get("multiprocessing.util")  # (a worker has it; others need not)
    if util is not None and _finalized_in != os.getpid():
        _finalized_in = os.getpid()
        util.Finalize(None, _close_at_exit, exitpriority=0)
        mp = sys.modules.get("multiprocessing")
        if mp is not None and mp.parent_process() is not None:
            with contextlib.suppress(RuntimeError):  # (a recording made as threading exits)
                threading._register_atexit(_close_at_exit)  # type: ignore[attr-defined]
        _exit_on_sigterm()


def _exit_on_sigterm() -> None:
    """In a ``multiprocessing`` worker with no SIGTERM handler, have SIGTERM exit through Python.

    A daemonic worker (``AsyncVectorEnv``'s, a ``Pool``'s) gets SIGTERM as its parent exits
    or ``Pool.terminate()`` ends it, which killed it with its buffered episodes; as
    ``SystemExit(143)`` it closes its recordings on the way out (one that comes as it closes
    them at its exit, a pool's worker leaving by itself, is ignored). A second SIGTERM kills
    it, and so does :data:`SIGTERM_GRACE` seconds without its exit once its recordings are
    closed (a thread the interpreter waits for; not a worker stuck in C code that holds the
    GIL, which Python's handler never reaches). Set from the worker's main thread only
    (where Python handles signals).
    """
    mp = sys.modules.get("multiprocessing")
    if mp is None or mp.parent_process() is None:
        return
    if threading.current_thread() is not threading.main_thread():
        return
    if _signal.getsignal(_signal.SIGTERM) == _signal.SIG_DFL:
        _signal.signal(_signal.SIGTERM, _exit_at_sigterm)


#: Seconds a worker that SIGTERM ends may take to exit once its recordings are closed at
#: its exit, before it is ended by ``os._exit`` anyway: a thread the interpreter waits for
#: must not hang the parent, which joins it.
SIGTERM_GRACE = 10.0
_terminated = 0  # (the process that SIGTERM ends: see _exit_at_sigterm)
_closed_in = 0  # (the process whose recordings were closed at exit)
_devnull: Any = None


def _exit_at_sigterm(signum: int, frame: object) -> None:
    global _terminated
    _signal.signal(signum, _signal.SIG_DFL)  # (a second one kills)
    _terminated = os.getpid()
    if _exited_in != os.getpid():  # (else it is exiting, and closing its recordings)
        raise SystemExit(128 + signum)
    if _closed_in == os.getpid():  # (closed: what keeps it alive is not a recording)
        _end_later()


def _end_later() -> None:
    """End this process :data:`SIGTERM_GRACE` seconds from now, whatever it is doing then.

    faulthandler's watchdog is a thread of C code: it ends the process without the GIL.
    """
    global _devnull
    if _devnull is None:
        _devnull = open(os.devnull, "w")  # noqa: SIM115  (kept open for faulthandler)
    faulthandler.dump_traceback_later(SIGTERM_GRACE, exit=True, file=_devnull)


def unregister(key: object) -> None:
    """The recording ``key`` is closed: nothing to do at exit."""
    _drop(id(key))


def _drop(key: int) -> None:
    with _lock:
        _open.pop(key, None)
        _feeders.pop(key, None)


def fed(key: object) -> None:
    """The recording ``key`` is fed by this thread.

    Called as it starts an episode or takes rows, and by a vector wrapper that a new thread
    steps (its steps reach the recordings later, in rows).
    """
    if id(key) in _open:
        _feeders[id(key)] = threading.current_thread()


def refuse_copy(recording: Any, *args: Any) -> NoReturn:
    """A recording's ``__copy__``, ``__deepcopy__`` and pickling: it belongs to one process."""
    msg = (
        "a TraceRecording cannot be copied or pickled: its buffer and its files belong "
        "to one writer in one process, and a copy would lose or mix steps. Create a new "
        "TraceRecording (or wrapper) where it is needed, e.g. in each worker process"
    )
    raise RecordingError(msg)


F = TypeVar("F", bound=Callable[..., Any])


def serialized(method: F) -> F:
    """Run ``method`` holding its object's ``_lock`` (a ``threading.RLock``), and its buffers.

    A recording's close and the calls that start, end or write its episodes hold it, so that
    a thread still recording as another closes it (a daemon thread at exit, say) waits for
    the close, then meets a closed recording, rather than racing it for the same buffers
    and writes. Steps take no lock (a lock a step would cost more than the rest of the
    step's recording): the call also sets ``_holder`` (its thread) and calls ``_halt()``,
    which waits for a step another thread is taking (whose thread the object marks as it
    begins, and which backs off, once marked, if it then sees another thread's
    ``_holder``), and ``_resume()`` at its end.
    """

    def locked(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            if self._holder is not None:  # (a call within a call of this thread)
                return method(self, *args, **kwargs)
            try:
                self._holder = _get_ident()
                self._halt()
                return method(self, *args, **kwargs)
            finally:
                self._holder = None
                self._resume()

    return functools.update_wrapper(locked, method)  # type: ignore[return-value]


_get_ident = threading.get_ident
#: Seconds a thread waits for a step another thread is taking (:func:`step_ended`).
STEP_WAIT = 60.0


def step_ended(stepper: Callable[[], int | None]) -> bool:
    """Wait until no live thread but this one takes a step; ``False`` if one still does.

    ``stepper()`` is the id of the thread taking a step, or ``None``; the wait is at most
    :data:`STEP_WAIT` s.
    """
    deadline = time.monotonic() + STEP_WAIT
    me = threading.get_ident()
    while (ident := stepper()) not in (None, me):
        if not any(t.ident == ident for t in threading.enumerate()):
            return True  # (a thread gone, or a parent's before a fork)
        if time.monotonic() > deadline:
            return False
        time.sleep(0.0005)
    return True


#: The signals :class:`uninterrupted` holds back: Ctrl-C, and ``kill``'s default (which a
#: Python handler, such as ``sys.exit``, may turn into an exception like Ctrl-C's).
HELD_SIGNALS = (_signal.SIGINT, _signal.SIGTERM)


class uninterrupted:  # (named as the function it stands for: ``with uninterrupted():``)
    """Hold SIGINT (Ctrl-C) and SIGTERM back until the block is done, then handle them.

    For the few statements that must all run or none (a batch's books: the buffer's rows
    released, the spans handed on); an interrupt anywhere between them would leave the rows
    and the spans apart. Only the main thread handles signals: elsewhere, and for a signal
    with no Python handler, the block runs as it is. A handler set inside the block stays.
    (It calls ``_signal``'s functions: ``signal``'s own wrap them to convert handlers to
    enums, several times their cost.)
    """

    __slots__ = ("__weakref__", "_came", "_handlers")

    def __init__(self) -> None:
        self._handlers: dict[int, tuple[Any, Any]] = {}  # signal: (its handler, the holder)
        self._came: list[int] = []

    def __enter__(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for signum in HELD_SIGNALS:
                handler = _signal.getsignal(signum)
                if callable(handler):
                    holder = _holder(weakref.ref(self), handler)
                    self._handlers[signum] = (handler, holder)
                    _signal.signal(signum, holder)

    def __exit__(self, *exc: object) -> None:
        came = self._came
        handlers = {k: h for k, (h, _) in self._handlers.items()} if came else {}
        try:
            self._restore()  # (a signal that comes as it restores is handled there)
        finally:
            try:
                if came:
                    handlers[came[0]](came[0], None)
            finally:  # (the others after it, when Python next checks: as two signals are)
                for signum in came[1:]:
                    _signal.raise_signal(signum)

    def __del__(self) -> None:  # (__exit__ was not run: a signal's handler raised at its call)
        self._restore()

    def _restore(self) -> None:
        handlers, raised = getattr(self, "_handlers", None), None  # (None: __init__ interrupted)
        if not handlers or threading.current_thread() is not threading.main_thread():
            return  # (collected on another thread, which cannot: its holder hands signals on)
        for signum, (handler, holder) in list(handlers.items()):
            while _signal.getsignal(signum) is holder:  # (else one set in the block: kept)
                try:  # (_signal.signal runs other signals' handlers first, which may raise)
                    _signal.signal(signum, handler)
                except BaseException as exc:
                    raised = raised or exc
            del handlers[signum]
        if raised is not None:
            raise raised


def _holder(block: weakref.ref[uninterrupted], handler: Any) -> Callable[[int, Any], None]:
    """A held signal's handler while ``block`` runs: it notes the signal.

    Once the block is gone (if its restore never ran), it hands the signal on to ``handler``.
    """

    def hold(signum: int, frame: Any) -> None:
        held = block()
        if held is None or signum not in held._handlers:
            handler(signum, frame)
        elif signum not in held._came:
            held._came.append(signum)

    return hold


def before_exit(hand_over: Callable[[bool], None]) -> None:
    """Call ``hand_over(early)`` at exit before recordings close (what it holds goes to them).

    ``early``: only the recordings that close early (see :func:`register`) close next, so
    only what goes to them is to be handed over.
    """
    _hand_overs.append(hand_over)


def closes_early(key: object) -> bool:
    """Whether the open recording ``key`` closes early at exit (see :func:`register`)."""
    entry = _open.get(id(key))
    return entry is not None and entry[3]


_hand_overs: list[Callable[[bool], None]] = []
_exited_in = 0  # (the process that closed its recordings at exit: once, by either hook)


def _close_early_at_exit() -> None:
    """As the interpreter exits, before the thread pools stop: close the ``early`` ones."""
    with _lock:
        early = [key for key, (*_, e) in _open.items() if e]
        feeders = {_feeders.get(key) for key in early}
    if early and _exited_in != os.getpid():
        # The threads exit waits for (after this hook) that feed one: their last steps first.
        # Not a daemon (it may never end), nor a thread pool's worker (it waits for the
        # pools' exit hook, which runs after this one).
        workers = set(getattr(concurrent.futures.thread, "_threads_queues", ()))
        try:
            for thread in feeders - workers - {threading.current_thread()}:
                if thread is not None and not thread.daemon:
                    _wait_for(thread)
        except BaseException:  # (Ctrl-C: a recording still fed is not closed under its thread)
            _abandon_fed(early)
            raise
        _close_at_exit(early=True)


def _abandon_fed(keys: list[int]) -> None:
    """Forget the recordings of ``keys`` a live non-daemon thread still feeds, saying so."""
    with _lock:
        fed = [(k, _open[k][0], t) for k in keys if k in _open and (t := _feeders.get(k))]
    # (Not thread.is_alive(): an interrupted join() may take a running thread for stopped.)
    running = sys._current_frames().keys() - {threading.get_ident()}
    for key, where, thread in fed:
        if thread.ident in running and not thread.daemon:
            logger.error(
                "not writing the recording in %s at exit: the thread %r still records to it "
                "(the wait for it was interrupted); what it did not write is lost",
                where,
                thread.name,
            )
            _drop(key)


def _wait_for(thread: threading.Thread) -> None:
    """Join ``thread``, saying every minute (the first time after 10 s) that exit waits."""
    thread.join(10.0)
    while thread.is_alive():
        logger.warning(
            "waiting for the thread %r, which records to object storage, to end: its "
            "recording is written then (a thread that waits for the main thread to end never "
            "does: Ctrl-C stops waiting, and what it has not written is lost)",
            thread.name,
        )
        thread.join(60.0)


def _close_at_exit(*, early: bool = False) -> None:
    """At interpreter exit, close every recording that was not closed (``early``: those)."""
    global _exited_in, _closed_in
    if _exited_in == os.getpid():
        return
    if not early:
        _exited_in = os.getpid()
    for hand_over in _hand_overs:
        hand_over(early)
    with _lock:
        recordings = [(k, r) for k, r in _open.items() if r[3] or not early]
    for key, (where, close, *_) in recordings:
        try:
            close()
        except RecordingError as exc:  # exit must go on; say what was lost
            # (a write that failed twice: its first error's message, which says no "next")
            kept = exc.__context__ if isinstance(exc.__context__, WriteError) else exc
            logger.error(
                "could not flush the recording in %s at exit: %s; what it had not written is lost",
                where,
                kept,
            )
        except Exception:  # (not the library's: where it came from too)
            logger.exception("could not flush the recording in %s at exit", where)
        # Tried once: not again at atexit, where an early one's storage cannot write. But an
        # interrupt (Ctrl-C) leaves it to atexit: it stopped threading's exit hooks, and with
        # them the shutdown of the thread pools its storage needs.
        if early:
            _drop(key)
    if not early:
        _closed_in = os.getpid()
        if _terminated == os.getpid():  # (a worker SIGTERM ends: see _exit_at_sigterm)
            _end_later()


def _forget_in_child() -> None:
    """In a forked child: the parent's recordings are the parent's to flush, not its own."""
    global _lock, forks
    _lock = threading.Lock()  # (it may have been held by another thread at the fork)
    forks += 1
    for _, _, forget, _ in list(_open.values()):
        forget()
    _open.clear()
    _feeders.clear()


# Remote recordings at exit, before ``concurrent.futures`` stops its thread pools
# (threading's exit hooks run last registered first, and before ``atexit``'s); the others at
# ``atexit``, which is also the fallback where threading's hooks do not run.
threading._register_atexit(_close_early_at_exit)  # type: ignore[attr-defined]
atexit.register(_close_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
