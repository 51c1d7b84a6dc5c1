"""Crash-safety harness: run a recorder in a subprocess, kill it, check what it left.

The recorder (``python tests/crash_harness.py child ...``) is deterministic: episode ``i`` of
trial seed ``s`` is reset with seed ``s * 1000 + i`` and stepped with actions drawn from
``numpy.random.default_rng([s, i])``, so the parent regenerates every expected episode with
:func:`expected_episode` and compares what it reads back to the byte.

Ways the child ends:

* ``run``: records until the parent SIGKILLs it after a random delay (or it reaches
  ``max_episodes`` and exits normally).
* ``die``: SIGKILLs itself at the ``n``-th file write, at a chosen phase of the atomic write:
  ``open`` (before the temporary file exists), ``write`` (half of the first chunk written),
  ``sync`` (written, not yet fsynced), ``commit`` (fsynced, not yet renamed), ``renamed``
  (renamed into place). This puts kills inside a flush deterministically.
* ``fsize``: records under ``RLIMIT_FSIZE`` (from the start, or from a given episode on) with
  ``SIGXFSZ`` ignored, so a write fails with EFBIG; reports the exception and the files it
  wrote.
* ``readonly``: records some episodes, drops root (setuid to ``nobody``) so the directory is
  no longer writable, records on; reports the exception.
* ``enospc``: mounts a tiny tmpfs over the directory in a private mount namespace (run under
  ``unshare -m``), records until the disk is full, reports, and copies what is visible to
  ``DIR.copy`` for the parent (the mount vanishes with the namespace).
* ``raise``: the env raises in ``step`` of episode 2; the exception is not caught, so the
  interpreter exits through its exit handlers.

:func:`check_recording` reads a directory the way users do (``load``, ``scan_recorded_traces``,
``verify``) and checks every listed episode against the expected ones.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

HARNESS = os.path.abspath(__file__)
PHASES = ("open", "write", "sync", "commit", "renamed")


# --------------------------------------------------------------------------------------------
# The deterministic env and its expected episodes
# --------------------------------------------------------------------------------------------


class CrashEnv(gymnasium.Env[dict[str, np.ndarray], int]):
    """A small deterministic env with a Dict observation holding a 24x24 RGB frame.

    Episode length (1..40 steps) and whether it ends terminated or truncated follow from the
    reset seed; the frame depends on the seed, the step and the action.
    """

    observation_space = spaces.Dict(
        {
            "frame": spaces.Box(0, 255, shape=(24, 24, 3), dtype=np.uint8),
            "pos": spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float64),
        }
    )
    action_space = spaces.Discrete(4)

    def __init__(self, raise_at: tuple[int, int] | None = None) -> None:
        self.raise_at = raise_at  # (reset seed, step) at which step() raises
        self._seed = 0
        self._t = 0
        self._len = 1
        self._trunc = False

    def _obs(self, a: int) -> dict[str, np.ndarray]:
        frame = np.full((24, 24, 3), (self._seed * 7 + self._t * 3 + a) % 256, dtype=np.uint8)
        frame[self._t % 24, :, 0] = 255
        return {"frame": frame, "pos": np.array([self._t * 0.5, self._seed + a / 10.0])}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        self._seed = int(seed or 0)
        rng = np.random.default_rng(self._seed)
        self._len = int(rng.integers(1, 41))
        self._trunc = bool(rng.integers(0, 2))
        self._t = 0
        return self._obs(0), {"start": self._seed}

    def step(self, action: int) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        if self.raise_at == (self._seed, self._t):
            raise RuntimeError(f"env failure at step {self._t} of episode seed {self._seed}")
        self._t += 1
        done = self._t >= self._len
        reward = float(self._t * 0.25 - action)
        info = {"t": self._t}
        return self._obs(int(action)), reward, done and not self._trunc, done and self._trunc, info


def episode_seed(trial_seed: int, i: int) -> int:
    return trial_seed * 1000 + i


def episode_actions(trial_seed: int, i: int) -> np.random.Generator:
    return np.random.default_rng([trial_seed, i])


@dataclass
class Expected:
    """One expected episode."""

    frames: np.ndarray
    pos: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminated: bool
    truncated: bool
    seed: int
    infos: list[Any] = field(default_factory=list)


def expected_episode(trial_seed: int, i: int, raise_at: tuple[int, int] | None = None) -> Expected:
    """Episode ``i`` of trial ``trial_seed``, as the child records it."""
    env = CrashEnv(raise_at)
    seed = episode_seed(trial_seed, i)
    rng = episode_actions(trial_seed, i)
    obs, info = env.reset(seed=seed)
    frames, pos, acts, rews, infos = [obs["frame"]], [obs["pos"]], [], [], [info]
    terminated = truncated = False
    while not (terminated or truncated):
        a = int(rng.integers(0, 4))
        try:
            obs, r, terminated, truncated, info = env.step(a)
        except RuntimeError:
            break
        frames.append(obs["frame"])
        pos.append(obs["pos"])
        acts.append(a)
        rews.append(r)
        infos.append(info)
    return Expected(
        np.stack(frames),
        np.stack(pos),
        np.array(acts, dtype=np.int64),
        np.array(rews, dtype=np.float64),
        bool(terminated),
        bool(truncated),
        seed,
        infos,
    )


# --------------------------------------------------------------------------------------------
# The child
# --------------------------------------------------------------------------------------------


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class _HalfWriter:
    """A file whose first write writes half of its bytes, then kills the process."""

    def __init__(self, f: Any) -> None:
        self._f = f

    def write(self, b: Any) -> int:
        mv = memoryview(b).cast("B")
        self._f.write(mv[: max(1, len(mv) // 2)])
        self._f.flush()
        _die()
        return 0  # pragma: no cover

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)

    def __enter__(self) -> _HalfWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self._f.close()


def _install_kill_point(n: int, phase: str) -> None:
    """SIGKILL this process at the ``n``-th file written atomically (0-based), at ``phase``.

    The phases are those of the Python group write (``LocalStorage.write_files``): the
    temporary file created, written, fsynced, renamed. The C one (``_speedups.start_write``)
    runs the same protocol in a thread that offers no point to stop at (the random-time kills
    exercise it), so it is switched off here.
    """
    import gym_recording.storage.local as local
    from gym_recording.storage import LocalStorage

    LocalStorage._start_write_c = None
    state: dict[str, Any] = {"files": -1, "fd": None, "tmp": None}
    new_temp, writev_all = LocalStorage._new_temp, local._writev_all
    real_fsync, real_rename = os.fsync, os.rename

    def hit(p: str) -> bool:
        return state["files"] == n and phase == p

    def patched_new_temp(self: Any, dir_fd: int) -> tuple[int, str]:
        state["files"] += 1
        if hit("open"):
            _die()
        fd, tmp = new_temp(self, dir_fd)
        if state["files"] == n:
            state["fd"], state["tmp"] = fd, tmp
        return fd, tmp

    def patched_writev_all(fd: int, chunks: Any) -> int:
        if fd == state["fd"] and phase == "write":
            data = b"".join(bytes(c) for c in chunks) or b"x"
            os.write(fd, data[: max(1, len(data) // 2)])
            _die()
        return writev_all(fd, chunks)

    def patched_fsync(fd: int) -> None:
        if fd == state["fd"] and phase == "sync":
            _die()
        real_fsync(fd)

    def patched_rename(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        mine = src == state["tmp"]
        if mine and phase == "commit":
            _die()
        real_rename(src, dst, *args, **kwargs)
        if mine and phase == "renamed":
            _die()

    LocalStorage._new_temp = patched_new_temp  # type: ignore[method-assign]
    local._writev_all = patched_writev_all
    os.fsync = patched_fsync
    os.rename = patched_rename


def _record_written_sizes() -> dict[str, int]:
    """Patch storage so that each successful atomic write records its file's final size (a
    file written alone, or one of a batch's group)."""
    from gym_recording.storage import LocalStorage

    written: dict[str, int] = {}
    real = LocalStorage.write_atomic

    def write_atomic(self: Any, name: str, chunks: Any, **kw: Any) -> int:
        n = real(self, name, chunks, **kw)
        written[name] = n
        return n

    real_files = LocalStorage.write_files

    def write_files(self: Any, files: Any, published: list[str]) -> None:
        files = [(name, list(chunks), sync) for name, chunks, sync in files]
        sizes = {name: sum(memoryview(c).nbytes for c in chunks) for name, chunks, _ in files}
        start = len(published)
        try:
            real_files(self, files, published)
        finally:
            for name in published[start:]:
                written[name] = sizes[name]

    real_start = LocalStorage.start_write_files

    def start_write_files(self: Any, files: Any) -> Any:
        files = [(name, list(chunks), sync) for name, chunks, sync in files]
        sizes = {name: sum(memoryview(c).nbytes for c in chunks) for name, chunks, _ in files}
        pending = real_start(self, files)

        class Recorded:
            def wait(self, published: list[str]) -> None:
                start = len(published)
                try:
                    pending.wait(published)
                finally:
                    for name in published[start:]:
                        written[name] = sizes[name]

        return Recorded()

    LocalStorage.write_atomic = write_atomic  # type: ignore[method-assign]
    LocalStorage.write_files = write_files  # type: ignore[method-assign]
    LocalStorage.start_write_files = start_write_files  # type: ignore[method-assign]
    return written


