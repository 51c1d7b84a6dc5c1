"""The command line through its real entry point, ``python -m gym_recording``.

record, info, export (read back by pyarrow/pandas, numpy and Minari), import-minari, ``--help``
on each command, and errors on stderr with non-zero exit codes. Every file goes to tmp_path
(``TMPDIR`` and ``MINARI_DATASETS_PATH`` point there). ``verify`` and ``view`` are tested by
their own suites.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import gym_recording

Run = Callable[..., subprocess.CompletedProcess[str]]


def make_runner(tmp: Path) -> Run:
    env = dict(os.environ)
    env.update(
        TMPDIR=str(tmp),
        MINARI_DATASETS_PATH=str(tmp / "minari"),
        PYTHONWARNINGS="ignore",
    )
    env.pop("MPLBACKEND", None)

    def run(*args: str, expect: int = 0) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [sys.executable, "-m", "gym_recording", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
        assert proc.returncode == expect, (
            f"exit {proc.returncode}, expected {expect}\nstdout:\n{proc.stdout}\n"
            f"stderr:\n{proc.stderr}"
        )
        return proc

    return run


@pytest.fixture
def cli(tmp_path: Path) -> Run:
    return make_runner(tmp_path)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CartPole recording made by ``record`` (module-wide, read-only for the tests)."""
    tmp = tmp_path_factory.mktemp("cli")
    out = tmp / "cartpole"
    make_runner(tmp)("record", "CartPole-v1", "--episodes", "4", "--dir", str(out), "--seed", "3")
    return out


def assert_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.stderr.startswith("gym-recording: error:") or "error:" in proc.stderr
    for needle in needles:
        assert needle in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


# --------------------------------------------------------------------------------------------
# record / info
# --------------------------------------------------------------------------------------------


def test_record_defaults_to_cartpole(cli: Run, tmp_path: Path) -> None:
    proc = cli("record")
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("Recorded 20 episodes (")
    assert " of CartPole-v1 to " in lines[0]
    directory = Path(lines[0].rsplit(" to ", 1)[1])
    assert directory.is_dir() and directory.is_relative_to(tmp_path)  # TMPDIR is honoured
    assert "Mean return" in proc.stdout
    assert f"gym-recording info {directory}" in proc.stdout  # what to run next
    with gym_recording.load(directory) as rec:
        assert len(rec) == 20
        assert rec.env_id == "CartPole-v1"
        assert [ep.seed for ep in rec] == list(range(20))
        assert rec.metadata["policy"] == "uniform random"
        steps = sum(ep.length for ep in rec)
    assert f"({steps} steps)" in lines[0]


def test_record_options(cli: Run, tmp_path: Path) -> None:
    out = tmp_path / "mc"
    args = ["MountainCar-v0", "--episodes", "2", "--dir", str(out), "--seed", "7"]
    proc = cli("record", *args, "--max-steps", "15")
    assert f"to {out}" in proc.stdout
    with gym_recording.load(out) as rec:
        assert [ep.length for ep in rec] == [15, 15]
        assert all(ep.truncated for ep in rec)
        assert [ep.seed for ep in rec] == [7, 8]
        assert rec.env_id == "MountainCar-v0"


def test_record_into_a_directory_with_a_recording_reports_this_run(
    cli: Run, tmp_path: Path
) -> None:
    out = str(tmp_path / "r")
    args = ["MountainCar-v0", "--episodes", "2", "--dir", out, "--max-steps", "15"]
    cli("record", *args)
    proc = cli("record", *args)
    assert "Recorded 2 episodes (30 steps)" in proc.stdout
    assert "Mean return -15.00" in proc.stdout
    with gym_recording.load(out) as rec:
        assert len(rec) == 4


def test_record_is_reproducible(cli: Run, tmp_path: Path) -> None:
    for name in ("a", "b"):
        cli("record", "--episodes", "3", "--seed", "11", "--dir", str(tmp_path / name))
    a, b = gym_recording.load(tmp_path / "a"), gym_recording.load(tmp_path / "b")
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x.observations, y.observations)
        np.testing.assert_array_equal(x.actions, y.actions)


def test_info(cli: Run, recorded: Path) -> None:
    proc = cli("info", str(recorded))
    with gym_recording.load(recorded) as rec:
        steps = sum(ep.length for ep in rec)
        returns = [ep.total_reward for ep in rec]
        arrays = sum(ep.observations.nbytes + ep.actions.nbytes + ep.rewards.nbytes for ep in rec)
    text = proc.stdout
    assert "CartPole-v1" in text
    for key, value in (("episodes", "4"), ("steps", str(steps)), ("writers", "1")):
        line = next(ln for ln in text.splitlines() if ln.startswith(key + " "))
        assert line.split()[-1] == value, line
    assert f"max {max(returns):g}" in text
    assert "Discrete(2)" in text and "Box(" in text
    assert _row(text, "arrays, read back") == f"{arrays / 1000:.1f} KB"
    assert _row(text, "rendered frames").startswith("none (record with record_render=True")
    assert proc.stderr == ""


def _row(text: str, key: str) -> str:
    """The value of ``info``'s row ``key``."""
    line = next(ln for ln in text.splitlines() if ln.startswith(key + "  "))
    return line[len(key) :].strip()


def test_info_and_verify_of_rendered_compressed_frames(cli: Run, tmp_path: Path) -> None:
    """info says which episodes hold rendered frames and their size, and how many bytes the
    arrays take read back (far more than the files: compressed); verify counts the arrays
    it decompressed."""
    pytest.importorskip("pygame")  # (CartPole's rgb_array rendering)
    out = tmp_path / "r"
    args = ["--episodes", "2", "--max-steps", "5", "--record-render", "--compression", "zstd"]
    cli("record", "CartPole-v1", *args, "--dir", str(out))
    text = cli("info", str(out)).stdout
    assert _row(text, "rendered frames") == "in 2 of 2 episodes (400x600x3)"
    with gym_recording.load(out) as rec:
        frames = sum(ep.render_frames.nbytes for ep in rec)
        arrays = frames + sum(x.nbytes for ep in rec for x in (ep.observations, ep.actions))
        arrays += sum(ep.rewards.nbytes for ep in rec)
    assert frames == 2 * 6 * 400 * 600 * 3
    assert _row(text, "arrays, read back") == f"{arrays / 1e6:.1f} MB"
    report = gym_recording.verify(out)
    assert report.ok and 0 < report.compressed <= report.arrays
    assert f"array(s) ({report.compressed} compressed), " in report.summary()
    cli("decompress", str(out), str(tmp_path / "raw"))
    raw = gym_recording.verify(tmp_path / "raw")
    assert raw.ok and raw.compressed == 0 and raw.arrays == report.arrays
    assert "compressed" not in raw.summary()


