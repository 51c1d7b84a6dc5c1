"""``gym_recording.ray.read_traces`` on a local Ray instance: counts and sums equal the reader's.

Ray starts once for the module (``num_cpus=2``). Totals are summed from ``iter_batches`` rather
than ``Dataset.sum``, whose aggregation starts extra actors and would only slow the tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

import gym_recording
from gym_recording import TraceRecording
from gym_recording.ray import read_traces
from gym_recording.wrappers import TraceRecordingWrapper

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.*")


@pytest.fixture(scope="module", autouse=True)
def ray_instance() -> Iterator[None]:
    # Skipped at setup, not at import, so that CI (GYM_RECORDING_REQUIRE_ALL=1) fails instead.
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    try:
        yield
    finally:
        ray.shutdown()


def record_cartpole(directory: str, seeds: list[int], **kwargs: Any) -> None:
    """One writer per seed; long episodes split in parts by a small batch size."""
    for seed in seeds:
        env = TraceRecordingWrapper(
            gymnasium.make("CartPole-v1", max_episode_steps=60),
            directory,
            batch_bytes=700,
            **kwargs,
        )
        rng = np.random.default_rng(seed)
        env.reset(seed=seed)
        for _ in range(150):
            *_, terminated, truncated, _ = env.step(int(rng.integers(2)))
            if terminated or truncated:
                env.reset()
        env.close()


def totals(ds: Any, column: str) -> tuple[int, float, list[Any]]:
    """Row count, column sum, and the batches, read through iter_batches."""
    batches = list(ds.iter_batches(batch_size=None, batch_format="numpy"))
    n = sum(len(b[column]) for b in batches)
    return n, float(sum(np.sum(b[column], dtype=np.float64) for b in batches)), batches


@pytest.fixture(scope="module")
def cartpole_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    d = tmp_path_factory.mktemp("cartpole")
    record_cartpole(str(d), [1, 2, 3])
    # and a writer still inside a long episode: its parts so far are on disk, the episode is not
    # finished, so readers (and read_traces) must not count it yet
    rec = TraceRecording(str(d), batch_bytes=200)
    rec.add_reset(np.zeros(4, np.float32))
    for i in range(30):
        rec.add_step(0, np.full(4, i, np.float32), 1.0)
    assert rec.batches and rec.batches[-1].get("continues")
    yield d
    rec.close()


def test_episode_rows_match_reader(cartpole_dir: Path) -> None:
    """per='episode': one row per episode, with the reader's lengths, returns and arrays."""
    with gym_recording.load(cartpole_dir) as rec:
        episodes = list(rec)
        batch_files = sum(len(m.batches) for m in rec.writers)
    n, total, batches = totals(read_traces(cartpole_dir), "total_reward")
    assert n == len(episodes) and n >= 6
    assert total == pytest.approx(sum(ep.total_reward for ep in episodes))
    rows = {int(i): (b, k) for b in batches for k, i in enumerate(b["episode"])}
    assert sorted(rows) == list(range(len(episodes)))
    # one read task (one output block) per batch file in which an episode starts
    assert len(rec.writers) < len(batches) <= batch_files
    for ep in episodes:
        b, k = rows[ep.index]
        assert b["writer"][k] == ep.writer and int(b["length"][k]) == ep.length
        assert (bool(b["terminated"][k]), bool(b["truncated"][k])) == (ep.terminated, ep.truncated)
        np.testing.assert_array_equal(b["observations"][k], ep.observations)
        np.testing.assert_array_equal(b["actions"][k], ep.actions)
        np.testing.assert_array_equal(b["rewards"][k], ep.rewards)


def test_step_rows_match_reader(cartpole_dir: Path) -> None:
    """per='step': one row per step, obs/next_obs as tensor columns, done flags on last steps."""
    with gym_recording.load(cartpole_dir) as rec:
        episodes = list(rec)
    ds = read_traces(str(cartpole_dir), per="step")
    n, total, batches = totals(ds, "reward")
    assert n == sum(ep.length for ep in episodes)
    assert total == pytest.approx(sum(ep.total_reward for ep in episodes))
    assert sum(int(np.sum(b["terminated"])) for b in batches) == sum(
        ep.terminated for ep in episodes
    )
    by_episode = {
        int(b["episode"][0]): b for b in batches if len(b["episode"])
    }  # a block holds whole episodes
    ep = max(episodes, key=lambda e: e.length)
    b = by_episode.get(ep.index)
    if b is None:  # not the first episode of its block
        b = next(b for b in batches if ep.index in set(b["episode"].tolist()))
    sel = b["episode"] == ep.index
    assert b["step"][sel].tolist() == list(range(ep.length))
    np.testing.assert_array_equal(b["obs"][sel], ep.observations[:-1])
    np.testing.assert_array_equal(b["next_obs"][sel], ep.observations[1:])
    np.testing.assert_array_equal(b["action"][sel], ep.actions)
    assert "obs" in ds.schema().names and "next_obs" in ds.schema().names


