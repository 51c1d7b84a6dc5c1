"""Recording to and reading from object storage: a real S3 API (moto server) and ``memory://``.

The S3 tests talk HTTP to moto's server on 127.0.0.1 through s3fs; nothing is mocked in-process.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
from _moto_s3 import S3Server, moto_s3, moto_s3_process
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import gym_recording
from gym_recording import DependencyNotInstalled, ReadError, RecordingError, TraceFormatError
from gym_recording.storage import LocalStorage, open_storage
from gym_recording.tools.verify import verify
from gym_recording.wrappers import TraceRecordingVectorWrapper

# The recording run, as source: the writer subprocesses run it too.
RECORD_SRC = textwrap.dedent(
    """
    import numpy as np
    import gymnasium
    from gym_recording.wrappers import TraceRecordingWrapper

    def record(directory, seed, episodes=3, storage_options=None, batch_bytes=600):
        env = TraceRecordingWrapper(
            gymnasium.make("CartPole-v1", max_episode_steps=40),
            directory,
            batch_bytes=batch_bytes,
            storage_options=storage_options,
            metadata={"seed": seed},
        )
        rng = np.random.default_rng(seed)
        for e in range(episodes):
            env.reset(seed=seed * 100 + e)
            while True:
                *_, terminated, truncated, _ = env.step(int(rng.integers(2)))
                if terminated or truncated:
                    break
        env.close()
    """
)
_ns: dict[str, Any] = {}
exec(RECORD_SRC, _ns)
record = _ns["record"]


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with moto_s3() as server:
        yield server


def assert_episodes_equal(got: gym_recording.Recording, want: gym_recording.Recording) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        for name in ("observations", "actions", "rewards"):
            a, b = getattr(g, name), getattr(w, name)
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)
        assert (g.terminated, g.truncated, g.seed) == (w.terminated, w.truncated, w.seed)


def names_by_kind(names: list[str]) -> list[str]:
    """File names with the writer id taken out, to compare the layouts of two recordings."""
    return sorted(re.sub(r"openaigym\.trace\.[^.]+\.[^.]+\.[^.]+\.", "W.", n) for n in names)


# --------------------------------------------------------------------------------------------
# S3 (moto server)
# --------------------------------------------------------------------------------------------


def test_s3_recording_equals_local(s3: S3Server, tmp_path: Path) -> None:
    """A seeded run recorded to s3://bucket/prefix reads back equal to the same run done locally."""
    url = f"s3://{s3.new_bucket()}/runs/run1"
    record(url, seed=1, storage_options=s3.storage_options)
    record(str(tmp_path), seed=1)
    opts = s3.storage_options
    with gym_recording.load(url, storage_options=opts) as got, gym_recording.load(tmp_path) as want:
        assert len(want) == 3 and len(want.writers[0].batches) > 3  # several batches
        assert_episodes_equal(got, want)
        assert got.writers[0].metadata == {"seed": 1}
        assert got.env_id == "CartPole-v1"
    remote = open_storage(url, create=False, storage_options=s3.storage_options)
    assert names_by_kind(remote.list_names()) == names_by_kind(os.listdir(tmp_path))


def test_s3_from_standard_configuration(s3: S3Server) -> None:
    """Without storage_options, AWS_ENDPOINT_URL and the AWS_* credentials reach the server."""
    url = f"s3://{s3.new_bucket()}/env-config"
    record(url, seed=2, episodes=1)
    with gym_recording.load(url) as rec:
        assert len(rec) == 1 and rec[0].seed == 200


def test_verify_s3_recording(s3: S3Server) -> None:
    """gym_recording._verify.verify finds nothing wrong with a recording on S3."""
    url = f"s3://{s3.new_bucket()}/verify"
    record(url, seed=3, storage_options=s3.storage_options)
    report = verify(url)  # no storage_options: it finds the server through AWS_ENDPOINT_URL
    assert report.ok, report.problems
    assert report.episodes == 3 and report.batches > 3


def test_verify_takes_storage_options(s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """verify() reaches a server named only in storage_options, as load() does."""
    url = f"s3://{s3.new_bucket()}/verify-options"
    record(url, seed=3, episodes=1, storage_options=s3.storage_options)
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    assert verify(url, storage_options=s3.storage_options).ok


def test_command_line_on_s3(s3: S3Server, tmp_path: Path) -> None:
    """record, info and export with an s3:// recording: no `view` offered (it serves local
    directories), its size from its manifests, its URL in an export's metadata, and an
    export to a URL refused (it wrote a local file named s3:/...)."""
    pq = pytest.importorskip("pyarrow.parquet")
    import s3fs

    url = f"s3://{s3.new_bucket()}/cli"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "gym_recording", *args],
            env={**os.environ, **s3.env},
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
        )

    recorded = cli("record", "CartPole-v1", "--episodes", "2", "--dir", url)
    assert recorded.returncode == 0 and " view " not in recorded.stdout, recorded
    s3fs.S3FileSystem(**s3.storage_options).get(f"{url}/", f"{tmp_path}/copy/", recursive=True)
    sizes = [
        next(line for line in cli("info", where).stdout.splitlines() if line.startswith("bytes"))
        for where in (url, str(tmp_path / "copy"))
    ]
    assert sizes[0] == sizes[1] and sizes[0].split()[-1] == "KB", sizes  # (as a local copy's)
    shutil.rmtree(tmp_path / "copy")
    refused = cli("export", url, "--to", "npz", f"{url}/out.npz")
    assert refused.returncode != 0 and "is a URL" in refused.stderr, refused
    assert not any(tmp_path.iterdir())
    assert cli("export", url, "--to", "parquet", "out.parquet").returncode == 0
    meta = pq.read_table(tmp_path / "out.parquet").schema.metadata
    assert json.loads(meta[b"gym_recording"])["directory"] == url