def test_the_printed_video_export_of_a_recording_in_the_current_directory_works(
    tmp_path: Path,
) -> None:
    """``record --dir .`` suggests videos beside the directory, by name (not ``.-videos``)."""
    pytest.importorskip("pygame")  # (CartPole's rgb_array rendering)
    pytest.importorskip("av")
    here = tmp_path / "run"
    here.mkdir()
    args = ["record", "--episodes", "1", "--max-steps", "3", "--record-render", "--dir", "."]
    proc = subprocess.run(
        [sys.executable, "-m", "gym_recording", *args], capture_output=True, text=True, cwd=here
    )
    assert proc.returncode == 0, proc.stderr
    (line,) = [ln for ln in proc.stdout.splitlines() if "--to mp4" in ln]
    assert f"--to mp4 {tmp_path / 'run-videos'}" in line
    command = line.split("#")[0].split()[1:]  # (after the printed gym-recording)
    done = subprocess.run(
        [sys.executable, "-m", "gym_recording", *command], capture_output=True, text=True, cwd=here
    )
    assert done.returncode == 0, done.stderr
    assert [p.name for p in (tmp_path / "run-videos").iterdir()] == ["episode-000000.mp4"]


def test_info_names_the_codec_of_compressed_arrays(cli: Run, tmp_path: Path) -> None:
    """info says which codec compressed the arrays, beside the bytes on disk; a recording of
    raw arrays gets the bytes alone, as before."""
    raw, packed = tmp_path / "raw", tmp_path / "packed"
    with gym_recording.TraceRecording(raw) as rec:  # (arrays that shrink: compressed)
        rec.add_reset(np.zeros(1000))
        rec.add_step(0, np.ones(1000), 1.0, terminated=True)
    cli("compress", str(raw), str(packed))
    size = r"\d+(\.\d)? (B|KB)"
    got = _row(cli("info", str(packed)).stdout, "bytes")
    assert re.fullmatch(size + r" \(compressed arrays: zstd\)", got), got
    got = _row(cli("info", str(raw)).stdout, "bytes")
    assert re.fullmatch(size, got), got


# --------------------------------------------------------------------------------------------
# export
# --------------------------------------------------------------------------------------------


def test_export_parquet(cli: Run, recorded: Path, tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pd = pytest.importorskip("pandas")
    out = tmp_path / "out" / "cartpole.parquet"
    proc = cli("export", str(recorded), "--to", "parquet", str(out))
    assert str(out) in proc.stdout

    table = pq.read_table(out)
    assert table.column_names == [
        "episode",
        "step",
        "seed",
        "obs",
        "action",
        "reward",
        "next_obs",
        "terminated",
        "truncated",
    ]
    assert table.schema.field("obs").type == pa.list_(pa.float32(), 4)
    with gym_recording.load(recorded) as rec:
        eps = list(rec)
    assert table.num_rows == sum(ep.length for ep in eps)
    obs = np.stack(table.column("obs").to_numpy(zero_copy_only=False))
    nxt = np.stack(table.column("next_obs").to_numpy(zero_copy_only=False))
    np.testing.assert_array_equal(obs, np.concatenate([ep.observations[:-1] for ep in eps]))
    np.testing.assert_array_equal(nxt, np.concatenate([ep.observations[1:] for ep in eps]))
    np.testing.assert_array_equal(
        table.column("action").to_numpy(), np.concatenate([ep.actions for ep in eps])
    )

    df = pd.read_parquet(out)  # pandas reads it too
    assert df.groupby("episode")["reward"].sum().tolist() == [ep.total_reward for ep in eps]
    last = df.groupby("episode").tail(1)
    assert last["terminated"].tolist() == [ep.terminated for ep in eps]
    assert df["terminated"].sum() == sum(ep.terminated for ep in eps)
    assert df.groupby("episode")["step"].max().tolist() == [ep.length - 1 for ep in eps]
    assert df.groupby("episode")["seed"].first().tolist() == [ep.seed for ep in eps] == [3, 4, 5, 6]
    meta = pq.read_schema(out).metadata[b"gym_recording"]
    assert b"CartPole-v1" in meta


def test_export_npz(cli: Run, recorded: Path, tmp_path: Path) -> None:
    out = tmp_path / "cartpole.npz"
    cli("export", str(recorded), "--to", "npz", str(out))
    data = np.load(out)  # no pickle needed
    with gym_recording.load(recorded) as rec:
        eps = list(rec)
    np.testing.assert_array_equal(
        data["observations"], np.concatenate([ep.observations for ep in eps])
    )
    np.testing.assert_array_equal(data["actions"], np.concatenate([ep.actions for ep in eps]))
    np.testing.assert_array_equal(data["rewards"], np.concatenate([ep.rewards for ep in eps]))
    assert data["episode_lengths"].tolist() == [ep.length for ep in eps]
    assert data["terminated"].tolist() == [ep.terminated for ep in eps]
    assert data["seeds"].tolist() == [3, 4, 5, 6]
    for e, ep in enumerate(eps):  # the recipe in the docstring
        s, n = data["episode_starts"][e], data["episode_lengths"][e]
        o = data["observation_starts"][e]
        np.testing.assert_array_equal(data["observations"][o : o + n + 1], ep.observations)
        np.testing.assert_array_equal(data["actions"][s : s + n], ep.actions)


def test_export_minari(cli: Run, recorded: Path, tmp_path: Path, monkeypatch: Any) -> None:
    minari = pytest.importorskip("minari")
    proc = cli("export", str(recorded), "--to", "minari", "gym-recording/cartpole-random-v0")
    where = tmp_path / "minari" / "gym-recording" / "cartpole-random-v0"
    assert str(where) in proc.stdout
    assert where.is_dir()

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    dataset = minari.load_dataset("gym-recording/cartpole-random-v0")
    with gym_recording.load(recorded) as rec:
        eps = list(rec)
    assert dataset.total_episodes == len(eps)
    assert dataset.total_steps == sum(ep.length for ep in eps)
    assert dataset.env_spec.id == "CartPole-v1"
    metas = list(dataset.storage.get_episode_metadata(dataset.episode_indices))
    for ep, got, meta in zip(eps, dataset.iterate_episodes(), metas, strict=True):
        np.testing.assert_array_equal(got.observations, ep.observations)
        assert got.observations.dtype == ep.observations.dtype
        np.testing.assert_array_equal(got.actions, ep.actions)
        np.testing.assert_array_equal(got.rewards, ep.rewards)
        assert got.terminations.tolist() == [False] * (ep.length - 1) + [ep.terminated]
        assert got.truncations.tolist() == [False] * (ep.length - 1) + [ep.truncated]
        assert meta["seed"] == ep.seed
    assert dataset.spec.dataset_id == "gym-recording/cartpole-random-v0"


def test_import_minari_round_trip(cli: Run, recorded: Path, tmp_path: Path) -> None:
    pytest.importorskip("minari")
    cli("export", str(recorded), "--to", "minari", "roundtrip/cartpole-v0")
    out = tmp_path / "imported"
    proc = cli("import-minari", "roundtrip/cartpole-v0", str(out))
    assert f"to {out}" in proc.stdout
    assert "gym-recording info" in proc.stdout
    a, b = gym_recording.load(recorded), gym_recording.load(out)
    assert len(a) == len(b) == 4
    assert b.env_id == "CartPole-v1"
    assert b.metadata["dataset_id"] == "roundtrip/cartpole-v0"
    assert b.observation_space == a.observation_space
    assert b.action_space == a.action_space
    for x, y in zip(a, b, strict=True):
        for field in ("observations", "actions", "rewards"):
            got, want = getattr(y, field), getattr(x, field)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
        assert (y.terminated, y.truncated, y.seed) == (x.terminated, x.truncated, x.seed)
    # The imported recording works with the other commands.
    info = cli("info", str(out)).stdout
    assert next(ln for ln in info.splitlines() if ln.startswith("episodes ")).split()[-1] == "4"


# --------------------------------------------------------------------------------------------
# --help and errors
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["", "record", "info", "export", "import-minari"])
def test_help(cli: Run, command: str) -> None:
    proc = cli(*([command] if command else []), "--help")
    assert proc.stdout.startswith("usage: gym-recording")
    assert proc.stderr == ""
    if command == "export":
        assert "parquet" in proc.stdout and "minari" in proc.stdout and "npz" in proc.stdout
    if command == "record":
        assert "CartPole-v1" in proc.stdout