def test_dict_observations_become_leaf_columns(tmp_path: Path) -> None:
    """Dict observations are one tensor column per key, in both row kinds."""
    space = spaces.Dict({"img": spaces.Box(0, 255, (3, 2), np.uint8), "t": spaces.Discrete(50)})
    rec = TraceRecording(str(tmp_path), observation_space=space)
    for e in range(3):
        rec.add_reset({"img": np.full((3, 2), e, np.uint8), "t": 0})
        for t in range(1, 4 + e):
            rec.add_step(t % 2, {"img": np.full((3, 2), t, np.uint8), "t": t}, 0.5)
    rec.close()
    rows = read_traces(tmp_path).take_all()
    assert sorted(r["length"] for r in rows) == [3, 4, 5]
    r = min(rows, key=lambda r: r["episode"])
    assert r["observations.img"].shape == (4, 3, 2) and r["observations.img"].dtype == np.uint8
    assert r["observations.t"].tolist() == [0, 1, 2, 3]
    steps = read_traces(tmp_path, per="step")
    n, total, batches = totals(steps, "reward")
    assert (n, total) == (12, 6.0)
    assert batches[0]["obs.img"].shape[1:] == (3, 2)
    assert "next_obs.t" in batches[0]


def test_read_traces_over_s3(tmp_path: Path) -> None:
    """read_traces reads an s3:// recording (moto server) with storage_options in the workers."""
    from _moto_s3 import moto_s3

    with moto_s3() as s3:
        url = f"s3://{s3.new_bucket()}/ray"
        record_cartpole(url, [4, 5], storage_options=s3.storage_options)
        with gym_recording.load(url, storage_options=s3.storage_options) as rec:
            want = (len(rec), sum(ep.total_reward for ep in rec))
        n, total, _ = totals(read_traces(url, storage_options=s3.storage_options), "total_reward")
        assert (n, total) == want


def test_per_must_be_episode_or_step(tmp_path: Path) -> None:
    """An unknown per= is refused before Ray is touched."""
    with pytest.raises(ValueError, match="'episode' or 'step'"):
        read_traces(tmp_path, per="transition")  # type: ignore[arg-type]


def test_compressed_recording_reads_the_same(cartpole_dir: Path, tmp_path: Path) -> None:
    """A compressed copy (FORMAT.md §6.2) gives the same rows, array for array."""
    from gym_recording.tools.recode import recode

    z = tmp_path / "z"
    recode(cartpole_dir, z, compression="zstd", compression_level=19)
    with gym_recording.load(z) as rec:
        episodes = list(rec)
    n, total, batches = totals(read_traces(z), "total_reward")
    assert n == len(episodes) and total == pytest.approx(sum(e.total_reward for e in episodes))
    rows = {int(i): (b, k) for b in batches for k, i in enumerate(b["episode"])}
    for ep in episodes:
        b, k = rows[ep.index]
        np.testing.assert_array_equal(b["observations"][k], ep.observations)
        np.testing.assert_array_equal(b["actions"][k], ep.actions)


def test_text_observations_are_their_text_per_episode_too(tmp_path: Path) -> None:
    """per='episode' holds each episode's text observations as text (not their repr), as
    per='step' does."""
    with TraceRecording(tmp_path) as rec:
        rec.add_reset("hello")
        rec.add_step("go", "world", 1.0, terminated=True)
    (batch,) = read_traces(tmp_path).iter_batches(batch_size=None, batch_format="numpy")
    assert list(batch["observations"][0]) == ["hello", "world"]
    assert list(batch["actions"][0]) == ["go"]


def test_values_arrow_cannot_hold_are_their_repr(tmp_path: Path) -> None:
    """An int past 64 bits among an episode's observations: its repr, per episode and per
    step alike, not an error."""
    with TraceRecording(tmp_path) as rec:
        rec.add_reset(1)
        rec.add_step(0, 2**70, 1.0)
        rec.add_step(0, 3, 1.0, terminated=True)
    (batch,) = read_traces(tmp_path).iter_batches(batch_size=None, batch_format="numpy")
    assert list(batch["observations"][0]) == ["1", str(2**70), "3"]


def test_seeds_past_int64_are_null_per_episode(tmp_path: Path) -> None:
    """A seed may be any non-negative int; the int64 column holds null where it cannot (as
    the parquet export does), and load() gives the seed."""
    with TraceRecording(tmp_path) as rec:
        for seed in (2**64 + 5, 7):
            rec.add_reset(np.zeros(2), seed=seed)
            rec.add_step(0, np.ones(2), 1.0, terminated=True)
    (batch,) = read_traces(tmp_path).iter_batches(batch_size=None, batch_format="pandas")
    assert batch["seed"].isna().tolist() == [True, False] and batch["seed"].iloc[1] == 7