def _record(
    directory: str,
    trial_seed: int,
    batch_bytes: int,
    max_episodes: int,
    raise_at: tuple[int, int] | None = None,
    after_episode: Any = None,
) -> int:
    from gym_recording.wrappers import TraceRecordingWrapper

    env = TraceRecordingWrapper(
        CrashEnv(raise_at),
        directory,
        batch_bytes=batch_bytes,
        record_infos=True,
        metadata={"trial_seed": trial_seed},
    )
    for i in range(max_episodes):
        rng = episode_actions(trial_seed, i)
        env.reset(seed=episode_seed(trial_seed, i))
        if i == 0:
            print("ready", flush=True)
        done = False
        while not done:
            _, _, terminated, truncated, _ = env.step(int(rng.integers(0, 4)))
            done = terminated or truncated
        if after_episode is not None:
            after_episode(i)
    env.close()
    return max_episodes


def _report(**kw: Any) -> None:
    print("REPORT " + json.dumps(kw), flush=True)


def child(argv: list[str]) -> None:
    mode, directory, trial_seed, batch_bytes = argv[0], argv[1], int(argv[2]), int(argv[3])
    extra = argv[4:]
    if mode == "run":
        _record(directory, trial_seed, batch_bytes, int(extra[0]))
    elif mode == "die":
        _install_kill_point(int(extra[0]), extra[1])
        _record(directory, trial_seed, batch_bytes, int(extra[2]))
    elif mode in ("fsize", "readonly", "enospc"):
        from gym_recording import RecordingError

        if mode == "fsize":
            import resource

            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # so that write() fails with EFBIG
            limit, limit_after = int(extra[0]), int(extra[1]) if len(extra) > 1 else -1

            def set_limit(i: int = -1) -> None:
                if i == limit_after:
                    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

            set_limit()
            target, after = directory, set_limit
        elif mode == "readonly":
            os.chdir(directory)
            target = "."
            drop_after = int(extra[0])

            def after(i: int) -> None:
                if i == drop_after:  # from now on the directory is read-only for us
                    os.setgid(65534)
                    os.setuid(65534)

        else:  # enospc
            try:
                subprocess.run(
                    ["mount", "-t", "tmpfs", "-o", f"size={extra[0]}", "tmpfs", directory],
                    check=True,
                    capture_output=True,
                )
            except (OSError, subprocess.CalledProcessError) as exc:
                _report(skipped=f"cannot mount a tmpfs: {exc}")
                return
            target, after = directory, None
        written = _record_written_sizes()
        try:
            _record(target, trial_seed, batch_bytes, 3000, after_episode=after)
            _report(error=None, written=written)
        except RecordingError as exc:
            _report(
                error=type(exc).__name__,
                message=str(exc),
                cause=type(exc.__cause__).__name__ if exc.__cause__ else None,
                written=written,
            )
        finally:
            if mode == "enospc":
                copy = directory + ".copy"
                shutil.copytree(directory, copy)
        # Leave without exit handlers: they would retry the failing flush.
        sys.stdout.flush()
        os._exit(0)
    elif mode == "raise":
        raise_at = (episode_seed(trial_seed, int(extra[0])), int(extra[1]))
        _record(directory, trial_seed, batch_bytes, 10, raise_at=raise_at)
    else:
        raise SystemExit(f"unknown mode {mode!r}")