def test_version(cli: Run) -> None:
    """The version, and whether the C step is in use (CI builds it: it must be)."""
    out = cli("--version").stdout.strip()
    assert out.startswith(f"gym-recording {gym_recording.__version__} (")
    from gym_recording.record import steps

    assert out.endswith("(C extension: step, writes, views)") == steps.ACCELERATED, out


def test_no_command_is_a_usage_error(cli: Run) -> None:
    proc = cli(expect=2)
    assert "usage:" in proc.stderr and proc.stdout == ""


def test_info_of_a_missing_directory(cli: Run, tmp_path: Path) -> None:
    proc = cli("info", str(tmp_path / "nope"), expect=1)
    assert_error(proc, str(tmp_path / "nope"))
    assert proc.stdout == ""


def test_record_an_env_whose_package_is_missing_says_what_to_install(
    cli: Run, tmp_path: Path
) -> None:
    """`record pkg:Env-v0` where pkg is not installed (ale_py:ALE/Pong-v5 without ale-py):
    the error says what to install, as a replay does (it said only that the import failed)."""
    proc = cli("record", "no_such_env_pkg:Foo-v0", "--dir", str(tmp_path / "x"), expect=2)
    assert_error(proc, "cannot make environment 'no_such_env_pkg:Foo-v0'")
    assert "install the package that provides it (`pip install no-such-env-pkg`, say)" in (
        proc.stderr
    )
    assert ".;" not in proc.stderr and not (tmp_path / "x").exists()


def test_record_unknown_env(cli: Run, tmp_path: Path) -> None:
    proc = cli("record", "NoSuchEnv-v0", "--dir", str(tmp_path / "x"), expect=2)
    assert_error(proc, "cannot make environment 'NoSuchEnv-v0'")
    assert proc.stdout == ""


def test_record_bad_episodes(cli: Run) -> None:
    assert_error(cli("record", "--episodes", "0", expect=2), "--episodes")


def test_export_unknown_format(cli: Run, recorded: Path, tmp_path: Path) -> None:
    proc = cli("export", str(recorded), "--to", "csv", str(tmp_path / "x.csv"), expect=2)
    assert "invalid choice: 'csv'" in proc.stderr
    assert not (tmp_path / "x.csv").exists()


def test_export_missing_directory(cli: Run, tmp_path: Path) -> None:
    proc = cli("export", str(tmp_path / "nope"), "--to", "npz", str(tmp_path / "x.npz"), expect=1)
    assert_error(proc, "nope")
    assert not (tmp_path / "x.npz").exists()


