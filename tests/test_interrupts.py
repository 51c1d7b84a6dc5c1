"""A Ctrl-C anywhere in a recording's call leaves it whole: the call's step is kept or not.

Python raises a SIGINT's ``KeyboardInterrupt`` between two bytecodes of the main thread,
wherever it is. These tests raise it at each line the recorder runs inside one of its calls
(``sys.settrace``; where the recorder holds SIGINT back, its handler is called instead, as the
signal would), carry on recording as a notebook does after an interrupted cell, then close,
read back and check that every episode's observations, actions, rewards, infos and frames
line up. Before, an interrupt after a step's observation was stored and before its reward
shifted every later action of the episode by one, and one in a batch's books made the
recording unreadable.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

import gym_recording
from gym_recording import TraceRecording, TraceRecordingVectorWrapper, TraceRecordingWrapper


@pytest.fixture(autouse=True)
def _ctrl_c_raises() -> Iterator[None]:
    """Python's own SIGINT handler, as a terminal's run has: a run started in the background
    by a script (``cmd &``, nohup) inherits SIGINT ignored, and Python then installs none."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


class _Interrupt:
    """A trace function that interrupts the ``line``-th line the recorder runs."""

    def __init__(self, line: int, also: Any = None) -> None:
        self.line, self.seen, self.fired, self.also = line, 0, False, also

    def __call__(self, frame: Any, event: str, arg: Any) -> Any:
        code = frame.f_code
        if code.co_filename.endswith("lifetime.py"):  # (its lock's with: a trace can stop
            return None  # its exit, which a signal cannot: the lock would stay held)
        return self._local if "gym_recording" in code.co_filename or code is self.also else None

    def _local(self, frame: Any, event: str, arg: Any) -> Any:
        if event == "line":
            self.seen += 1
            if self.seen == self.line:
                self.fired = True
                # A store after a store: Python handles no signal between the two (it does
                # at calls and loops), but this line-by-line trace would.
                if frame.f_code.co_name == "_finish" and "self._pending.append" in (
                    _source_line(frame)
                ):
                    return self._local
                self.fire(frame)
        return self._local

    def fire(self, frame: Any) -> None:
        """What a signal's handler does there: Ctrl-C's (or the handler that holds it back)."""
        handler = signal.getsignal(signal.SIGINT)
        if handler is signal.default_int_handler:
            raise KeyboardInterrupt
        handler(signal.SIGINT, frame)  # type: ignore[operator]  # (held back)


def _source_line(frame: Any) -> str:
    import linecache

    return linecache.getline(frame.f_code.co_filename, frame.f_lineno)


def _record(directory: Path, options: dict[str, Any], call: int, line: int) -> bool:
    """Record 6 episodes of 5 steps, interrupting the ``call``-th call at its ``line``-th
    line; whether the interrupt was raised (the call ran that many lines)."""
    frames = options.pop("frames", False)
    rec = TraceRecording(directory, batch_bytes=2500, **options)
    infos = rec.record_infos
    interrupt, calls, t = _Interrupt(line), 0, 0

    def do(method: Any, *args: Any, **kwargs: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == call:
            sys.settrace(interrupt)
        try:
            method(*args, **kwargs)
        except KeyboardInterrupt:
            pass
        finally:
            sys.settrace(None)

    ends: set[int] = set()  # (the observations of terminating steps)
    for _ in range(6):
        t += 1
        frame = np.full((8, 8, 3), t, np.uint8) if frames else None
        do(rec.add_reset, np.full(3, t, np.float32), info={"t": t}, render_frame=frame)
        for s in range(5):
            if not rec.in_episode:
                break
            t += 1
            if s == 4:
                ends.add(t)
            frame = np.full((8, 8, 3), t, np.uint8) if frames else None
            do(
                rec.add_step,
                t,
                np.full(3, t, np.float32),
                float(t),
                s == 4,
                info={"t": t},
                render_frame=frame,
            )
    rec.close()
    assert gym_recording.verify(directory).ok
    with gym_recording.load(directory) as r:
        for ep in r:
            t_obs = ep.observations[:, 0].astype(int)
            assert ep.actions.tolist() == t_obs[1:].tolist()
            assert ep.rewards.tolist() == t_obs[1:].tolist()
            assert ep.terminated == (ep.length > 0 and int(t_obs[-1]) in ends)
            if infos:
                assert [info["t"] for info in ep.infos] == t_obs.tolist()
            if frames:
                assert ep.render_frames[:, 0, 0, 0].tolist() == t_obs.tolist()
    return interrupt.fired


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"record_infos": True},
        {"compression": "zstd"},
        {"record_infos": True, "compression": "zstd", "frames": True},
    ],
    ids=["plain", "infos", "zstd", "infos-zstd-rendered"],
)
def test_an_interrupt_at_any_line_of_a_call_keeps_every_episode_aligned(tmp_path, options):
    # Calls 1 (the first reset), 11 (a step that writes a batch), 13 (the next reset) and 28
    # (a step that cuts an episode into parts, with frames), at each of their lines.
    trials = 0
    for call in (1, 11, 13, 28):
        for line in range(1, 400):
            d = tmp_path / f"{call}-{line}"
            if not _record(d, dict(options), call, line):
                break
            trials += 1
    assert trials > 100