def test_vector_wrapper_to_s3(s3: S3Server, tmp_path: Path) -> None:
    """TraceRecordingVectorWrapper writes one writer per sub-env to S3, equal to a local run."""
    url = f"s3://{s3.new_bucket()}/vector"

    def run(directory: str, **kwargs: Any) -> None:
        make = [lambda: gymnasium.make("CartPole-v1", max_episode_steps=20)] * 2
        venv = TraceRecordingVectorWrapper(
            SyncVectorEnv(make, autoreset_mode=AutoresetMode.SAME_STEP), directory, **kwargs
        )
        venv.reset(seed=4)
        for t in range(50):
            venv.step(np.array([t % 2, (t // 3) % 2]))
        venv.close()

    run(url, storage_options=s3.storage_options)
    run(str(tmp_path))
    opts = s3.storage_options
    with gym_recording.load(url, storage_options=opts) as got, gym_recording.load(tmp_path) as want:
        assert len(got.writers) == 2 and len(got) == len(want)
        key = lambda ep: (ep.seed is None, ep.seed, ep.observations[0].tobytes())  # noqa: E731
        for g, w in zip(sorted(got, key=key), sorted(want, key=key), strict=True):
            np.testing.assert_array_equal(g.observations, w.observations)
            np.testing.assert_array_equal(g.actions, w.actions)
            assert (g.terminated, g.truncated) == (w.terminated, w.truncated)


def test_several_writer_processes_one_prefix(s3: S3Server, tmp_path: Path) -> None:
    """Three processes record into one bucket prefix at once; every episode of each reads back."""
    url = f"s3://{s3.new_bucket()}/shared"
    seeds = [11, 12, 13]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RECORD_SRC + f"\nrecord({url!r}, {seed}, episodes=4)\n"],
            env={**os.environ, **s3.env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for seed in seeds
    ]
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0, out.decode(errors="replace")
    with gym_recording.load(url, storage_options=s3.storage_options) as rec:
        assert len(rec.writers) == 3
        assert len(rec) == 12
        by_seed: dict[int, list[gym_recording.Episode]] = {}
        for m in rec.writers:
            by_seed[m.metadata["seed"]] = [ep for ep in rec if ep.writer == m.writer]
    for seed in seeds:
        local = tmp_path / str(seed)
        record(str(local), seed, episodes=4)
        with gym_recording.load(local) as want:
            got = by_seed[seed]
            assert len(got) == len(want)
            for g, w in zip(got, want, strict=True):
                np.testing.assert_array_equal(g.observations, w.observations)
                np.testing.assert_array_equal(g.actions, w.actions)
                np.testing.assert_array_equal(g.rewards, w.rewards)
                assert (g.terminated, g.truncated, g.seed) == (w.terminated, w.truncated, w.seed)


def test_s3_recording_left_open_is_written_at_exit(s3: S3Server) -> None:
    """A recording never closed is written at interpreter exit, to S3 too: before the
    thread pools s3fs needs are shut down (atexit runs after them)."""
    url = f"s3://{s3.new_bucket()}/open"
    src = RECORD_SRC.replace("env.close()", "env.reset()  # (left open)")
    proc = subprocess.run(
        [sys.executable, "-c", src + f"\nrecord({url!r}, 5, batch_bytes=10**7)\n"],
        env={**os.environ, **s3.env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and "could not" not in proc.stderr, proc.stderr
    with gym_recording.load(url, storage_options=s3.storage_options) as rec:
        assert [ep.seed for ep in rec] == [500, 501, 502, None]
        assert rec[3].length == 0


def test_an_s3_recording_that_cannot_be_written_at_exit_says_so_once(s3: S3Server) -> None:
    """Its bucket gone before exit: the close before the thread pools stop fails and says
    so; it is not tried again at atexit, where the pools are gone (two more errors)."""
    bucket = s3.new_bucket()
    src = textwrap.dedent(
        f"""
        import numpy as np, s3fs
        from gym_recording import TraceRecording
        rec = TraceRecording("s3://{bucket}/run")  # (left open)
        rec.add_reset(np.zeros(2))
        rec.add_step(0, np.ones(2), 1.0)
        fs = s3fs.S3FileSystem()
        fs.rm("{bucket}", recursive=True)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", src],
        env={**os.environ, **s3.env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.stderr.count("could not flush the recording") == 1, proc.stderr
    assert "; check the network, the endpoint and the credentials" in proc.stderr  # (how)


def _thread_recording(url: str, episodes: int, pause: float) -> str:
    """Source: a thread (not a daemon) records ``episodes`` of 7 steps to ``url``, pausing
    ``pause`` s after each; the recording is left open."""
    return textwrap.dedent(
        f"""
        import threading, time, numpy as np
        from gym_recording import TraceRecording
        rec = TraceRecording({url!r}, batch_bytes=2000)
        def work():
            for e in range({episodes}):
                rec.add_reset(np.zeros(1), seed=e)
                for t in range(1, 8):
                    rec.add_step(0, np.full(1, float(t)), 1.0, terminated=t == 7)
                time.sleep({pause})
        threading.Thread(target=work).start()
        """
    )


def _child(src: str, s3: S3Server) -> subprocess.CompletedProcess[str]:
    """Run ``src`` in a child process that records to ``s3``."""
    env = {**os.environ, **s3.env}
    return subprocess.run(
        [sys.executable, "-c", src], env=env, capture_output=True, text=True, timeout=300
    )


def _interrupted_child(src: str, s3: S3Server, line: str, after: float = 0.0) -> str:
    """Run ``src`` in a child; Ctrl-C it ``after`` s once it prints ``line``. Its stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-c", src],
        env={**os.environ, **s3.env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == line + "\n"
        time.sleep(after)
        proc.send_signal(signal.SIGINT)
        return proc.communicate(timeout=120)[1]
    finally:
        proc.kill()


def test_a_ctrl_c_during_the_exit_write_to_s3_leaves_nothing_unwritten(s3: S3Server) -> None:
    """Two S3 recordings left open; Ctrl-C lands in the first one's write as they are closed
    before the thread pools stop. Both are still written whole, at ``atexit``: the interrupt
    stopped threading's exit hooks, the pools' shutdown with them."""
    urls = [f"s3://{s3.new_bucket()}/run" for _ in range(2)]
    # (A private class, for the one way to land the Ctrl-C inside the write at exit.)
    src = textwrap.dedent(
        f"""
        import time, numpy as np
        from gym_recording import TraceRecording
        from gym_recording.storage.remote import FsspecStorage
        write, held = FsspecStorage.write_atomic, []
        def held_once(self, *args, **kwargs):
            if not held:
                held.append(1)
                print("writing", flush=True)
                time.sleep(60)
            return write(self, *args, **kwargs)
        FsspecStorage.write_atomic = held_once
        recordings = [TraceRecording(url) for url in {urls!r}]  # (left open)
        for rec in recordings:
            for seed in range(3):
                rec.add_reset(np.zeros(2), seed=seed)
                rec.add_step(0, np.ones(2), 1.0)
        """
    )
    err = _interrupted_child(src, s3, "writing")
    assert "KeyboardInterrupt" in err and "could not flush" not in err, err
    for url in urls:
        with gym_recording.load(url, storage_options=s3.storage_options) as rec:
            assert [(ep.seed, ep.length) for ep in rec] == [(0, 1), (1, 1), (2, 1)]


def test_a_local_vector_recording_is_not_handed_over_before_its_threads_end(
    s3: S3Server, tmp_path: Path
) -> None:
    """An S3 recording left open closes as the main thread ends; a local vector wrapper
    that a thread still steps then is handed over at atexit, once that thread is done, not
    from the main thread while it steps (which wrote episodes of others' steps). A race:
    tried with a thread switch at every chance."""
    child = textwrap.dedent(
        """
        import os, sys, threading, time, numpy as np, gymnasium as gym
        sys.setswitchinterval(1e-6)
        from gym_recording import TraceRecording, TraceRecordingVectorWrapper

        class Count(gym.Env):
            observation_space = gym.spaces.Box(0, 1e9, (1,), np.float64)
            action_space = gym.spaces.Discrete(2)
            def reset(self, seed=None, options=None):
                self.t = 0
                return np.array([0.0]), {}
            def step(self, a):
                self.t += 1
                return np.array([float(self.t)]), 1.0, self.t >= 7, False, {}

        s3 = TraceRecording(sys.argv[1])  # (left open)
        s3.add_reset(np.zeros(1))
        env = TraceRecordingVectorWrapper(gym.vector.SyncVectorEnv([Count] * 8), sys.argv[2])
        env.reset(seed=0)
        def work():
            for _ in range(2000):
                env.step(np.zeros(8, dtype=np.int64))
        threading.Thread(target=work).start()
        time.sleep(0.05)  # (the thread well into its steps as the main thread ends)
        """
    )
    for trial in range(3):
        url, local = f"s3://{s3.new_bucket()}/run", tmp_path / str(trial)
        proc = subprocess.run(
            [sys.executable, "-c", child, url, str(local)],
            env={**os.environ, **s3.env},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0 and not proc.stderr, proc.stderr
        with gym_recording.load(local) as rec:
            for ep in rec:
                np.testing.assert_array_equal(ep.observations[:, 0], np.arange(ep.length + 1))
            assert sum(ep.length for ep in rec) == 2000 * 8 * 7 // 8  # (1 in 8: autoreset)
        with gym_recording.load(url, storage_options=s3.storage_options) as rec:
            assert len(rec) == 1
    # The vector wrapper's recordings on S3 too: they close as the main thread ends, once
    # the thread stepping them (not a daemon: exit waits for it) is done; every step is kept.
    remote_child = child.replace("sys.argv[2])", "sys.argv[1] + '-vector')")
    for _ in range(3):
        url = f"s3://{s3.new_bucket()}/run"
        proc = subprocess.run(
            [sys.executable, "-c", remote_child, url, "-"],
            env={**os.environ, **s3.env},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0 and "could not" not in proc.stderr, proc.stderr
        with gym_recording.load(url + "-vector", storage_options=s3.storage_options) as rec:
            for ep in rec:
                np.testing.assert_array_equal(ep.observations[:, 0], np.arange(ep.length + 1))
            assert sum(ep.length for ep in rec) == 2000 * 8 * 7 // 8


def test_a_thread_recording_to_s3_past_the_main_thread_is_waited_for(s3: S3Server) -> None:
    """A thread (not a daemon) still recording to S3 as the main thread ends: the close
    before the thread pools stop waits for it, and every episode is written. Before, it
    closed the recording under the thread, which lost the rest (and met a half-done batch)."""
    url = f"s3://{s3.new_bucket()}/run"
    child = "import sys; sys.setswitchinterval(1e-6)\n" + _thread_recording(url, 60, 0.0)
    child += "time.sleep(0.05)\n"
    proc = _child(child, s3)
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    with gym_recording.load(url, storage_options=s3.storage_options) as rec:
        assert [ep.seed for ep in rec] == list(range(60))
        for ep in rec:
            np.testing.assert_array_equal(ep.observations[:, 0], np.arange(8.0))


def test_a_ctrl_c_while_exit_waits_for_a_thread_leaves_its_recording_to_it(
    s3: S3Server,
) -> None:
    """Ctrl-C while the exit waits for a thread still recording to S3: that recording is not
    closed under the thread (which met a half-done batch), and the exit says what is lost;
    the batches written before read back whole."""
    url = f"s3://{s3.new_bucket()}/run"
    child = _thread_recording(url, 1000, 0.01)
    child += "time.sleep(0.3)\nprint('main thread done', flush=True)\n"
    err = _interrupted_child(child, s3, "main thread done", after=1.0)  # (the wait begun)
    assert "not writing the recording" in err and "IndexError" not in err, err
    with gym_recording.load(url, storage_options=s3.storage_options) as rec:
        assert 0 < len(rec) < 1000
        for ep in rec:
            np.testing.assert_array_equal(ep.observations[:, 0], np.arange(8.0))


def test_a_thread_stepping_a_vector_env_the_main_thread_reset_is_waited_for(
    s3: S3Server,
) -> None:
    """The main thread resets a vector wrapper on S3 that a thread then steps past the main
    thread's end: the exit waits for that thread (its steps reach the recordings in rows,
    later), and every step is written."""
    url = f"s3://{s3.new_bucket()}/run"
    child = textwrap.dedent(
        f"""
        import threading, time, numpy as np, gymnasium as gym
        from gym_recording import TraceRecordingVectorWrapper

        class Long(gym.Env):
            observation_space = gym.spaces.Box(-1e9, 1e9, (1,), np.float64)
            action_space = gym.spaces.Discrete(2)
            def reset(self, *, seed=None, options=None):
                self.t = 0
                return np.zeros(1), {{}}
            def step(self, a):
                self.t += 1
                return np.full(1, float(self.t)), 1.0, self.t >= 3000, False, {{}}

        envs = TraceRecordingVectorWrapper(gym.vector.SyncVectorEnv([Long] * 2), {url!r})
        stepped, go = threading.Event(), threading.Event()
        def rollout():
            for _ in range(10):
                envs.step(np.zeros(2, np.int64))
            stepped.set()
            go.wait()
            for _ in range(2000):
                envs.step(np.zeros(2, np.int64))
        envs.reset(seed=0)
        threading.Thread(target=rollout).start()
        stepped.wait()
        envs.reset(seed=1)  # (in the main thread, between the thread's steps)
        go.set()
        time.sleep(0.01)
        """
    )
    proc = _child(child, s3)
    assert proc.returncode == 0 and "could not" not in proc.stderr, proc.stderr
    with gym_recording.load(url, storage_options=s3.storage_options) as rec:
        assert sorted(ep.length for ep in rec) == [10, 10, 2000, 2000]


def test_reader_consistent_while_writer_writes(s3: S3Server) -> None:
    """A reader polling the prefix during writing always finds every listed episode whole."""
    url = f"s3://{s3.new_bucket()}/live"
    opts = s3.storage_options
    done = threading.Event()
    errors: list[BaseException] = []

    def write() -> None:
        try:
            record(url, seed=5, episodes=8, storage_options=opts, batch_bytes=300)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            done.set()

    writer = threading.Thread(target=write)
    writer.start()
    seen = []
    finished = False
    while not finished:
        finished = done.is_set()  # one more full read after the writer is done
        try:
            rec = gym_recording.load(url, storage_options=opts)
        except TraceFormatError:  # nothing written yet
            if finished:
                raise
            continue
        with rec:
            for ep in rec:
                assert ep.observations.shape == (ep.length + 1, 4)
                assert ep.rewards.shape == (ep.length,)
            seen.append(len(rec))
    writer.join()
    assert not errors
    assert seen == sorted(seen) and seen[-1] == 8


def test_upload_download_round_trip(
    s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """upload_recording/download_recording keep the original helpers' signatures and layout."""
    from gym_recording import storage_s3

    monkeypatch.setattr(storage_s3, "CACHE_DIR", str(tmp_path / "cache"))
    local = tmp_path / "local"
    record(str(local), seed=6)
    (local / ".gymrec-tmp-leftover").write_bytes(b"half a file")
    bucket = s3.new_bucket()
    url = storage_s3.upload_recording(str(local), "CartPole-v1", bucket)  # original signature
    assert re.fullmatch(
        rf"s3://{bucket}/recording/CartPole-v1/\d{{4}}-\d\d-\d\d_\d\d-\d\d-\d\d_\w{{3}}", url
    )
    with gym_recording.load(url) as got, gym_recording.load(local) as want:
        assert_episodes_equal(got, want)
    directory = storage_s3.download_recording(url)
    assert directory.startswith(str(tmp_path / "cache"))
    # (the mode mkdir gives a directory, as the cache's own: not mkdtemp's 0700)
    assert os.stat(directory).st_mode & 0o777 == os.stat(os.path.dirname(directory)).st_mode & 0o777
    assert sorted(os.listdir(directory)) == sorted(
        n for n in os.listdir(local) if not n.startswith(".gymrec-tmp-")
    )
    with gym_recording.load(directory) as got, gym_recording.load(local) as want:
        assert_episodes_equal(got, want)
    assert storage_s3.download_recording(url + "/") == directory  # cached
    with pytest.raises(ValueError, match="s3://bucket/prefix"):
        storage_s3.download_recording("https://example.com/x")
    with pytest.raises(ValueError, match="s3://bucket/prefix"):
        storage_s3.download_recording(f"s3://{bucket}/a/../b")


def _writing_between_listings(
    monkeypatch: pytest.MonkeyPatch, cls: Any, writer: gym_recording.TraceRecording
) -> None:
    """A writer writes a batch as each listing of ``cls`` (a storage) returns, as a writer
    in another process might then. (The storage's method is patched for the timing alone:
    the writes and the copy are the real ones.)"""
    listed = cls.list_names

    def list_names(self: Any) -> list[str]:
        names = listed(self)
        writer.add_reset(np.zeros(64))
        for t in range(20):
            writer.add_step(0, np.full(64, t, np.float64), 1.0, terminated=t == 19)
        writer.end_episode()
        writer.save_complete()
        return names

    monkeypatch.setattr(cls, "list_names", list_names)


def test_a_recording_being_written_is_downloaded_and_uploaded_whole(
    s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy holds the manifests as they were when it began, and every batch they list: a
    manifest that appeared since (a new writer's) listed batches the copy did not hold."""
    from gym_recording.storage.remote import FsspecStorage
    from gym_recording.tools import transfer

    url = f"s3://{s3.new_bucket()}/run"
    record(url, seed=1, episodes=1)
    with monkeypatch.context() as patch:
        late = gym_recording.TraceRecording(url, batch_bytes=2000)
        _writing_between_listings(patch, FsspecStorage, late)
        directory = transfer.download_recording(url, cache_dir=str(tmp_path / "cache"))
    late.close()
    assert verify(directory).ok, verify(directory).problems
    with gym_recording.load(directory) as got:
        assert len(got) >= 1
    local = tmp_path / "local"
    record(str(local), seed=2, episodes=1)
    late = gym_recording.TraceRecording(local, batch_bytes=2000)
    late.add_reset(np.zeros(64))  # (its manifest is there before the copy begins)
    late.add_step(0, np.ones(64), 1.0, terminated=True)
    late.end_episode()
    late.save_complete()
    with monkeypatch.context() as patch:
        _writing_between_listings(patch, LocalStorage, late)
        uploaded = transfer.upload_recording(local, "CartPole-v1", s3.new_bucket())
    late.close()
    assert verify(uploaded).ok, verify(uploaded).problems


def test_an_s3_folder_marker_is_no_file_of_the_recording(s3: S3Server, tmp_path: Path) -> None:
    """The empty "run/" key an S3 console's "Create folder" makes is not listed as a file."""
    import s3fs

    bucket = s3.new_bucket()
    s3fs.S3FileSystem().pipe(f"{bucket}/run/", b"")
    url = f"s3://{bucket}/run"
    record(url, seed=3, episodes=1)
    names = open_storage(url, create=False).list_names()
    assert names and all(n.startswith("openaigym.trace.") for n in names), names
    from gym_recording.tools import transfer

    directory = transfer.download_recording(url, cache_dir=str(tmp_path / "cache"))
    with gym_recording.load(directory) as got, gym_recording.load(url) as want:
        assert_episodes_equal(got, want)


def test_download_of_a_prefix_and_of_a_longer_one(
    s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Downloading ``exp/seed1`` makes the cache directory of ``exp``: downloading ``exp``
    after it still fetches ``exp``'s own recording (it returned the empty directory). Env
    names of the command line's ``module:ENV_ID`` form, or with spaces, download too."""
    from gym_recording import storage_s3

    monkeypatch.setattr(storage_s3, "CACHE_DIR", str(tmp_path / "cache"))
    bucket = s3.new_bucket()
    for prefix, seed in (("exp/seed1", 1), ("exp", 2)):
        record(f"s3://{bucket}/{prefix}", seed, episodes=2)
    for prefix, seed in (("exp/seed1", 1), ("exp", 2)):
        directory = storage_s3.download_recording(f"s3://{bucket}/{prefix}")
        record(str(tmp_path / str(seed)), seed, episodes=2)
        with gym_recording.load(directory) as got, gym_recording.load(tmp_path / str(seed)) as want:
            assert_episodes_equal(got, want)
    for name in ("ale_py:ALE/Pong-v5", "My Env"):
        url = storage_s3.upload_recording(str(tmp_path / "1"), name, bucket)
        with gym_recording.load(storage_s3.download_recording(url)) as got:
            assert len(got) == 2


def test_downloads_of_one_bucket_and_prefix_from_two_endpoints_are_kept_apart(
    s3: S3Server, tmp_path: Path
) -> None:
    """Two S3 servers hold different recordings under one bucket and prefix: each download
    is its own server's (they shared one cache directory: the second returned the first's).
    The default endpoint's keeps the original helper's <cache>/<bucket>/<prefix>; another
    one's is under @<host>_<port>, the same whether given as endpoint_url or client_kwargs."""
    import s3fs

    from gym_recording.tools import transfer

    cache, bucket = str(tmp_path / "cache"), s3.new_bucket()
    url = f"s3://{bucket}/run"
    with moto_s3_process() as other:
        s3fs.S3FileSystem(**other.storage_options).mkdir(bucket)
        record(url, seed=1, episodes=1)  # (the default endpoint: AWS_ENDPOINT_URL, s3's)
        record(url, seed=2, episodes=2, storage_options=other.storage_options)
        mine = transfer.download_recording(url, cache_dir=cache)
        theirs = transfer.download_recording(
            url, storage_options=other.storage_options, cache_dir=cache
        )
        for directory, seed in ((mine, 1), (theirs, 2)):
            with gym_recording.load(directory) as rec:
                assert len(rec) == seed and rec.writers[0].metadata == {"seed": seed}
        host, port = other.endpoint.removeprefix("http://").split(":")
        assert mine == os.path.join(cache, bucket, "run")
        assert theirs == os.path.join(cache, f"@{host}_{port}", bucket, "run")
        client = {"client_kwargs": {"endpoint_url": other.endpoint + "/"}}
        options = {"key": "testing", "secret": "testing", **client}
        assert transfer.download_recording(url, storage_options=options, cache_dir=cache) == theirs


def test_the_default_download_cache_is_private_to_its_user(
    s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default cache sits in the shared temporary directory: it is made (or made again)
    readable by its user alone, and one another user made there is refused, not read (its
    recordings could be anyone's)."""
    from gym_recording.tools import transfer

    cache = tmp_path / "gym-recording-s3-me"
    monkeypatch.setattr(transfer, "CACHE_DIR", str(cache))
    bucket = s3.new_bucket()
    record(f"s3://{bucket}/run", seed=2, episodes=1)
    cache.mkdir(mode=0o755)
    got = transfer.download_recording(f"s3://{bucket}/run")
    assert cache.stat().st_mode & 0o777 == 0o700 and len(gym_recording.load(got)) == 1
    if os.geteuid() != 0:
        pytest.skip("needs root to make a directory of another user")
    shutil.rmtree(cache)
    (cache / bucket / "run").mkdir(parents=True)
    os.chown(cache, 65534, 65534)
    with pytest.raises(RecordingError, match=r"not a directory of this user's.*uid 65534"):
        transfer.download_recording(f"s3://{bucket}/run")


def test_missing_s3_location_is_a_format_error(s3: S3Server) -> None:
    """load() of an empty prefix says that nothing is stored there."""
    url = f"s3://{s3.new_bucket()}/nothing-here"
    with pytest.raises(TraceFormatError, match="nothing is stored there"):
        gym_recording.load(url, storage_options=s3.storage_options)


def test_s3_as_a_directory_its_folders_files_and_aliases(s3: S3Server, tmp_path: Path) -> None:
    """An S3 prefix behaves as a directory does: its parent warns that it holds no recording
    but the "folder" under it (it opened silently empty), a URL naming a file says so (it
    said nothing was stored there), a download copies the recording's files and not the
    folders under it, verify does not promise that --clean removes a remote temporary file
    (it said "0 s ago, --clean removes it once 60 s old"), and compress refuses a copy inside
    the recording by another name of its filesystem (s3a://, simplecache::s3://)."""
    import s3fs

    from gym_recording.tools import transfer
    from gym_recording.tools.recode import recode

    bucket = s3.new_bucket()
    url = f"s3://{bucket}/runs/run1"
    record(url, seed=3, episodes=1)
    with pytest.warns(gym_recording.NoRecordingWarning, match=r"only 1 other entry \(run1\)"):
        assert len(gym_recording.load(f"s3://{bucket}/runs")) == 0
    manifest = next(n for n in open_storage(url, create=False).list_names() if "manifest" in n)
    with pytest.raises(TraceFormatError, match="but it is a file: give the prefix of its"):
        gym_recording.load(f"{url}/{manifest}")
    fs = s3fs.S3FileSystem()
    fs.pipe_file(f"{bucket}/runs/run1/nested/x.txt", b"x")
    fs.pipe_file(f"{bucket}/runs/run1/.gymrec-tmp-left", b"x")
    fs.pipe_file(f"{bucket}/runs/run1/notes.txt", b"what this run was")
    directory = transfer.download_recording(url, cache_dir=str(tmp_path / "cache"))
    listed = open_storage(url, create=False).list_names()
    assert "nested" in listed  # (as a local directory lists its subdirectories)
    assert sorted(os.listdir(directory)) == sorted(
        n for n in listed if n not in ("nested", ".gymrec-tmp-left")
    )
    proc = subprocess.run(
        [sys.executable, "-m", "gym_recording", "verify", "--clean", url],
        env={**os.environ, **s3.env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        f"{url}/.gymrec-tmp-left: temporary file of a running or an interrupted write "
        "(readers ignore it; --clean removes local files only: remove it with the storage's "
        "own tools)" in proc.stdout.splitlines()
    ), proc.stdout
    for out in (f"s3a://{bucket}/runs/run1/sub", f"simplecache::s3://{bucket}/runs/run1/s2"):
        with pytest.raises(RecordingError, match="is inside it"):
            recode(url, out, compression="zstd")
    with pytest.raises(RecordingError, match="holds it"):
        recode(url, f"s3a://{bucket}/runs", compression="zstd")


# --------------------------------------------------------------------------------------------
# memory:// and the storage choice
# --------------------------------------------------------------------------------------------


@pytest.fixture
def memory_url(request: pytest.FixtureRequest) -> Iterator[str]:
    fsspec = pytest.importorskip("fsspec")
    root = f"/gymrec-test-{os.getpid()}-{request.node.name}"
    yield f"memory://{root}"
    fs = fsspec.filesystem("memory")
    if fs.exists(root):
        fs.rm(root, recursive=True)


def test_memory_recording_equals_local(memory_url: str, tmp_path: Path) -> None:
    """memory:// goes through FsspecStorage and reads back equal to a local recording."""
    record(memory_url, seed=7)
    record(str(tmp_path), seed=7)
    with gym_recording.load(memory_url) as got, gym_recording.load(tmp_path) as want:
        assert_episodes_equal(got, want)
        ep = got[0]
        assert not ep.observations.flags.writeable
    st = open_storage(memory_url, create=False)
    assert type(st).__name__ == "FsspecStorage"
    assert names_by_kind(st.list_names()) == names_by_kind(os.listdir(tmp_path))


def test_remote_reads_fetch_each_file_once_and_only_what_is_read(
    s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Iterating an S3 recording fetches its files ahead, each once (what was fetched ahead
    is what is read); ``rec[i]`` fetches its own batches only, and reads out of order during
    an iteration fetch no more than their own files. Counted at s3fs's requests."""
    import s3fs

    url = f"s3://{s3.new_bucket()}/ahead"
    record(url, seed=4, episodes=25, batch_bytes=300, storage_options=s3.storage_options)
    fetched: list[str] = []
    cat_file = s3fs.S3FileSystem._cat_file

    async def counted(self: Any, path: str, *args: Any, **kwargs: Any) -> Any:
        fetched.append(path.rsplit("/", 1)[-1])
        return await cat_file(self, path, *args, **kwargs)

    monkeypatch.setattr(s3fs.S3FileSystem, "_cat_file", counted)
    opts = {**s3.storage_options, "skip_instance_cache": True}  # (its methods: the counted)
    with gym_recording.load(url, storage_options=opts) as rec:
        batches = rec.writers[0].batches
        assert len(batches) > 40  # (more than fetched at once)
        del fetched[:]
        episodes = list(rec)
        assert sorted(fetched) == sorted(set(fetched)) and len(fetched) == 2 * len(batches)
    with gym_recording.load(url, storage_options=opts) as rec:
        del fetched[:]
        first = rec[0]
        spans = next(k + 1 for k, b in enumerate(batches) if not b.continues)
        assert len(fetched) == 2 * spans < 2 * len(batches), fetched
        np.testing.assert_array_equal(first.observations, episodes[0].observations)
        del fetched[:]
        for ep in rec:  # (each episode beside the one as far from the end)
            np.testing.assert_array_equal(
                rec[len(rec) - 1 - ep.index].observations, episodes[-1 - ep.index].observations
            )
        assert len(fetched) <= 4 * len(batches), fetched
        del fetched[:]
        for ep in rec:  # (refreshed now and then: the batch files fetched are kept)
            if ep.index % 3 == 0:
                rec.refresh()
        batch_files = [n for n in fetched if "manifest" not in n]
        assert sorted(batch_files) == sorted(set(batch_files)), batch_files
    from gym_recording.storage.remote import FsspecStorage

    monkeypatch.setattr(FsspecStorage, "MAX_FETCHED_BYTES", 1)  # (a batch past the bound)
    with gym_recording.load(url, storage_options=opts) as rec:
        del fetched[:]
        assert len(list(rec)) == len(episodes)
        assert len(fetched) == len(set(fetched)) == 2 * len(batches)  # (what is read: kept)
    record(str(tmp_path), seed=4, episodes=25, batch_bytes=300)
    with gym_recording.load(url, storage_options=opts) as got, gym_recording.load(tmp_path) as want:
        assert_episodes_equal(got, want)


def test_a_cached_s3_recording_missing_a_file_names_it_and_reads_once_it_is_back(
    s3: S3Server, tmp_path: Path
) -> None:
    """``simplecache::s3://``: a blob missing is named (another file, cut short by an
    abandoned download of files fetched ahead, was named before), and once it is back the
    same cache reads every episode (the cut files stayed in it)."""
    import s3fs

    local = tmp_path / "local"
    with gym_recording.TraceRecording(local, batch_bytes=1) as r:
        for e in range(10):
            r.add_reset(np.full(40_000, e, float))
            r.add_step(0, np.full(40_000, e, float), 1.0)
    bucket = s3.new_bucket()
    fs = s3fs.S3FileSystem(**s3.storage_options)
    fs.put(f"{local}/", f"{bucket}/run/", recursive=True)
    url = f"simplecache::s3://{bucket}/run"
    for k in range(2, 6):  # (a race: tried on several blobs, each with a cache of its own)
        blob = next(n for n in fs.ls(f"{bucket}/run") if n.endswith(f"ep00000000{k}.bin"))
        saved = fs.cat_file(blob)
        fs.rm_file(blob)
        cache = {"cache_storage": str(tmp_path / f"cache{k}")}
        opts = {"s3": s3.storage_options, "simplecache": cache}
        with (
            pytest.raises(TraceFormatError, match=rf"ep00000000{k}\.bin: .*does not exist"),
            gym_recording.load(url, storage_options=opts) as rec,
        ):
            list(rec)
        fs.pipe_file(blob, saved)
        with gym_recording.load(url, storage_options=opts) as rec:
            assert [float(ep.observations[0, 0]) for ep in rec] == [float(e) for e in range(10)]


def test_memory_refresh_sees_new_batches(memory_url: str) -> None:
    """Recording.refresh() relists the prefix and finds batches written since load()."""
    rec_w = gym_recording.TraceRecording(memory_url)
    rec_w.add_reset(np.zeros(2, np.float32))
    rec_w.add_step(0, np.ones(2, np.float32), 1.0, terminated=True)
    rec_w.end_episode()
    rec_w.save_complete()
    with gym_recording.load(memory_url) as rec:
        assert len(rec) == 1
        rec_w.add_reset(np.zeros(2, np.float32))
        rec_w.close()
        rec.refresh()
        assert len(rec) == 2


def test_fsspec_storage_checks_names_and_sizes(memory_url: str) -> None:
    """FsspecStorage refuses non-plain names and files over the size limit."""
    st = open_storage(memory_url, create=True)
    assert st.write_atomic("a.json", [b"x" * 10, memoryview(b"yz")], sync_directory=False) == 12
    st.sync()  # nothing to do: each PUT is durable when it returns
    assert st.read_bytes("a.json", 12) == b"x" * 10 + b"yz"
    with pytest.raises(TraceFormatError, match="limit"):
        st.read_bytes("a.json", 11)
    with pytest.raises(TraceFormatError, match="does not exist"):
        st.read_bytes("missing.json", 100)
    with pytest.raises(TraceFormatError, match="plain file name"):
        st.write_atomic("../escape", [b""])
    view = st.map("a.json")
    assert view.readonly and bytes(view[:2]) == b"xx"
    st.remove("a.json")
    assert st.list_names() == []


def test_file_url_and_paths_use_local_storage(tmp_path: Path) -> None:
    """A plain path and a file:// (or fsspec's local://) URL all get the local, fsync'ing
    storage, whose renames keep readers from seeing a file half written."""
    assert isinstance(open_storage(tmp_path / "a", create=True), LocalStorage)
    st = open_storage(f"file://{tmp_path}/b", create=True)
    assert isinstance(st, LocalStorage) and st.location == f"{tmp_path}/b"
    st = open_storage(f"local://{tmp_path}/l%41#1", create=True)  # (the rest, as fsspec has it)
    assert isinstance(st, LocalStorage) and st.location == f"{tmp_path}/l%41#1"
    record(f"file://{tmp_path}/c", seed=8, episodes=1)
    with gym_recording.load(tmp_path / "c") as rec:
        assert len(rec) == 1
    with pytest.raises(RecordingError, match="this host"):
        open_storage("file://otherhost/x", create=True)


def test_missing_fsspec_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without fsspec, a URL raises DependencyNotInstalled naming the 'remote' extra."""
    monkeypatch.setitem(sys.modules, "fsspec", None)
    with pytest.raises(DependencyNotInstalled, match=r"gym-recording\[remote\]"):
        gym_recording.load("s3://bucket/x")


def test_compressed_recording_to_s3(s3: S3Server, tmp_path: Path) -> None:
    """compression="zstd" on S3: frames compressed on the writer thread, PUT, read back equal."""
    url = f"s3://{s3.new_bucket()}/runs/z"
    frames = np.zeros((30, 64, 64), np.uint8)
    frames[:, 8:24, 8:24] = np.arange(30, dtype=np.uint8)[:, None, None]
    for where, opts in ((url, s3.storage_options), (str(tmp_path), None)):
        with gym_recording.TraceRecording(
            where, compression="zstd", batch_bytes=40_000, storage_options=opts
        ) as rec:
            rec.add_reset(frames[0])
            for t in range(1, 30):
                rec.add_step(t % 3, frames[t], float(t), terminated=t == 29)
    opts = s3.storage_options
    with gym_recording.load(url, storage_options=opts) as got, gym_recording.load(tmp_path) as want:
        assert_episodes_equal(got, want)
        np.testing.assert_array_equal(got[0].observations, frames)
    assert verify(url).ok  # (the server found through AWS_ENDPOINT_URL)
    remote = open_storage(url, create=False, storage_options=opts)
    blobs = [n for n in remote.list_names() if n.endswith(".bin")]
    assert sum(len(remote.read_bytes(n, 1 << 30)) for n in blobs) < frames.nbytes // 20


def test_a_storage_that_cannot_be_reached_is_a_read_error_not_a_damaged_file() -> None:
    """A recording whose server goes away: opening it, or reading a batch of it once open,
    raises ReadError (the storage failed: read again later), not TraceFormatError (a damaged
    file), and verify says so without calling the files damaged."""
    quick = {"config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 2}}
    with moto_s3_process() as server:
        opts = {**server.storage_options, **quick}
        import s3fs

        s3fs.S3FileSystem(**server.storage_options).mkdir("gone")
        record("s3://gone/run", seed=1, storage_options=opts)
        rec = gym_recording.load("s3://gone/run", storage_options=opts)
        assert len(rec) == 3
    with pytest.raises(gym_recording.ReadError, match="check the network") as caught:
        rec[0].observations  # noqa: B018 (its batch is read now)
    assert not isinstance(caught.value, TraceFormatError)
    rec.close()
    with pytest.raises(gym_recording.ReadError, match="gone/run"):
        gym_recording.load("s3://gone/run", storage_options=opts)
    report = verify("s3://gone/run", storage_options=opts)
    assert not report.ok and "check the network" in str(report.problems)
    (line,) = report.lines()  # (the location named once, then what failed and what to do)
    assert line.count("s3://gone/run") == 1 and "AWS_ENDPOINT_URL" in line, line


def test_missing_s3fs_names_the_extra() -> None:
    """fsspec without s3fs (ray, pandas and datasets bring fsspec): an s3:// URL raises
    DependencyNotInstalled naming the 'remote' extra."""
    code = (
        "import sys; sys.modules['s3fs'] = None\n"
        "import gym_recording\n"
        "try:\n"
        "    gym_recording.load('s3://bucket/run1')\n"
        "except gym_recording.DependencyNotInstalled as exc:\n"
        "    print(exc)\n"
    )
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "'s3fs'" in got.stdout and 'pip install "gym-recording[remote]"' in got.stdout


def test_a_recording_loaded_before_a_fork_reads_in_the_child(s3: S3Server) -> None:
    """A data loader's forked workers read the s3:// Recording their parent loaded (s3fs
    refuses to run in a forked child: every read not cached yet raised a ReadError that
    blamed the network and the credentials)."""
    url = f"s3://{s3.new_bucket()}/run"
    record(url, seed=3, episodes=4, storage_options=s3.storage_options)
    with gym_recording.load(url, storage_options=s3.storage_options) as rec:
        assert len(rec.writers[0].batches) > 2
        want = [ep.observations.tolist() for ep in rec]
        rec.refresh()  # (nothing cached: the child reads every batch)
        rec[0]  # (the parent's filesystem in use as it forks)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: what it reads, or its error
            try:
                got: Any = [rec[i].observations.tolist() for i in range(len(rec))]
            except BaseException as exc:
                got = f"{type(exc).__name__}: {exc}"
            os.write(w, json.dumps(got).encode())
            os._exit(0)
        os.close(w)
        with os.fdopen(r, "rb") as f:
            data = f.read()
        os.waitpid(pid, 0)
    assert json.loads(data) == want


def test_a_location_that_cannot_be_reached_as_its_filesystem_is_made() -> None:
    """An fsspec filesystem that connects as it is made (ftp://): a ReadError naming the URL
    for a reader, as the README says for a storage that cannot be reached, and a
    RecordingError for a writer (both were a bare ConnectionRefusedError)."""
    with socket.socket() as sock:  # (a port nothing listens on)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"ftp://127.0.0.1:{port}/run1"
    with pytest.raises(ReadError, match=re.escape(f"{url}: cannot reach the recording location")):
        gym_recording.load(url)
    with pytest.raises(
        RecordingError, match=re.escape(f"cannot reach the recording location {url!r}")
    ):
        gym_recording.TraceRecording(url)


def test_compress_between_two_urls_without_fsspec_names_the_extra() -> None:
    """compress/decompress from one URL to another, without the remote extra: one line
    naming it, exit 1 (it was a ModuleNotFoundError traceback: the two URLs were compared
    before either was opened)."""
    code = (
        "import sys; sys.modules['fsspec'] = None\n"
        "from gym_recording.tools.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    for command in ("compress", "decompress"):
        got = subprocess.run(
            [sys.executable, "-c", code, command, "s3://bucket/run1", "s3://bucket/run2"],
            capture_output=True,
            text=True,
        )
        assert got.returncode == 1, got.stderr
        assert "Traceback" not in got.stderr
        assert 'pip install "gym-recording[remote]"' in got.stderr, got.stderr


def test_download_into_a_cache_where_no_directory_can_be_made(s3: S3Server, tmp_path: Path) -> None:
    """A cache_dir under a file (or one may not write to): a RecordingError naming the cache
    and what to do; it was a raw NotADirectoryError. The compatibility module takes the
    cache_dir the message names too (it had none)."""
    from gym_recording import storage_s3
    from gym_recording.tools import transfer

    url = f"s3://{s3.new_bucket()}/run"
    record(url, seed=3, episodes=1)
    (tmp_path / "f").write_text("x")
    cache = str(tmp_path / "f" / "cache")
    for download in (transfer.download_recording, storage_s3.download_recording):
        with pytest.raises(RecordingError) as got:
            download(url, cache_dir=cache)
        assert str(got.value) == (
            f"cannot make the download cache's directory in {cache}: Not a directory; pass a "
            "cache_dir you may write to"
        )
    directory = storage_s3.download_recording(url, cache_dir=str(tmp_path / "cache"))
    assert directory.startswith(str(tmp_path / "cache"))
    assert len(gym_recording.load(directory)) == 1


# --------------------------------------------------------------------------------------------
# A password in the URL (HTTP and FTP servers on 127.0.0.1)
# --------------------------------------------------------------------------------------------


def test_a_password_in_the_url_stays_out_of_messages_and_names(tmp_path: Path) -> None:
    """A recording read over HTTP from a URL holding a password: it reads, and neither the
    recording's name, its repr, a damaged file's error, the CLI's info, a writer's directory
    nor an unreachable server's errors (reading and writing) show the password; the
    wrapper's spec keeps the URL as given (gym.make of it writes there again)."""
    import functools
    import http.server

    record(str(tmp_path / "srv" / "rec"), seed=1, episodes=2)

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=str(tmp_path / "srv"))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://ann:s3cret@127.0.0.1:{server.server_address[1]}/rec"
        with gym_recording.load(url) as rec:
            assert len(rec) == 2
            assert rec.directory == url.replace(":s3cret@", ":***@")
            assert "s3cret" not in repr(rec)
        info = subprocess.run(
            [sys.executable, "-m", "gym_recording", "info", url],
            capture_output=True,
            text=True,
            check=True,
        )
        assert "ann:***@" in info.stdout and "s3cret" not in info.stdout + info.stderr
        for blob in (tmp_path / "srv" / "rec").glob("*.bin"):
            blob.unlink()
        with gym_recording.load(url) as rec, pytest.raises(TraceFormatError) as err:
            rec[0]
        assert "ann:***@" in str(err.value) and "s3cret" not in str(err.value)
    finally:
        server.shutdown()
        server.server_close()
    url = "memory://ann:s3cret@host/password-run"  # (the writer's side, in memory)
    env = gym_recording.TraceRecordingWrapper(gymnasium.make("CartPole-v1"), url)
    env.reset(seed=0)
    env.step(0)
    env.close()
    assert env.directory == "memory://ann:***@host/password-run"
    assert env.spec is not None and env.spec.additional_wrappers[-1].kwargs["directory"] == url
    assert len(gym_recording.load(url)) == 1  # (the spec's URL, as given, makes it again)
    with socket.socket() as s:  # (a port nothing listens on)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"ftp://ann:s3cret@127.0.0.1:{port}/rec"
    with pytest.raises(ReadError) as read_err:
        gym_recording.load(url)
    with pytest.raises(RecordingError) as write_err:
        gym_recording.TraceRecording(url)
    for exc in (read_err.value, write_err.value):
        assert "ann:***@" in str(exc) and "s3cret" not in str(exc)
    (problems,) = gym_recording.verify(url).problems.values()  # (the place named once)
    assert problems[0].startswith("cannot reach the recording location: "), problems


def test_a_relative_local_url_is_kept_absolute_in_the_wrapper_s_spec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``local://rel`` is a path, relative to the working directory when it is made: the
    spec names it absolute, as it names a relative plain path (gym.make of the spec
    writes there after a change of directory)."""
    monkeypatch.chdir(tmp_path)
    env = gym_recording.TraceRecordingWrapper(gymnasium.make("CartPole-v1"), "local://rel")
    env.close()
    assert env.spec is not None
    assert env.spec.additional_wrappers[-1].kwargs["directory"] == str(tmp_path / "rel")