def test_export_directory_without_recording(cli: Run, tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")  # (parquet)
    (tmp_path / "empty").mkdir()
    for to in ("npz", "parquet"):
        proc = cli("export", str(tmp_path / "empty"), "--to", to, str(tmp_path / "x"), expect=1)
        assert_error(proc, "holds no recording")


def test_export_does_not_overwrite(cli: Run, recorded: Path, tmp_path: Path) -> None:
    out = tmp_path / "taken.parquet"
    out.write_text("mine")
    for to in ("parquet", "npz"):
        proc = cli("export", str(recorded), "--to", to, str(out), expect=1)
        assert_error(proc, "exists already")
    assert out.read_text() == "mine"


def test_export_minari_errors(cli: Run, recorded: Path) -> None:
    pytest.importorskip("minari")
    proc = cli("export", str(recorded), "--to", "minari", "no version", expect=1)
    assert_error(proc, "not a Minari dataset id")
    cli("export", str(recorded), "--to", "minari", "twice/cartpole-v0")
    proc = cli("export", str(recorded), "--to", "minari", "twice/cartpole-v0", expect=1)
    assert_error(proc, "exists already")


def test_import_minari_errors(cli: Run, recorded: Path, tmp_path: Path) -> None:
    pytest.importorskip("minari")
    proc = cli("import-minari", "missing/dataset-v0", str(tmp_path / "x"), expect=1)
    assert_error(proc, "no local Minari dataset missing/dataset-v0", "minari download")
    assert not (tmp_path / "x").exists()
    cli("export", str(recorded), "--to", "minari", "some/cartpole-v0")
    proc = cli("import-minari", "some/cartpole-v0", str(recorded), expect=1)
    assert_error(proc, "not an empty directory")


def test_record_bad_max_steps(cli: Run) -> None:
    assert_error(cli("record", "--max-steps", "0", expect=2), "--max-steps must be at least 1")


def test_record_unregistered_namespace_names_the_module_syntax(cli: Run, tmp_path: Path) -> None:
    proc = cli("record", "NoSuchSpace/Thing-v0", "--dir", str(tmp_path / "x"), expect=2)
    assert_error(proc, "ale_py:ALE/Pong-v5")
    assert "MODULE:ENV_ID" in cli("record", "--help").stdout


def test_info_and_compress_refuse_a_directory_without_recording(cli: Run, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "x.txt").write_text("not a trace")
    assert_error(cli("info", str(tmp_path / "empty"), expect=1), "holds no recording")
    for command in ("compress", "decompress"):
        out = tmp_path / f"out-{command}"
        proc = cli(command, str(tmp_path / "empty"), str(out), expect=1)
        assert_error(proc, "holds no recording")
        assert not out.exists()


_INTERRUPTING = '''
import os, signal
import gymnasium
from gymnasium.envs.classic_control import CartPoleEnv

class Interrupting(CartPoleEnv):
    """CartPole whose 100th step is interrupted, as Ctrl-C interrupts the main thread (or
    ``kill`` sends SIGTERM, with ``how="sigterm"``; which the env handles itself with
    ``how="own"``)."""

    steps = 0

    def __init__(self, how="ctrl-c", **kwargs):
        super().__init__(**kwargs)
        self.how = how
        if how == "own":  # (a simulator's server to stop, say)
            signal.signal(signal.SIGTERM, lambda *_: os._exit(7))

    def step(self, action):
        Interrupting.steps += 1
        if Interrupting.steps == 100:
            if self.how in ("sigterm", "own"):
                os.kill(os.getpid(), signal.SIGTERM)
            else:
                raise KeyboardInterrupt
        return super().step(action)

gymnasium.register("Interrupting-v0", entry_point=Interrupting, max_episode_steps=500)
gymnasium.register(
    "Terminated-v0", entry_point=Interrupting, max_episode_steps=500, kwargs={"how": "sigterm"}
)
gymnasium.register(
    "OwnHandler-v0", entry_point=Interrupting, max_episode_steps=500, kwargs={"how": "own"}
)
'''


@pytest.mark.parametrize(("env_id", "code"), [("Interrupting-v0", 130), ("Terminated-v0", 143)])
def test_record_interrupted_says_where_the_episodes_are(
    cli: Run, tmp_path: Path, env_id: str, code: int
) -> None:
    """Ctrl-C during `record` keeps what was recorded, and says where (exit code 130); so does
    SIGTERM (143: `kill`, `docker stop`), which killed it with the episodes it buffered."""
    (tmp_path / "interrupting.py").write_text(_INTERRUPTING)  # (importable: cwd is tmp_path)
    proc = cli("record", f"interrupting:{env_id}", "--episodes", "1000", expect=code)
    first, second = proc.stdout.splitlines()[:2]
    assert first.startswith("Interrupted: the episodes recorded so far are kept in ")
    directory = first.rsplit(" in ", 1)[1]
    assert second.startswith("Recorded ") and "(99 steps)" in second
    assert Path(directory).is_relative_to(tmp_path)
    info = cli("info", directory).stdout  # (as printed)
    assert f"gym-recording info {directory}" in proc.stdout and "steps" in info
    cli("verify", directory)
    with gym_recording.load(directory) as rec:
        assert sum(ep.length for ep in rec) == 99


def test_record_leaves_sigterm_to_an_env_that_handles_it(cli: Run, tmp_path: Path) -> None:
    """An env that set its own SIGTERM handler (made before the run) keeps it: record took
    SIGTERM over for the whole run, and the env's handler never ran."""
    (tmp_path / "interrupting.py").write_text(_INTERRUPTING)
    cli("record", "interrupting:OwnHandler-v0", "--episodes", "1000", expect=7)


# A command stopped at a known point: the signal is sent from inside the write the point is
# (the real write, wrapped in the test's own process: a `kill` from outside would come at any
# moment, and a short command might have ended by then).
_SIGNAL_AT = """
import os, signal, sys
from gym_recording.tools.cli import main

def stop_at(owner, name, call):
    real, calls = getattr(owner, name), []
    def wrapped(*args, **kwargs):
        calls.append(1)
        if len(calls) == call:
            os.kill(os.getpid(), getattr(signal, os.environ["STOP_WITH"]))
        return real(*args, **kwargs)
    setattr(owner, name, wrapped)

if sys.argv[1] == "export":  # (as the rows are written)
    import pyarrow.parquet
    stop_at(pyarrow.parquet.ParquetWriter, "write_table", 1)
else:  # (as the copy's third file is written: its second batch)
    from gym_recording.storage.local import LocalStorage
    stop_at(LocalStorage, "write_atomic", 3)
sys.exit(main(sys.argv[1:]))
"""


def _stopped(tmp_path: Path, how: str, *args: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "signal_at.py"
    script.write_text(_SIGNAL_AT)
    env = {**os.environ, "STOP_WITH": how, "PYTHONWARNINGS": "ignore"}
    return subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, env=env, timeout=300
    )


@pytest.mark.parametrize(("how", "code"), [("SIGINT", 130), ("SIGTERM", 143)])
@pytest.mark.parametrize("out_exists", [False, True])
def test_compress_stopped_leaves_no_copy(
    tmp_path: Path, how: str, code: int, out_exists: bool
) -> None:
    """compress stopped by Ctrl-C or SIGTERM removes the copy it began (its manifests come
    last: a reader never sees a part of it), says so in one line, and a second run makes it.
    Before, SIGTERM killed it, and Ctrl-C left the writers copied so far, which verify
    passed, without a word; a second run was then refused."""
    src, out = tmp_path / "rec", tmp_path / "copy"
    with gym_recording.TraceRecording(src, batch_bytes=8_000) as rec:
        for _ in range(8):
            rec.add_reset(np.zeros(1000, np.uint8))
            for t in range(4):
                rec.add_step(0, np.full(1000, t, np.uint8), 1.0, terminated=t == 3)
    assert len(list(src.glob("*.ep*.json"))) >= 3
    if out_exists:  # (a directory of the user's own: it and its file stay)
        out.mkdir()
        (out / "notes.txt").write_text("mine")
    proc = _stopped(tmp_path, how, "compress", str(src), str(out))
    assert proc.returncode == code, proc.stderr
    said = "Ctrl-C" if code == 130 else how
    assert proc.stderr == f"gym-recording: error: interrupted ({said})\n"
    if out_exists:
        assert [p.name for p in out.iterdir()] == ["notes.txt"]
    else:
        assert not out.exists()
    make_runner(tmp_path)("compress", str(src), str(out))
    with gym_recording.load(src) as a, gym_recording.load(out) as b:
        assert len(a) == len(b) == 8


def test_export_stopped_by_sigterm_leaves_no_file(cli: Run, recorded: Path, tmp_path: Path) -> None:
    """export stopped by SIGTERM (kill, docker stop) removes its temporary file, as Ctrl-C
    does, and exits 143 with one line; it was killed, leaving a .gymrec-tmp-* beside OUT."""
    pytest.importorskip("pyarrow")
    out = tmp_path / "exports" / "data.parquet"
    proc = _stopped(tmp_path, "SIGTERM", "export", str(recorded), "--to", "parquet", str(out))
    assert proc.returncode == 143, proc.stderr
    assert proc.stderr == "gym-recording: error: interrupted (SIGTERM)\n"
    assert list(out.parent.iterdir()) == []


def test_view_stopped_by_sigterm_stops_serving_and_exits_0(recorded: Path, tmp_path: Path) -> None:
    """`view` stopped by SIGTERM (docker stop) ends as a Ctrl-C ends it: serving stops, exit 0,
    nothing said (it was killed by the signal; then a first version of SIGTERM for every
    command made it exit 0 or 143 by when the signal came)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gym_recording", "view", str(recorded), "--no-browser"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith("http://")
        proc.send_signal(signal.SIGTERM)  # (once the URL is printed: at any point after)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert (proc.returncode, out, err) == (0, "", "")


def test_record_refuses_a_negative_seed_and_a_level_without_compression(cli: Run) -> None:
    assert_error(cli("record", "--seed", "-1", expect=2), "--seed must be 0 or more")
    proc = cli("record", "--compression-level", "5", expect=2)
    assert_error(proc, "--compression-level needs --compression zstd")


def test_record_into_a_file_is_a_problem_not_bad_usage(cli: Run, tmp_path: Path) -> None:
    """--dir naming a regular file exits 1 (an I/O problem, not 2, bad usage)
    with one error line naming the path and saying it is not a directory; the file stays."""
    path = tmp_path / "a-file"
    path.write_text("x")
    for where in (path, path / "run"):
        proc = cli("record", "--episodes", "1", "--dir", str(where), expect=1)
        assert_error(proc, f"directory {str(where)!r}: ", "exists and is not a directory")
        assert len(proc.stderr.splitlines()) == 1 and proc.stdout == ""
    assert path.read_text() == "x"


def test_view_refuses_a_port_that_is_not_a_number(cli: Run, recorded: Path) -> None:
    proc = cli("view", str(recorded), "--port", "abc", "--no-browser", expect=2)
    assert "expected a port number from 0 to 65535, got 'abc'" in proc.stderr


def test_export_where_it_cannot_write_is_an_error_line(
    cli: Run, recorded: Path, tmp_path: Path
) -> None:
    pytest.importorskip("pyarrow")  # (parquet; mp4's error comes before PyAV is imported)
    (tmp_path / "a-file").write_text("x")
    for to in ("npz", "parquet", "mp4"):
        out = str(tmp_path / "a-file" / f"out.{to}")
        proc = cli("export", str(recorded), "--to", to, out, expect=1)
        assert_error(proc, f"for {out}: a file of that name is in the way")
    assert_error(cli("export", str(recorded), "--to", "npz", "", expect=2), "empty string")


def test_warnings_are_one_line_without_source(tmp_path: Path) -> None:
    """A warning on the command line reads as its errors do: no file, line or code. A
    directory that holds no recording is said once, as the error it is there."""
    with gym_recording.TraceRecording(tmp_path / "rec") as rec:
        rec.add_reset(np.zeros(2), options={"level": 3})
    (tmp_path / "runs" / "run1").mkdir(parents=True)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "gym_recording", *args],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONWARNINGS": "default"},
            timeout=120,
            check=False,
        )

    proc = run("export", str(tmp_path / "rec"), "--to", "npz", str(tmp_path / "out.npz"))
    assert proc.returncode == 0
    (warning,) = proc.stderr.splitlines()
    assert warning.startswith("gym-recording: warning: ") and "reset options" in warning
    runs = str(tmp_path / "runs")
    for args in (["info", runs], ["export", runs, "--to", "npz", str(tmp_path / "o.npz")]):
        proc = run(*args)
        assert proc.returncode == 1
        (error,) = proc.stderr.splitlines()
        assert error.startswith("gym-recording: error: ") and "(run1)" in error
        assert ".py" not in proc.stderr


def test_printed_commands_work_for_a_directory_starting_with_a_dash(
    cli: Run, tmp_path: Path
) -> None:
    proc = cli("record", "--episodes", "2", "--dir=-run1")
    assert "gym-recording info ./-run1" in proc.stdout
    cli("info", "./-run1")


def test_commands_that_print_paths_print_any_path_on_a_stdout_of_any_encoding(
    tmp_path: Path,
) -> None:
    """record, export, compress, decompress on an ASCII stdout and a path it cannot encode:
    the path is printed escaped (each crashed with a UnicodeEncodeError, after writing)."""
    env = {**os.environ, "PYTHONIOENCODING": "ascii", "PYTHONWARNINGS": "ignore"}

    def run(*args: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-m", "gym_recording", *args],
            capture_output=True,
            text=True,
            errors="replace",
            env=env,
            cwd=tmp_path,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        return proc.stdout

    assert "to caf\\xe9" in run("record", "--episodes", "1", "--dir", "caf\u00e9")
    assert "to caf\\xe9.npz" in run("export", "--to", "npz", "caf\u00e9", "caf\u00e9.npz")
    assert "Copied caf\\xe9 to caf\\xe9-z" in run("compress", "caf\u00e9", "caf\u00e9-z")
    assert "caf\\xe9-d" in run("decompress", "caf\u00e9-z", "caf\u00e9-d")


def test_a_directory_of_two_envs_says_so(cli: Run, tmp_path: Path) -> None:
    """`info` names every env a directory holds; Minari, which holds one env a dataset,
    refuses it saying which writers differ."""
    mixed = str(tmp_path / "mixed")
    cli("record", "CartPole-v1", "--episodes", "1", "--dir", mixed)
    proc = cli("record", "Acrobot-v1", "--episodes", "1", "--dir", mixed, "--max-steps", "5")
    assert "Recorded 1 episode (5 steps)" in proc.stdout
    assert "It also holds 1 episode of other runs, recorded earlier." in proc.stdout
    assert "also holds episodes of CartPole-v1: exports need one env" in proc.stderr
    info = cli("info", mixed).stdout
    assert "CartPole-v1, Acrobot-v1" in info
    assert "the writers record different spaces" in info
    pytest.importorskip("minari")
    proc = cli("export", mixed, "--to", "minari", "mixed/envs-v0", expect=1)
    assert_error(proc, "whose env_id differs", '"CartPole-v1"', '"Acrobot-v1"')


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE and SIGXFSZ as Linux has them")
@pytest.mark.parametrize("to", ["npz", "parquet"])
def test_an_export_the_disk_cannot_take_names_its_output(
    recorded: Path, tmp_path: Path, to: str
) -> None:
    """A write that fails with no file named (a full disk; here a file-size limit) is
    the output's, named in one line."""
    import resource
    import signal

    if to == "parquet":
        pytest.importorskip("pyarrow")

    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # (the write fails: EFBIG)
        resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))

    out = tmp_path / f"out.{to}"
    proc = subprocess.run(
        [sys.executable, "-m", "gym_recording", "export", str(recorded), "--to", to, str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=limited,
    )
    assert proc.returncode == 1, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"gym-recording: error: cannot write {out}: "), line
    assert not out.exists() and not list(tmp_path.glob(".gymrec-tmp-*"))