class CountingEnv(gymnasium.Env[np.ndarray, int]):
    """Observes ``[k, a]``: the steps since its reset, and the last action; ends at 6."""

    observation_space = spaces.Box(-1e6, 1e6, (2,), np.float32)
    action_space = spaces.Discrete(1_000_000)

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        self.k = 0
        return np.zeros(2, np.float32), {"k": 0}

    def step(self, action: int) -> Any:
        self.k += 1
        obs = np.array([self.k, action], np.float32)
        return obs, float(action), self.k == 6, False, {"k": self.k}


def _check_trajectories(directory: Path) -> int:
    """Every recorded episode is steps the env took, none missing: the count of steps."""
    assert gym_recording.verify(directory).ok
    n = 0
    with gym_recording.load(directory) as r:
        for ep in r:
            k = ep.observations[:, 0]
            assert (np.diff(k) == 1).all(), k
            assert ep.terminated == (k[-1] == 6)  # (its flag kept with its last step)
            assert ep.actions.tolist() == ep.observations[1:, 1].astype(int).tolist()
            n += ep.length
    return n


@pytest.mark.parametrize("vector", [False, True], ids=["env", "vector"])
@pytest.mark.parametrize("infos", [False, True], ids=["no-infos", "infos"])
def test_an_interrupted_step_ends_its_episode_and_no_step_goes_missing(tmp_path, vector, infos):
    """Interrupted at any line of a wrapper's step (its env's, or the recorder's), the loop
    goes on without a reset: each episode is recorded up to a step it took, with none
    missing in between, and recording starts again at the next episode."""
    env_step = CountingEnv.step.__code__
    trials = recorded = 0
    for call in (3, 7, 20, 25):
        for line in range(1, 300):
            d = tmp_path / f"{call}-{line}"
            interrupt = _Interrupt(line, also=env_step)
            if vector:
                envs = gymnasium.vector.SyncVectorEnv([CountingEnv for _ in range(3)])
                env: Any = TraceRecordingVectorWrapper(envs, d, record_infos=infos)
            else:
                env = TraceRecordingWrapper(CountingEnv(), d, record_infos=infos)
            env.reset(seed=0)
            g, ended = 0, False
            for s in range(1, 40):
                g += 1
                action = np.full(3, g) if vector else g
                if s == call:
                    sys.settrace(interrupt)
                try:  # (a reset where the episode ended; the vector env's, at 25)
                    if ended or (s == 25 and vector):
                        ended = False
                        env.reset()
                    else:
                        result = env.step(action)
                        ended = not vector and (result[2] or result[3])
                except KeyboardInterrupt:
                    continue
                finally:
                    sys.settrace(None)
            env.close()
            recorded += _check_trajectories(d)
            if not interrupt.fired:
                break
            trials += 1
    assert trials > 15 and recorded > 0


def test_an_interrupted_close_writes_everything_at_the_next(tmp_path):
    """close() interrupted at any line (as Ctrl-C at exit would): the recording is not
    closed, and the next close() (or the exit hook's) writes every episode."""
    trials = 0
    for line in range(1, 400):
        d = tmp_path / str(line)
        rec = TraceRecording(d, record_infos=True, compression="zstd")
        for e in range(3):
            rec.add_reset(np.full(3, e, np.float32), info={"e": e})
            for s in range(1, 4):
                rec.add_step(s, np.full(3, s, np.float32), 1.0, s == 3, info={"s": s})
        rec.add_reset(np.zeros(3, np.float32), info={})
        interrupt = _Interrupt(line)
        sys.settrace(interrupt)
        try:
            rec.close()
        except KeyboardInterrupt:
            pass
        finally:
            sys.settrace(None)
        rec.close()
        assert gym_recording.verify(d).ok
        with gym_recording.load(d) as r:
            assert [ep.length for ep in r] == [3, 3, 3, 0]
        if not interrupt.fired:
            break
        trials += 1
    assert trials > 20


