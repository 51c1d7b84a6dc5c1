"""The command line through its real entry point, ``python -m gym_recording``.

record, info, export (read back by pyarrow/pandas, numpy and Minari), import-minari, ``--help``
on each command, and errors on stderr with non-zero exit codes. Every file goes to tmp_path
(``TMPDIR`` and ``MINARI_DATASETS_PATH`` point there). ``verify`` and ``view`` are tested by
their own suites.
"""

from __future__ import annotations

import os
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
    text = proc.stdout
    assert "CartPole-v1" in text
    for key, value in (("episodes", "4"), ("steps", str(steps)), ("writers", "1")):
        line = next(ln for ln in text.splitlines() if ln.startswith(key + " "))
        assert line.split()[-1] == value, line
    assert f"max {max(returns):g}" in text
    assert "Discrete(2)" in text and "Box(" in text
    assert proc.stderr == ""


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