def test_recording_again_an_env_named_with_its_module_gives_no_warning(
    cli: Run, tmp_path: Path
) -> None:
    """MODULE:ENV_ID records the env id alone: a second run is no other env."""
    same = str(tmp_path / "same")
    for _ in range(2):
        proc = cli("record", "gymnasium:CartPole-v1", "--episodes", "1", "--dir", same)
        assert "also holds episodes of" not in proc.stderr


def test_info_sums_up_the_episodes_before_a_damaged_file(cli: Run, tmp_path: Path) -> None:
    """A damaged batch: `info` shows what it read before it, names the file, points to
    `verify`, and exits 1; `verify` says its reader stopped there."""
    with gym_recording.TraceRecording(tmp_path / "rec", batch_bytes=1) as rec:
        for seed in range(3):  # (one batch an episode)
            rec.add_reset(np.zeros(2), seed=seed)
            rec.add_step(0, np.ones(2), 1.0, terminated=True)
    blob = sorted((tmp_path / "rec").glob("*.ep000000001.bin"))[0]
    blob.write_bytes(blob.read_bytes()[:10])
    proc = cli("info", str(tmp_path / "rec"), expect=1)
    assert "episodes                      3" in proc.stdout
    assert "episode length                mean 1.0" in proc.stdout
    assert_error(proc, "read 1 of 3 episodes", blob.name, "verify")
    proc = cli("verify", str(tmp_path / "rec"), expect=1)
    assert "1 episode(s) read before the reader stopped at a problem" in proc.stdout