def test_a_held_ctrl_c_is_raised_once_after_the_block(tmp_path):
    """The recorder's held-back SIGINT (record.lifetime, private: the mechanism has no
    public face): a real SIGINT in the block is raised after it, once, the handler put
    back; a block whose exit never ran (another signal's handler raised at its call)
    hands a later Ctrl-C on rather than swallowing it."""
    from gym_recording.record.lifetime import uninterrupted

    def spin() -> None:  # (Python handles the signal at a call or a loop)
        for _ in range(100):
            pass

    came = []
    with pytest.raises(KeyboardInterrupt), uninterrupted():
        with uninterrupted():
            os.kill(os.getpid(), signal.SIGINT)
            spin()
            came.append("inner")
        spin()
        came.append("outer")
    assert came == ["inner", "outer"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    block = uninterrupted()
    block.__enter__()  # (and no __exit__)
    del block
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        spin()
    # Collected on another thread (which cannot set a handler): no wait, and Ctrl-C works.
    held = [uninterrupted()]
    held[0].__enter__()
    thread = threading.Thread(target=held.clear)
    thread.start()
    thread.join(10)
    try:
        assert not thread.is_alive()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            spin()
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def test_a_ctrl_c_while_waiting_for_a_background_write_loses_no_batch(tmp_path, monkeypatch):
    """A real SIGINT while the recording waits for a batch written on its writer thread
    (a slow disk): the next wait waits for that same write. (Python 3.11's join() of a
    thread, interrupted, may take the thread for stopped: the batch was written again from
    the stepping thread meanwhile, and the old thread's manifest, renamed last, lost every
    later batch.) The disk is made slow by holding the writer thread's first write back."""
    from gym_recording.storage import LocalStorage  # (the disk made slow: a storage's write)

    real = LocalStorage.write_files
    entered, release, written = threading.Event(), threading.Event(), threading.Event()

    def slow_write(self: Any, files: Any, published: list[str]) -> None:
        first = threading.current_thread().name == "gym-recording-writer" and not entered.is_set()
        if first:
            entered.set()
            release.wait(30)
        try:
            real(self, files, published)
        finally:
            if first:
                written.set()

    monkeypatch.setattr(LocalStorage, "write_files", slow_write)

    def ctrl_c_then_release() -> None:
        if entered.wait(30):
            threading.Event().wait(0.3)  # (the stepping thread waits for the write by then)
            os.kill(os.getpid(), signal.SIGINT)
            threading.Event().wait(0.5)  # (its next wait, close()'s, has begun)
        release.set()

    threading.Thread(target=ctrl_c_then_release, daemon=True).start()
    rec = TraceRecording(tmp_path, compression="zstd", batch_bytes=1, record_infos=True)
    interrupted = False
    try:
        for e in range(200):  # (a batch an episode: the second waits for the first's write)
            rec.add_reset(np.full(3, e, np.float32), info={"e": e})
            rec.add_step(1, np.full(3, e, np.float32), 1.0, True, info={"e": e})
    except KeyboardInterrupt:
        interrupted = True
    rec.close()
    assert written.wait(30)
    assert interrupted
    assert gym_recording.verify(tmp_path).ok
    with gym_recording.load(tmp_path) as r:
        assert len(r) == rec.episode_count >= 2
        for i, ep in enumerate(r):
            assert ep.observations[0].tolist() == [i, i, i]


def _signal_at(
    monkeypatch: pytest.MonkeyPatch, cls: type, name: str, call: int, signum: int
) -> list[int]:
    """Make the ``call``-th call of ``cls.name`` send this process ``signum`` as it begins
    (a real signal, at an exact point); the calls made, counted."""
    calls: list[int] = []
    method = getattr(cls, name)

    def signalled(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == call:
            os.kill(os.getpid(), signum)
        return method(self, *args, **kwargs)

    monkeypatch.setattr(cls, name, signalled)
    return calls


@pytest.fixture
def _sigterm_exits() -> Iterator[None]:
    """README's SIGTERM recipe: ``kill`` makes Python exit (``SystemExit``), writing."""
    before = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    yield
    signal.signal(signal.SIGTERM, before)


@pytest.mark.usefixtures("_sigterm_exits")
def test_a_sigterm_while_a_vector_envs_rows_are_handed_on_loses_none(tmp_path, monkeypatch):
    """A real SIGTERM (handled by ``sys.exit``, as the README says) while the held columns
    are handed to the sub-envs' recordings: every sub-env takes its rows, then it exits.
    (Only SIGINT was held back: sub-envs 1-3 lost their 1,024 rows.)"""
    calls = _signal_at(monkeypatch, TraceRecording, "add_rows", 2, signal.SIGTERM)  # (sub-env 1)
    env = TraceRecordingVectorWrapper(gymnasium.make_vec("CartPole-v1", 4), tmp_path / "r")
    env.reset(seed=0)
    actions = np.random.default_rng(0).integers(0, 2, (1100, 4))
    with pytest.raises(SystemExit):
        for t in range(1100):
            env.step(actions[t])
    env.close()
    assert len(calls) >= 4
    steps = dict.fromkeys(range(4), 0)
    with gym_recording.load(tmp_path / "r") as rec:
        index = {m.writer: m.metadata["vector_env"]["index"] for m in rec.writers}
        for ep in rec:
            steps[index[ep.writer]] += ep.length
    assert all(n > 900 for n in steps.values()), steps


@pytest.mark.usefixtures("_sigterm_exits")
def test_a_sigterm_while_a_batch_is_handed_to_its_writer_loses_none(tmp_path, monkeypatch):
    """A real SIGTERM as a full batch goes to its writer (the writer is private: this is
    the point the hand-over had released the batch's episodes, which then went nowhere)."""
    from gym_recording.record.writer import BatchWriter

    _signal_at(monkeypatch, BatchWriter, "submit", 3, signal.SIGTERM)
    env = TraceRecordingWrapper(gymnasium.make("CartPole-v1"), tmp_path / "r", batch_bytes=2000)
    ended = 0
    with pytest.raises(SystemExit):
        for k in range(100):
            env.reset(seed=k)
            while not any(env.step(k % 2)[2:4]):
                pass
            ended = k + 1
    env.close()
    with gym_recording.load(tmp_path / "r") as rec:
        seeds = [ep.seed for ep in rec]
    assert seeds[:ended] == list(range(ended)) and ended >= 4


def test_a_ctrl_c_as_the_command_line_sets_up_leaves_the_calling_process_as_it_was() -> None:
    """cli.main() called from Python: a Ctrl-C as it sets SIGTERM's handler (simulated at the
    call) leaves no log handler of its own behind, which would word every later library
    warning of the caller as the command line does ("gym-recording: warning: ...")."""
    from gym_recording.tools import cli

    def interrupt_at_set_up(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_name == "_on_sigterm":
            sys.settrace(None)
            raise KeyboardInterrupt
        return None

    logger = logging.getLogger("gym_recording")
    before = list(logger.handlers), signal.getsignal(signal.SIGTERM)
    sys.settrace(interrupt_at_set_up)
    try:
        with pytest.raises(KeyboardInterrupt):
            cli.main(["info", "/nonexistent"])
    finally:
        sys.settrace(None)
    assert (list(logger.handlers), signal.getsignal(signal.SIGTERM)) == before


@pytest.mark.usefixtures("_sigterm_exits")
def test_held_sigint_and_sigterm_are_both_handled_and_a_handler_set_inside_stays() -> None:
    """(record.lifetime, private: the mechanism has no public face.) A Ctrl-C and a SIGTERM
    held in one block are both handled after it, the Ctrl-C first, as Python handles two
    signals (the SIGTERM was dropped); a handler the block's code sets (an episode_trigger
    may) stays set (it was put back to the one before)."""
    from gym_recording.record.lifetime import uninterrupted

    ran: list[str] = []

    def term(signum: int, frame: Any) -> None:
        ran.append("term")

    signal.signal(signal.SIGTERM, term)
    with pytest.raises(KeyboardInterrupt):
        try:
            with uninterrupted():
                os.kill(os.getpid(), signal.SIGINT)
                os.kill(os.getpid(), signal.SIGTERM)
                for _ in range(100):
                    pass
                ran.append("block")
        finally:
            for _ in range(100):  # (where Python handles the signal raised again)
                pass
    assert ran == ["block", "term"]

    def mine(signum: int, frame: Any) -> None:
        ran.append("mine")

    with uninterrupted():
        signal.signal(signal.SIGTERM, mine)
    assert signal.getsignal(signal.SIGTERM) is mine
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_ctrl_c_in_the_hand_over_before_a_partial_reset_ends_no_episode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real SIGINT while a partial reset hands the columns' steps over, before the env's
    reset runs: no sub-env was reset, so every episode goes on (all were ended)."""
    calls = _signal_at(monkeypatch, TraceRecording, "add_rows", 1, signal.SIGINT)
    env = gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 2)
    w = TraceRecordingVectorWrapper(env, tmp_path)
    w.reset(seed=0)
    for _ in range(3):
        w.step(np.array([0, 1]))
    with pytest.raises(KeyboardInterrupt):
        w.reset(options={"reset_mask": np.array([True, False])})
    assert calls
    for _ in range(3):
        w.step(np.array([0, 1]))
    w.close()
    with gym_recording.load(tmp_path) as rec:
        assert sorted((ep.seed, ep.length) for ep in rec) == [(0, 6), (1, 6)]


class _CloseAt(_Interrupt):
    """An :class:`_Interrupt` whose handler calls ``act()``, as a signal's handler that closes
    the recording (``signal.signal(SIGALRM, lambda *_: env.close())``) or ends its episode."""

    def __init__(self, act: Any, line: int) -> None:
        super().__init__(line)
        self.act = act

    def fire(self, frame: Any) -> None:
        sys.settrace(None)
        self.act()


class _Counter(gymnasium.Env[Any, Any]):
    """Observes ``t``, the steps and resets so far; its infos hold ``t`` and an array (no C
    rows: each info goes to the recording's Python code); ends every 4th step."""

    observation_space = spaces.Box(0, 1000, (2,), np.float32)
    action_space = spaces.Discrete(2)
    metadata = {"render_modes": ["rgb_array"]}  # noqa: RUF012
    render_mode = "rgb_array"
    t = 0

    def _obs(self) -> Any:
        self.t += 1
        return np.full(2, self.t, np.float32), {"t": self.t, "a": np.full(2, self.t)}

    def reset(self, *, seed: Any = None, options: Any = None) -> Any:
        self.steps = 0
        return self._obs()

    def step(self, action: Any) -> Any:
        self.steps += 1
        obs, info = self._obs()
        return obs, float(self.t), self.steps == 4, False, info

    def render(self) -> Any:
        return np.full((4, 4, 3), self.t % 256, np.uint8)


@pytest.mark.parametrize("accelerated", [True, False], ids=["C", "plain"])
@pytest.mark.parametrize("step", [2, 4], ids=["mid-episode", "last"])
@pytest.mark.parametrize("call", ["close", "end_episode"])
def test_a_close_or_end_at_any_line_of_a_step_leaves_a_recording_that_reads_aligned(
    tmp_path, monkeypatch, accelerated, step, call
):
    """A signal's handler that closes the recording, or ends its episode, may run at any
    line of a step's Python code. A close just after the step's info was kept wrote that
    info with the episode (one info more than its steps: the recording did not load), and
    so did an end just before it was kept; a close inside the C step's on_flags crashed. At
    every line, what is written reads back with every step, info and rendered frame where
    it belongs (the step itself is refused or kept whole). Not with compressed rendered
    frames: a close inside their stream's own code still fails there."""
    from gym_recording.record import steps as steps_module

    if not accelerated:
        monkeypatch.setattr(steps_module, "speedups", None)
    elif steps_module.speedups is None:
        pytest.skip("gym_recording._speedups is not built")
    line, fired = 0, True
    while fired:
        line += 1
        d = tmp_path / str(line)
        env = TraceRecordingWrapper(_Counter(), d, record_infos=True, record_render=True)
        env.reset()
        for _ in range(step - 1):  # (the steps before the one closed in)
            env.step(0)
        close = _CloseAt(env.close if call == "close" else env.recording.end_episode, line)
        sys.settrace(close)
        try:
            env.step(0)
        except gym_recording.RecordingError:  # (closed, or no episode open: refused)
            pass
        finally:
            sys.settrace(None)
        fired = close.fired
        env.close()
        with gym_recording.load(d) as rec:
            for ep in rec:
                t = ep.observations[:, 0].astype(int).tolist()
                assert ep.rewards.tolist() == t[1:], line
                assert [i["t"] for i in ep.infos] == t, line
                assert [i["a"][0] for i in ep.infos] == t, line
                assert ep.render_frames[:, 0, 0, 0].tolist() == t, line
    assert line > 20  # (the step ran that many lines of the recorder's)