# --------------------------------------------------------------------------------------------
# The parent
# --------------------------------------------------------------------------------------------


@dataclass
class Trial:
    """What one trial did and found."""

    returncode: int = 0
    killed: bool = False
    episodes: int = 0
    batches: int = 0
    split_episodes: int = 0
    temp_files: int = 0
    output: str = ""
    report: dict[str, Any] | None = None


def run_child(
    mode: str,
    directory: Path,
    trial_seed: int,
    batch_bytes: int,
    *extra: Any,
    kill_after: float | None = None,
    timeout: float = 120,
    prefix: list[str] | None = None,
) -> Trial:
    """Run the child; with ``kill_after``, SIGKILL it that many seconds after it is ready."""
    cmd = [*(prefix or []), sys.executable, HARNESS, "child", mode, str(directory)]
    cmd += [str(trial_seed), str(batch_bytes), *map(str, extra)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    trial = Trial()
    lines: list[str] = []
    assert p.stdout is not None
    if kill_after is not None:
        line = p.stdout.readline()  # "ready" once imports are done and recording has begun
        lines.append(line)
        if line.strip() == "ready":
            time.sleep(kill_after)
            p.send_signal(signal.SIGKILL)
            trial.killed = True
    out, err = p.communicate(timeout=timeout)
    lines.append(out)
    trial.returncode = p.returncode
    trial.output = "".join(lines) + err
    for line in trial.output.splitlines():
        if line.startswith("REPORT "):
            trial.report = json.loads(line[len("REPORT ") :])
    return trial


def _assert_value(got: Any, want: Any, what: str) -> None:
    got_a, want_a = np.asarray(got), np.asarray(want)
    assert got_a.dtype == want_a.dtype, f"{what}: dtype {got_a.dtype} != {want_a.dtype}"
    assert got_a.shape == want_a.shape, f"{what}: shape {got_a.shape} != {want_a.shape}"
    assert np.array_equal(got_a, want_a), f"{what}: values differ"


def assert_episode(ep: Any, want: Expected, *, cut: bool = False) -> None:
    """``ep`` (read back) equals ``want`` exactly; ``cut`` episodes end neither way."""
    where = f"episode {ep.index} (seed {want.seed})"
    _assert_value(ep.observations["frame"], want.frames, f"{where} frames")
    _assert_value(ep.observations["pos"], want.pos, f"{where} pos")
    _assert_value(ep.actions, want.actions, f"{where} actions")
    _assert_value(ep.rewards, want.rewards, f"{where} rewards")
    assert ep.seed == want.seed, where
    if cut:
        assert not ep.terminated and not ep.truncated, where
    else:
        assert (ep.terminated, ep.truncated) == (want.terminated, want.truncated), where
    assert ep.infos is not None and [dict(i) for i in ep.infos] == want.infos, where


def check_recording(
    directory: Path, trial_seed: int, *, at_least: int = 0, clean: bool = True
) -> Trial:
    """Check a recording left by the child: every listed episode is complete and exact, in
    order, none twice, none skipped; temporary files are ignored by readers, reported by
    verify and removed by ``remove_temp_files`` once old."""
    import gym_recording
    from gym_recording.format.names import TEMP_PREFIX
    from gym_recording.tools.verify import remove_temp_files, verify

    trial = Trial()
    temps = sorted(n for n in os.listdir(directory) if n.startswith(TEMP_PREFIX))
    trial.temp_files = len(temps)
    with gym_recording.load(directory) as rec:
        assert len(rec.writers) <= 1
        trial.batches = sum(len(w.batches) for w in rec.writers)
        trial.split_episodes = sum(1 for w in rec.writers for b in w.batches if b.continues)
        for i, ep in enumerate(rec):
            assert ep.index == i
            # The seed says which episode this is: in order, none twice, none skipped.
            assert ep.seed == episode_seed(trial_seed, i), (i, ep.seed)
            assert_episode(ep, expected_episode(trial_seed, i))
        trial.episodes = len(rec)
    assert trial.episodes >= at_least
    scanned: list[int] = []
    gym_recording.scan_recorded_traces(directory, lambda o, a, r: scanned.append(len(r)))
    assert len(scanned) == trial.episodes
    report = verify(directory)
    assert report.ok, report.lines()
    assert report.episodes == trial.episodes
    assert sorted(report.temp_files) == temps
    if clean and temps:
        assert remove_temp_files(directory)[0] == []  # too young: a writer may still use them
        old = time.time() - 3600
        for name in temps:
            os.utime(directory / name, (old, old))
        removed, kept = remove_temp_files(directory)
        assert sorted(removed) == temps and not kept
        assert not [n for n in os.listdir(directory) if n.startswith(TEMP_PREFIX)]
        with gym_recording.load(directory) as rec:
            assert len(rec) == trial.episodes
    return trial


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        child(sys.argv[2:])
    else:
        raise SystemExit("usage: crash_harness.py child MODE DIR SEED BATCH_BYTES [ARGS]")