def test_record_refuses_a_memory_dir(cli: Run) -> None:
    """--dir memory://... is bad usage (exit 2), said in one line with what to use instead:
    fsspec's memory filesystem is gone when `record` exits, so the info, verify and load
    commands it printed could never find the recording."""
    for where in ("memory://b/r", "MEMORY://b/r", "simplecache::memory://b/r"):
        proc = cli("record", "--episodes", "1", "--dir", where, expect=2)
        assert_error(proc, f"--dir {where} ", "only in this process", "local directory", "s3://")
        assert len(proc.stderr.splitlines()) == 1 and proc.stdout == ""


def test_copies_and_imports_refuse_a_memory_output(cli: Run, recorded: Path) -> None:
    """compress, decompress and import-minari into memory://... are bad usage (exit 2), as
    record's --dir is: the copy would be gone when the command exits (it said "Copied")."""
    for command in ("compress", "decompress"):
        proc = cli(command, str(recorded), "memory://x", expect=2)
        assert_error(proc, "OUT memory://x ", f"gone when `{command}` exits", "s3://")
    proc = cli("import-minari", "tests/any-v0", "memory://x", expect=2)
    assert_error(proc, "OUT_DIR memory://x ", "gone when `import-minari` exits")


def test_empty_paths_are_named_as_empty(cli: Run, recorded: Path, tmp_path: Path) -> None:
    """An empty OUT, --dir or directory to view is said to be empty, in one line (view served
    the current directory; compress said the recording was "apart from" nothing)."""
    for args, said in (
        (("compress", str(recorded), ""), "expected OUT to name the copy's directory"),
        (("decompress", "", str(tmp_path / "x")), "expected DIR to name a recording directory"),
        (("import-minari", "tests/any-v0", ""), "expected OUT_DIR to name the recording's"),
        (("record", "--dir", ""), "expected --dir to name the recording's directory"),
        (("view", "", "--no-browser"), "expected DIR to name a recording directory"),
        (("verify", ""), "expected DIR to name a recording directory"),
        (("info", ""), "expected DIR to name a recording directory"),
        (("export", "", "--to", "npz", str(tmp_path / "x.npz")), "expected DIR to name a"),
    ):
        proc = cli(*args, expect=2)
        assert_error(proc, said, "got an empty string")
        assert len(proc.stderr.splitlines()) == 1


def test_record_of_an_env_that_fails_says_so_in_a_line_and_keeps_the_episodes_before(
    cli: Run, tmp_path: Path
) -> None:
    """The env's own error in its third episode was a traceback; a reward the recording
    refuses was an unprefixed log line (Python's last-resort handler) before the error."""
    (tmp_path / "badenv.py").write_text(
        "import gymnasium, numpy as np\n"
        "class Bad(gymnasium.Env):\n"
        "    observation_space = gymnasium.spaces.Box(-9, 9, (1,), np.float32)\n"
        "    action_space = gymnasium.spaces.Discrete(2)\n"
        "    def __init__(self, kind):\n"
        "        self.kind, self.ep = kind, -1\n"
        "    def reset(self, *, seed=None, options=None):\n"
        "        super().reset(seed=seed)\n"
        "        self.t, self.ep = 0, self.ep + 1\n"
        "        return np.zeros(1, np.float32), {}\n"
        "    def step(self, a):\n"
        "        self.t += 1\n"
        "        if self.ep == 2 and self.t == 2:\n"
        "            if self.kind == 'reward':\n"
        "                return np.zeros(1, np.float32), 'oops', False, False, {}\n"
        "            raise RuntimeError('simulator exploded')\n"
        "        return np.full(1, self.t, np.float32), 1.0, self.t >= 3, False, {}\n"
        "for kind in ('reward', 'raise'):\n"
        "    gymnasium.register(f'Bad{kind}-v0', entry_point=Bad, kwargs={'kind': kind},\n"
        "                       disable_env_checker=True)\n"
    )
    for kind, said in (
        ("raise", ["error: badenv:Badraise-v0 raised RuntimeError: simulator exploded"]),
        ("reward", ["warning: a value was refused", "error: expected the reward"]),
    ):
        out = tmp_path / kind
        proc = cli("record", f"badenv:Bad{kind}-v0", "--episodes", "5", "--dir", str(out), expect=1)
        lines = proc.stderr.splitlines()
        assert len(lines) == len(said), proc.stderr
        for line, start in zip(lines, said, strict=True):
            assert line.startswith(f"gym-recording: {start}"), proc.stderr
        with gym_recording.load(out) as rec:
            assert [ep.length for ep in rec] == [3, 3, 1]


def _env_module(path: Path, env_id: str, reset: str, render: str) -> None:
    """A module registering ``env_id``: an env of RGB frames whose reset and render run the
    code given (importable by ``record MODULE:ENV_ID``: the runner's cwd is its folder)."""
    path.write_text(
        "import gymnasium, numpy as np\n"
        "class E(gymnasium.Env):\n"
        "    metadata = {'render_modes': ['rgb_array']}\n"
        "    observation_space = gymnasium.spaces.Box(0, 1, (2,))\n"
        "    action_space = gymnasium.spaces.Discrete(2)\n"
        "    def __init__(self, render_mode=None):\n"
        "        self.render_mode = render_mode\n"
        "    def reset(self, *, seed=None, options=None):\n"
        f"        {reset}\n"
        "    def render(self):\n"
        f"        {render}\n"
        f"gymnasium.register({env_id!r}, entry_point=E)\n"
    )


def test_record_of_an_env_that_changes_directory_reads_back_its_own_run(
    cli: Run, tmp_path: Path
) -> None:
    """An env whose reset changes the working directory, recorded into a relative --dir:
    the run is written where --dir was, and record reads it back from there (it read the
    relative path from the env's directory, called its own run damaged, and exited 1)."""
    (tmp_path / "away").mkdir()
    (tmp_path / "chdir_env.py").write_text(
        "import os, gymnasium\n"
        "class E(gymnasium.Env):\n"
        "    observation_space = gymnasium.spaces.Discrete(3)\n"
        "    action_space = gymnasium.spaces.Discrete(2)\n"
        "    def reset(self, *, seed=None, options=None):\n"
        "        super().reset(seed=seed)\n"
        f"        os.chdir({str(tmp_path / 'away')!r})\n"
        "        return 0, {}\n"
        "    def step(self, action):\n"
        "        return 1, 1.0, True, False, {}\n"
        "gymnasium.register('ChdirEnv-v0', entry_point=E)\n"
    )
    proc = cli("record", "chdir_env:ChdirEnv-v0", "--episodes", "2", "--dir", "rel")
    assert "Recorded 2 episodes (2 steps) of chdir_env:ChdirEnv-v0 to rel" in proc.stdout
    assert proc.stderr == "" and not (tmp_path / "away" / "rel").exists()
    assert len(gym_recording.load(tmp_path / "rel")) == 2


def test_record_render_of_an_env_that_cannot_render_says_why_and_writes_nothing(
    cli: Run, tmp_path: Path
) -> None:
    """--record-render of an env whose render() fails (Gymnasium's own envs without pygame)
    is one line naming the env and its error, before any directory is made (it was a
    traceback, and an empty directory left behind)."""
    _env_module(
        tmp_path / "norender.py",
        "NoRender-v0",
        "super().reset(seed=seed)\n        return np.zeros(2, np.float32), {}",
        "raise gymnasium.error.DependencyNotInstalled('pygame is not installed')",
    )
    out = tmp_path / "r"
    proc = cli("record", "norender:NoRender-v0", "--record-render", "--dir", str(out), expect=2)
    assert_error(proc, "cannot render 'norender:NoRender-v0'", "pygame is not installed")
    assert len(proc.stderr.splitlines()) == 1 and not out.exists()


def test_record_render_of_an_env_whose_reset_fails_says_the_resets_error(
    cli: Run, tmp_path: Path
) -> None:
    """The render probe does not take a failing reset for rendering's: the error is the
    reset's, as without --record-render."""
    _env_module(
        tmp_path / "badreset.py",
        "BadReset-v0",
        "raise FileNotFoundError('level file levels/1.txt is missing')",
        "return None",
    )
    plain = cli("record", "badreset:BadReset-v0", "--dir", str(tmp_path / "a"), expect=1)
    render = cli(
        "record", "badreset:BadReset-v0", "--record-render", "--dir", str(tmp_path / "b"), expect=1
    )
    assert "level file levels/1.txt is missing" in plain.stderr
    assert render.stderr.replace(str(tmp_path / "b"), "") == plain.stderr.replace(
        str(tmp_path / "a"), ""
    )


def test_a_level_out_of_range_names_the_flag(cli: Run, recorded: Path, tmp_path: Path) -> None:
    """compress takes --compression-level, as record does, and --level still; a level out of
    range names the flag as given, not the Python parameter, and exits 2 writing nothing."""
    for flag in ("--compression-level", "--level"):
        out = tmp_path / f"out{flag}"
        proc = cli("compress", str(recorded), str(out), flag, "30", expect=2)
        assert_error(proc, f"expected {flag} to be zstd's level, an int from 1 to 22, got 30")
        assert "compression_level" not in proc.stderr and not out.exists()
        cli("compress", str(recorded), str(out), flag, "9")
        assert gym_recording.verify(out).ok
    where = tmp_path / "rec"
    args = ("--compression", "zstd", "--compression-level", "0", "--dir", str(where))
    proc = cli("record", *args, expect=2)
    assert_error(
        proc, "expected --compression-level to be zstd's level, an int from 1 to 22, got 0"
    )
    assert "compression_level" not in proc.stderr and not where.exists()


def test_verify_help_says_which_temporary_files_clean_removes(cli: Run) -> None:
    from gym_recording.tools.verify import CLEAN_MIN_AGE

    text = " ".join(cli("verify", "--help").stdout.split())
    assert f"unmodified for {CLEAN_MIN_AGE:.0f} s or more" in text


def test_info_says_spaces_that_are_not_recorded(cli: Run, tmp_path: Path) -> None:
    """A recording without spaces (as the original format's) says "(not recorded)" for them,
    as for its env, not "None"."""
    with gym_recording.TraceRecording(tmp_path / "d") as rec:
        rec.add_reset(np.zeros(2))
        rec.add_step(0, np.ones(2), 1.0, terminated=True)
    text = cli("info", str(tmp_path / "d")).stdout
    for key in ("env", "observation space", "action space"):
        assert _row(text, key) == "(not recorded)", text


def test_info_does_not_call_version_1_episodes_cut(cli: Run, tmp_path: Path) -> None:
    """The original format did not record how an episode ended: its episodes are counted
    apart, not as cut by a reset or a close (a recording of this writer beside them is)."""
    original = Path(__file__).parent / "data" / "compat" / "cartpole"
    text = cli("info", str(original)).stdout
    want = "0 / 0 / 0 (and 12 of format 1, which did not record how they ended)"
    assert _row(text, "terminated / truncated / cut") == want, text
    shutil.copytree(original, tmp_path / "d")
    with gym_recording.TraceRecording(tmp_path / "d") as rec:
        rec.add_reset(np.zeros(2))
        rec.add_reset(np.zeros(2))  # (cut by the next reset)
        rec.add_step(0, np.ones(2), 1.0, terminated=True)
    text = cli("info", str(tmp_path / "d")).stdout
    want = "1 / 0 / 1 (and 12 of format 1, which did not record how they ended)"
    assert _row(text, "terminated / truncated / cut") == want, text


def test_pure_python_is_forced_by_1_true_or_yes_only(tmp_path: Path) -> None:
    """GYM_RECORDING_PURE_PYTHON=1, true or yes (any case) forces the pure-Python path;
    0, false, no or empty leave the path as without the variable."""

    def version(value: str | None) -> str:
        env = {k: v for k, v in os.environ.items() if k != "GYM_RECORDING_PURE_PYTHON"}
        if value is not None:
            env["GYM_RECORDING_PURE_PYTHON"] = value
        command = [sys.executable, "-m", "gym_recording", "--version"]
        run = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path)
        assert run.returncode == 0, run.stderr
        return run.stdout

    unset = version(None)
    for value in ("0", "false", "No", ""):
        assert version(value) == unset, value
    for value in ("1", "TRUE", "yes"):
        assert "(pure Python: GYM_RECORDING_PURE_PYTHON is set)" in version(value), value


def test_info_counts_the_arrays_inside_per_step_values(cli: Run, tmp_path: Path) -> None:
    """Observations whose shape changes are stored step by step (a list); their arrays are
    counted as read back (they were left out: "48 B" for 32 KB)."""
    with gym_recording.TraceRecording(tmp_path / "r") as rec:
        rec.add_reset({"a": np.zeros(1000)})
        rec.add_step(0, {"a": np.zeros(2000)}, 1.0, terminated=True)
    with gym_recording.load(tmp_path / "r") as loaded:
        assert isinstance(loaded[0].observations, list)
    text = cli("info", str(tmp_path / "r")).stdout
    assert _row(text, "arrays, read back") == f"{(3000 * 8 + 8 + 8) / 1000:.1f} KB"


def test_info_counts_only_the_files_the_format_names(cli: Run, tmp_path: Path) -> None:
    """The bytes of a recording are those of its manifests, batches and blobs (FORMAT.md §1):
    an editor's backup of a manifest (``*.json~``) or another file whose name only starts as
    a trace file's is not counted (it was: "bytes" grew by the backup's size)."""
    d = tmp_path / "r"
    with gym_recording.TraceRecording(d) as rec:
        rec.add_reset(np.zeros(2))
        rec.add_step(0, np.ones(2), 1.0, terminated=True)
    on_disk = sum(p.stat().st_size for p in d.iterdir())
    manifest = next(d.glob("*.manifest.json"))
    batch = next(d.glob("*.ep000000000.json"))
    (d / (manifest.name + "~")).write_bytes(manifest.read_bytes() + b" " * 50_000)
    (d / (batch.name + "~")).write_bytes(b" " * 50_000)
    (d / (batch.name[: -len(".json")] + ".bin.bak")).write_bytes(b"\0" * 50_000)
    text = cli("info", str(d)).stdout
    assert _row(text, "bytes") == f"{on_disk / 1000:.1f} KB", text


def test_info_escapes_the_control_characters_a_recording_holds(cli: Run, tmp_path: Path) -> None:
    """A recording's strings are printed with control characters escaped: its env id could
    clear the terminal, set its title, write the clipboard, or fake a line of output."""
    esc = "\x1b]0;title\x07\x1b[2J\rall files OK\nverify: OK\u202e"
    with gym_recording.TraceRecording(tmp_path / "rec", env_id=esc, metadata={"m": esc}) as rec:
        rec.add_reset(np.zeros(2))
        rec.add_step(0, np.ones(2), 1.0, terminated=True)
    proc = cli("info", str(tmp_path / "rec"))
    assert not set("\x1b\x07\r\u202e") & set(proc.stdout)
    assert "verify: OK" not in proc.stdout.splitlines()
    assert (
        _row(proc.stdout, "env") == "\\x1b]0;title\\x07\\x1b[2J\\rall files OK\\nverify: OK\\u202e"
    )
