"""The notebook helpers of Recording and Episode, on real recordings made in tmp_path.

Tables (pandas), HTML reprs, plots (matplotlib, Agg backend), frames and inline animations, and
replay through the environment.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
from conftest import OBSERVATION_SPACES, SpaceEnv, run_episodes

import gym_recording
from gym_recording import (
    DependencyNotInstalled,
    NoFramesError,
    RecordingError,
    ReplayMismatchWarning,
)
from gym_recording.read.notebook import Animation, rolling_mean
from gym_recording.read.replay import ReplayResult
from gym_recording.wrappers import TraceRecordingWrapper

pd = pytest.importorskip("pandas")
matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures() -> Any:
    yield
    plt.close("all")


# --------------------------------------------------------------------------------------------
# Environments
# --------------------------------------------------------------------------------------------


class DotEnv(gymnasium.Env[np.ndarray, int]):
    """A dot on a canvas: position observations, rgb_array frames; deterministic given the seed."""

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"], "render_fps": 15}  # noqa: RUF012

    def __init__(self, render_mode: str | None = None, size: int = 16, drift: float = 0.0) -> None:
        self.size = size
        self.render_mode = render_mode
        self.drift = drift  # > 0 makes the env differ from a recording made with 0
        self.observation_space = gymnasium.spaces.Box(0.0, size - 1.0, (2,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(4)
        self.pos = np.zeros(2, np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.pos = self.np_random.integers(4, self.size - 4, size=2).astype(np.float32)
        return self.pos.copy(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        move = np.array([[1, 0], [0, -1], [-1, 0], [0, 1]], np.float32)[int(action)]
        self.pos = np.clip(self.pos + move + self.drift, 0, self.size - 1).astype(np.float32)
        edge = bool(np.any(self.pos == 0) or np.any(self.pos == self.size - 1))
        return self.pos.copy(), float(edge), edge, False, {}

    def render(self) -> np.ndarray:
        frame = np.zeros((self.size, self.size, 3), np.uint8)
        x, y = self.pos.astype(int)
        frame[y, x] = (255, 200, 0)
        return frame


class NoRenderDotEnv(DotEnv):
    """DotEnv whose render() fails as Gymnasium's own envs do without pygame."""

    def render(self) -> np.ndarray:
        raise gymnasium.error.DependencyNotInstalled("pygame is not installed")


gymnasium.register("TestDot-v0", entry_point=DotEnv, max_episode_steps=12)
gymnasium.register("TestNoRenderDot-v0", entry_point=NoRenderDotEnv, max_episode_steps=12)
gymnasium.register(
    "TestDotDrift-v0", entry_point=DotEnv, max_episode_steps=12, kwargs={"drift": 0.5}
)


def record(env: Any, directory: Path, episodes: int, seed: int = 0, **kw: Any) -> Path:
    with TraceRecordingWrapper(env, directory, **kw) as w:
        w.action_space.seed(seed)
        for i in range(episodes):
            w.reset(seed=seed + i)
            done = False
            while not done:
                *_, terminated, truncated, _ = w.step(w.action_space.sample())
                done = terminated or truncated
    return directory


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record(gymnasium.make("CartPole-v1"), tmp_path_factory.mktemp("cp") / "t", 6)


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    env = gymnasium.wrappers.AddRenderObservation(
        gymnasium.make("TestDot-v0", render_mode="rgb_array"), render_only=True
    )
    return record(env, tmp_path_factory.mktemp("img") / "t", 3)


@pytest.fixture(scope="module")
def dots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record(gymnasium.make("TestDot-v0"), tmp_path_factory.mktemp("dot") / "t", 3, seed=5)


def space_recording(tmp_path: Path, name: str, episodes: int = 3) -> Path:
    env = SpaceEnv(OBSERVATION_SPACES[name], min_len=2, max_len=5)
    with TraceRecordingWrapper(env, tmp_path / name) as w:
        run_episodes(w, episodes)
    return tmp_path / name


# --------------------------------------------------------------------------------------------
# summary / steps / to_pandas
# --------------------------------------------------------------------------------------------


def test_summary_has_one_row_per_episode(cartpole: Path) -> None:
    with gym_recording.load(cartpole) as rec:
        df = rec.summary()
        eps = list(rec)
    assert isinstance(df, pd.DataFrame)
    assert df.index.name == "index"
    assert df.index.tolist() == [ep.index for ep in eps]
    for col in ("writer", "length", "total_reward", "terminated", "truncated", "seed"):
        assert col in df.columns
    assert df["length"].tolist() == [ep.length for ep in eps]
    assert df["total_reward"].tolist() == [ep.total_reward for ep in eps]
    assert df["terminated"].tolist() == [ep.terminated for ep in eps]
    assert df["seed"].tolist() == list(range(6))
    assert str(df["seed"].dtype) == "Int64"
    # Wall-clock times: recorded by TraceRecording.
    assert str(df["started_at"].dt.tz) == "UTC"
    assert (df["duration"] >= 0).all()
    assert df["duration"].iloc[0] == pytest.approx(eps[0].ended_at - eps[0].started_at)


def test_summary_without_seeds_or_times(tmp_path: Path) -> None:
    with gym_recording.TraceRecording(tmp_path) as w:
        w.add_reset(np.zeros(2))
        w.add_step(0, np.ones(2), 1.0)
    df = gym_recording.load(tmp_path).summary()
    assert df["seed"].isna().all()
    assert len(df) == 1 and df["length"].iloc[0] == 1


def test_summary_of_an_empty_recording(tmp_path: Path) -> None:
    gym_recording.TraceRecording(tmp_path).close()
    df = gym_recording.load(tmp_path).summary()
    assert len(df) == 0
    assert "total_reward" in df.columns


def test_episode_to_pandas_low_dim(cartpole: Path) -> None:
    ep = gym_recording.load(cartpole)[0]
    df = ep.to_pandas(next_obs=True)
    assert len(df) == ep.length
    assert df["step"].tolist() == list(range(ep.length))
    obs = np.stack([df[f"obs_{i}"].to_numpy() for i in range(4)], axis=1)
    nxt = np.stack([df[f"next_obs_{i}"].to_numpy() for i in range(4)], axis=1)
    np.testing.assert_array_equal(obs, ep.observations[:-1])
    np.testing.assert_array_equal(nxt, ep.observations[1:])
    assert df["obs_0"].dtype == np.float32
    np.testing.assert_array_equal(df["action"].to_numpy(), ep.actions)
    np.testing.assert_array_equal(df["reward"].to_numpy(), ep.rewards)
    assert df["terminated"].tolist() == [False] * (ep.length - 1) + [ep.terminated]
    assert not df["truncated"].any()
    assert "next_obs_0" not in ep.to_pandas().columns


def test_to_pandas_names_dict_and_tuple_leaves(tmp_path: Path) -> None:
    ep = gym_recording.load(space_recording(tmp_path, "dict_nested"))[0]
    df = ep.to_pandas()
    cols = set(df.columns)
    assert {"obs.position_0", "obs.position_2", "obs.inner.count", "obs.pair.0"} <= cols
    assert {"obs.pair.1_0", "obs.pair.1_1", "obs.inner.deeper.bits_2"} <= cols
    # A 4x5x3 uint8 frame is an image: one object column of per-step arrays.
    assert df["obs.inner.frame"].dtype == object
    np.testing.assert_array_equal(
        df["obs.inner.frame"].iloc[1], ep.observations["inner"]["frame"][1]
    )
    np.testing.assert_array_equal(df["obs.inner.count"], ep.observations["inner"]["count"][:-1])


def test_to_pandas_big_arrays_and_text(tmp_path: Path) -> None:
    ep = gym_recording.load(space_recording(tmp_path, "box_rank4_f32"))[0]
    df = ep.to_pandas()
    assert df["obs"].dtype == object and df["obs"].iloc[0].shape == (2, 3, 4, 5)
    assert ep.to_pandas(max_columns=200)["obs_119"].dtype == np.float32
    text = gym_recording.load(space_recording(tmp_path, "text"))[0]
    tdf = text.to_pandas()
    assert tdf["obs"].tolist() == text.observations[:-1]


def test_zero_step_episode_table(tmp_path: Path) -> None:
    with gym_recording.TraceRecording(tmp_path) as w:
        w.add_reset(np.zeros(3, np.float32))
    ep = gym_recording.load(tmp_path)[0]
    df = ep.to_pandas()
    assert len(df) == 0 and "obs_2" in df.columns


def test_recording_steps(cartpole: Path) -> None:
    with gym_recording.load(cartpole) as rec:
        df = rec.steps()
        total = sum(ep.length for ep in rec)
        assert len(df) == total
        assert list(df.columns[:2]) == ["episode", "step"]
        assert df.groupby("episode")["reward"].sum().tolist() == [ep.total_reward for ep in rec]
        want = pd.concat([ep.to_pandas() for ep in rec], ignore_index=True)
        pd.testing.assert_frame_equal(df.drop(columns="episode"), want)
        some = rec.steps(slice(1, 3))
        assert sorted(set(some["episode"])) == [1, 2]
        assert rec.steps([4])["episode"].unique().tolist() == [4]
        assert rec.steps(0, next_obs=True)["next_obs_3"].iloc[-1] == rec[0].observations[-1, 3]


def test_steps_with_object_columns(tmp_path: Path) -> None:
    rec = gym_recording.load(space_recording(tmp_path, "box_image_u8"))
    df = rec.steps()
    assert len(df) == sum(ep.length for ep in rec)
    assert df["obs"].iloc[0].shape == (12, 16, 3)


def test_steps_choose_episodes_by_mask(cartpole: Path) -> None:
    """A mask of one bool per episode (``summary()[...] > x``) chooses those episodes."""
    with gym_recording.load(cartpole) as rec:
        mask = rec.summary()["length"] > 15
        want = [i for i, keep in enumerate(mask) if keep]
        assert 0 < len(want) < len(rec)
        assert sorted(set(rec.steps(mask)["episode"])) == want
        assert sorted(set(rec.steps(mask.to_numpy())["episode"])) == want
        with pytest.raises(ValueError, match=f"one bool per episode: expected {len(rec)}, got 3"):
            rec.steps([True, False, True])


def test_steps_refuses_what_is_not_an_episode_index(cartpole: Path) -> None:
    """A bool, a float or a string is no episode index: refused, not read as another one."""
    rec = gym_recording.load(cartpole)
    for bad in (True, [1.9], ["x"], 1.5):
        with pytest.raises(TypeError, match="expected episode"):
            rec.steps(bad)
    assert set(rec.steps([1])["episode"]) == {1}


def test_steps_of_a_zero_step_episode_keep_the_others_columns(tmp_path: Path) -> None:
    """An episode of no steps adds no column and changes no dtype: int64 actions past 2**53
    stay exact (its actions, stored before any action was seen, are float64 of no rows)."""
    big = 2**53 + 1
    with gym_recording.TraceRecording(tmp_path) as w:
        w.add_reset(np.zeros(2, np.float32))
        w.end_episode()
        w.save_complete()
        w.add_reset(np.zeros(2, np.float32))
        w.add_step(np.array([big, 1], np.int64), np.ones(2, np.float32), 1.0, terminated=True)
    df = gym_recording.load(tmp_path).steps()
    assert [c for c in df.columns if c.startswith("action")] == ["action_0", "action_1"]
    assert df["action_0"].dtype == np.int64 and df["action_0"].tolist() == [big]


def test_summary_of_seeds_past_int64(tmp_path: Path) -> None:
    """Seeds may be any non-negative int (``SeedSequence().entropy`` is 128 bits)."""
    big = 2**64 + 5
    with gym_recording.TraceRecording(tmp_path) as w:
        for seed in (big, 7, None):
            w.add_reset(np.zeros(2), seed=seed)
            w.add_step(0, np.ones(2), 1.0)
    df = gym_recording.load(tmp_path).summary()
    assert df["seed"].tolist() == [big, 7, None]


def test_empty_steps_table(tmp_path: Path) -> None:
    gym_recording.TraceRecording(tmp_path).close()
    df = gym_recording.load(tmp_path).steps()
    assert len(df) == 0 and "reward" in df.columns


def test_pandas_is_optional(cartpole: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas -> ImportError
    rec = gym_recording.load(cartpole)
    with pytest.raises(DependencyNotInstalled, match=r"gym-recording\[notebook\]"):
        rec.summary()
    with pytest.raises(DependencyNotInstalled, match="pandas"):
        rec[0].to_pandas()
    # The HTML reprs do not need pandas.
    assert "<table>" in rec._repr_html_()


def test_import_does_not_load_notebook_dependencies() -> None:
    code = (
        "import sys, gym_recording; "
        "print([m for m in ('pandas', 'matplotlib', 'IPython', 'pyarrow', 'minari') "
        "if m in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


# --------------------------------------------------------------------------------------------
# HTML reprs
# --------------------------------------------------------------------------------------------


def test_recording_repr_html(cartpole: Path) -> None:
    with gym_recording.load(cartpole) as rec:
        page = rec._repr_html_()
        assert "CartPole-v1" in page
        assert "Discrete(2)" in page
        assert f"<td>{len(rec)}</td>" in page
        assert f"<td>{sum(ep.length for ep in rec)}</td>" in page  # steps, from the manifest
        assert "<caption>episodes</caption>" in page


def test_recording_repr_html_is_cheap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 40 episodes in many small batches: the repr reads only the batches of the first 10.
    d = record(gymnasium.make("CartPole-v1"), tmp_path / "t", 40, batch_bytes=2000)
    rec = gym_recording.load(d)
    n_batches = sum(len(m.batches) for m in rec.writers)
    assert n_batches > 10
    read: list[tuple[str, int]] = []
    original = rec._batch

    def counting(m: Any, b: int, *args: Any, **kwargs: Any) -> Any:
        read.append((m.name, b))
        return original(m, b, *args, **kwargs)

    monkeypatch.setattr(rec, "_batch", counting)
    page = rec._repr_html_()
    assert "first 10 of 40 episodes" in page
    grid = page.split("first 10 of 40 episodes")[1]
    assert grid.count("<tr>") == 1 + 10  # header + 10 episode rows
    needed = {b for b in range(n_batches) if b <= rec_batch_of(rec, 9)}
    assert {b for _, b in read} <= needed
    assert len(page) < 20_000


def rec_batch_of(rec: Any, index: int) -> int:
    """The batch holding episode ``index`` of a one-writer recording."""
    k = index
    for b, starts in enumerate(rec._writers[0].starts):
        if k < starts:
            return b
        k -= starts
    raise AssertionError(index)


def test_repr_html_escapes(tmp_path: Path) -> None:
    with gym_recording.TraceRecording(tmp_path, metadata={"note": "<script>x</script>"}) as w:
        w.add_reset("<b>obs</b>")
        w.add_step("<i>act</i>", "<b>obs</b>", 1.0)
    rec = gym_recording.load(tmp_path)
    for page in (rec._repr_html_(), rec[0]._repr_html_()):
        assert "<script>" not in page and "<b>obs" not in page and "<i>act" not in page
        assert "&lt;" in page


def test_episode_repr_html_is_compact(images: Path) -> None:
    ep = gym_recording.load(images)[0]
    page = ep._repr_html_()
    assert f"Episode {ep.index}" in page
    assert "uint8 [" in page and "TestDot-v0" in page
    assert "first 5 of" in page
    assert len(page) < 10_000  # shapes, not a wall of pixels


def test_episode_repr_html_of_closed_recording(cartpole: Path) -> None:
    rec = gym_recording.load(cartpole)
    ep = rec[0]
    rec.close()
    assert "Episode 0" in ep._repr_html_()
    assert "(closed)" in rec._repr_html_()


# --------------------------------------------------------------------------------------------
# Plots
# --------------------------------------------------------------------------------------------


def test_rolling_mean() -> None:
    np.testing.assert_allclose(rolling_mean(np.array([2.0, 4.0, 6.0, 8.0]), 3), [2, 3, 4, 6])
    assert rolling_mean(np.array([]), 5).shape == (0,)


def test_plot_returns(cartpole: Path) -> None:
    rec = gym_recording.load(cartpole)
    ax = rec.plot_returns(window=3)
    assert isinstance(ax, matplotlib.axes.Axes)
    returns = [ep.total_reward for ep in rec]
    points, mean = ax.get_lines()
    np.testing.assert_array_equal(points.get_ydata(), returns)
    np.testing.assert_allclose(mean.get_ydata(), rolling_mean(np.array(returns), 3))
    assert "CartPole-v1" in ax.get_title()
    _, other = plt.subplots()
    assert rec.plot_returns(ax=other) is other
    with pytest.raises(ValueError, match="window"):
        rec.plot_returns(window=0)


def test_plot_returns_window_longer_than_recording(cartpole: Path) -> None:
    ax = gym_recording.load(cartpole).plot_returns(window=100)
    assert "rolling mean (6 episodes)" in [t.get_text() for t in ax.get_legend().get_texts()]


def test_episode_plot_low_dim(cartpole: Path) -> None:
    ep = gym_recording.load(cartpole)[1]
    axes = ep.plot()
    assert len(axes) == 3  # rewards, actions, observations
    fig = axes[0].figure
    assert isinstance(fig, matplotlib.figure.Figure)
    np.testing.assert_array_equal(axes[0].get_lines()[0].get_ydata(), ep.rewards)
    np.testing.assert_array_equal(axes[1].get_lines()[0].get_ydata(), ep.actions)
    obs_lines = axes[2].get_lines()
    assert len(obs_lines) == 4
    np.testing.assert_allclose(obs_lines[2].get_ydata(), ep.observations[:, 2])
    _png(fig)


def _png(fig: Any) -> Any:
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    assert buf.getvalue()[:4] == b"\x89PNG"
    return buf


def test_episode_plot_max_dims_and_dict_leaves(tmp_path: Path) -> None:
    ep = gym_recording.load(space_recording(tmp_path, "dict_nested"))[0]
    axes = ep.plot(max_dims=2)
    labels = [a.get_ylabel() for a in axes]
    # rewards, actions, then the numeric leaves: the 4x5x3 uint8 "frame" is too small to be
    # a picture (Episode.frames' rule: sides of 16 pixels or more), so it is plotted too
    assert labels[:2] == ["reward", "action"]
    assert "obs.position" in labels and "obs.inner.count" in labels
    assert "obs.inner.frame" in labels
    assert len(axes[labels.index("obs.inner.frame")].get_lines()) == 2  # max_dims=2
    position = axes[labels.index("obs.position")]
    assert len(position.get_lines()) == 2  # 3 components, max_dims=2
    _png(axes[0].figure)


def test_episode_plot_of_a_zero_step_episode_with_array_actions(tmp_path: Path) -> None:
    """As a wrapper's last reset before close() leaves: no step, array actions of width 2."""
    with gym_recording.TraceRecording(tmp_path) as w:
        w.add_reset(np.zeros(2))
        w.add_step(np.ones(2), np.ones(2), 1.0, terminated=True)
        w.add_reset(np.zeros(2))
    ep = gym_recording.load(tmp_path)[1]
    assert ep.length == 0
    axes = ep.plot()
    assert [a.get_ylabel() for a in axes][:2] == ["reward", "action"]
    _png(axes[0].figure)


def test_episode_plot_of_images_points_to_show(images: Path) -> None:
    axes = gym_recording.load(images)[0].plot()
    texts = [t.get_text() for t in axes[-1].texts]
    assert any("ep.show()" in t for t in texts)


# --------------------------------------------------------------------------------------------
# Frames and animations
# --------------------------------------------------------------------------------------------


def test_frames_of_image_observations(images: Path) -> None:
    ep = gym_recording.load(images)[0]
    frames = ep.frames()
    assert frames.dtype == np.uint8
    assert frames.shape == (ep.length + 1, 16, 16, 3)
    np.testing.assert_array_equal(frames, ep.observations)


def test_frames_grayscale_and_dict(tmp_path: Path) -> None:
    with gym_recording.TraceRecording(tmp_path / "g") as w:
        w.add_reset(np.zeros((20, 18), np.uint8))
        w.add_step(0, np.full((20, 18), 9, np.uint8), 0.0)
    gray = gym_recording.load(tmp_path / "g")[0].frames()
    assert gray.shape == (2, 20, 18, 1) and gray[1].max() == 9

    def obs(v: int) -> dict[str, Any]:
        return {
            "state": np.zeros(3, np.float32),
            "frame": np.full((16, 16, 3), v, np.uint8),
            "pixels": np.full((24, 24, 3), v + 1, np.uint8),
        }

    with gym_recording.TraceRecording(tmp_path / "d") as w:
        w.add_reset(obs(0))
        w.add_step(1, obs(10), 0.0)
    ep = gym_recording.load(tmp_path / "d")[0]
    assert ep.frames().shape == (2, 24, 24, 3)  # "pixels" is preferred
    assert ep.frames("frame").shape == (2, 16, 16, 3)
    with pytest.raises(NoFramesError, match="image keys"):
        ep.frames("state")


def test_frames_of_vector_observations_say_replay(cartpole: Path) -> None:
    ep = gym_recording.load(cartpole)[0]
    with pytest.raises(NoFramesError, match=r"replay") as info:
        ep.frames()
    assert isinstance(info.value, RecordingError)
    with pytest.raises(NoFramesError):
        ep.show()


def test_show_makes_an_inline_animation(images: Path) -> None:
    ep = gym_recording.load(images)[0]
    anim = ep.show(fps=10)
    assert isinstance(anim, Animation)
    page = anim._repr_html_()
    assert anim.frames == ep.length + 1
    assert 'type="range"' in page  # the step slider
    assert page.count("data:image/png;base64") == ep.length + 1
    assert "https://" not in page and "fa-play" not in page  # works offline
    short = ep.show(max_frames=4)
    assert short.frames == 4
    for bad in (0, -5, float("nan"), float("inf"), True):
        with pytest.raises(ValueError, match="expected fps to be a positive number"):
            ep.show(fps=bad)
    for frames in (0, -1):
        with pytest.raises(ValueError, match="max_frames to be at least 1"):
            ep.show(max_frames=frames)
    with pytest.raises(TypeError, match="max_frames to be an int"):
        ep.show(max_frames=2.5)


def _interval(anim: Animation) -> int:
    """The milliseconds between frames of ``anim``'s player."""
    match = re.search(r"new Animation\(frames, img_id, slider_id, (\d+)", anim.html)
    assert match, anim.html[-2000:]
    return int(match.group(1))


def test_show_plays_at_the_recorded_frame_rate(images: Path, tmp_path: Path) -> None:
    """show() plays at the env's render_fps, as to_video() and export --to mp4 do; a recording
    that has none plays at 30 fps, as they do."""
    ep = gym_recording.load(images)[0]
    assert ep.render_fps == 15
    assert _interval(ep.show(max_frames=2)) == _interval(ep.show(fps=15, max_frames=2)) == 66
    assert _interval(ep.show(fps=30, max_frames=2)) == 33
    # (a rate that is not a whole number, or is below 1, as it is: not rounded)
    assert _interval(ep.show(fps=2.5, max_frames=2)) == 400
    assert _interval(ep.show(fps=0.5, max_frames=2)) == 2000
    with gym_recording.TraceRecording(tmp_path / "d") as w:
        w.add_reset(np.zeros((16, 16, 3), np.uint8))
        w.add_step(0, np.ones((16, 16, 3), np.uint8), 0.0)
    ep = gym_recording.load(tmp_path / "d")[0]
    assert ep.render_fps is None
    assert _interval(ep.show()) == 33


def test_show_saves_a_page(images: Path, tmp_path: Path) -> None:
    anim = gym_recording.load(images)[1].show()
    anim.save(str(tmp_path / "a.html"))
    assert (tmp_path / "a.html").read_text().startswith("<!DOCTYPE html>")
    assert "Animation of" in repr(anim)


# --------------------------------------------------------------------------------------------
# Replay
# --------------------------------------------------------------------------------------------


def test_replay_reproduces_and_renders(dots: Path) -> None:
    ep = gym_recording.load(dots)[1]
    assert ep.env_id == "TestDot-v0"
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReplayMismatchWarning)
        result = ep.replay()
    assert isinstance(result, ReplayResult)
    assert result.reproduced and result.first_mismatch is None
    assert result.steps == ep.length
    assert result.frames is not None
    assert result.frames.shape == (ep.length + 1, 16, 16, 3)
    assert result.frames.dtype == np.uint8
    # The frame after the last step shows the dot at the last recorded position.
    x, y = ep.observations[-1].astype(int)
    assert tuple(result.frames[-1, y, x]) == (255, 200, 0)
    np.testing.assert_array_equal(np.stack(result.observations), ep.observations)
    assert "reproduced all" in result.message
    assert "True" in result._repr_html_()
    assert result.show().frames == ep.length + 1
    # Its repr is short: the frames' shape, not their pixels.
    text = repr(result)
    assert len(text) < 400, text
    assert text.startswith("ReplayResult(env_id='TestDot-v0', reproduced=True, ")
    assert f"frames=<array ({ep.length + 1}, 16, 16, 3) uint8>" in text
    assert "None" in repr(ep.replay(render=False)).split("frames=")[1]


def test_show_replaying_an_env_that_cannot_render_says_what_else_works(tmp_path: Path) -> None:
    """ep.show(replay=True) where the env cannot render: the error says why, and the way to
    replay without frames it names works (it said to pass render=False, which show() does not
    take)."""
    ep = gym_recording.load(record(gymnasium.make("TestNoRenderDot-v0"), tmp_path / "t", 1))[0]
    with pytest.raises(RecordingError) as got:
        ep.show(replay=True)
    text = str(got.value)
    assert "cannot render 'TestNoRenderDot-v0'" in text and "pygame is not installed" in text
    assert "pass render=False" not in text and "ep.replay(render=False)" in text
    assert ep.replay(render=False).reproduced


def test_show_refuses_frames_of_no_pixels() -> None:
    # An env may render 0x0 frames; replaying it must not crash the player (it divided by 0).
    frames = np.zeros((2, 0, 0, 3), np.uint8)
    with pytest.raises(NoFramesError, match=r"none of them 0, got \(2, 0, 0, 3\)"):
        ReplayResult("TestDot-v0", frames, True, None, 1, "reproduced all 1 steps").show()


def test_show_replays_vector_observations(dots: Path) -> None:
    ep = gym_recording.load(dots)[0]
    anim = ep.show(replay=True)
    assert anim.frames == ep.length + 1


def test_replay_reports_a_mismatch(dots: Path) -> None:
    ep = gym_recording.load(dots)[0]
    with pytest.warns(ReplayMismatchWarning, match="did not reproduce"):
        result = ep.replay("TestDotDrift-v0")
    assert not result.reproduced
    assert result.first_mismatch == 1  # the reset matches, the first step drifts
    assert "step 1" in result.message
    assert result.frames is not None and len(result.frames) >= 2


def test_replay_reports_an_early_end(tmp_path: Path) -> None:
    # Recorded with a longer time limit than the registered env has, which the replay keeps
    # (the spec's entry point is a class: its summary is recorded); replayed with the
    # registered one, it ends early.
    env = gymnasium.make("TestDot-v0", max_episode_steps=30)
    with TraceRecordingWrapper(env, tmp_path) as w:
        w.reset(seed=0)
        for _ in range(20):
            w.step(0 if _ % 2 else 2)  # right, left: never reaches an edge
    ep = gym_recording.load(tmp_path)[0]
    assert ep.length == 20
    assert ep.replay(render=False).reproduced
    with pytest.warns(ReplayMismatchWarning):
        result = ep.replay(render=False, env_kwargs={"max_episode_steps": 12})
    assert result.frames is None
    assert result.first_mismatch == 12
    assert "truncated after 12 steps" in result.message


def test_replay_without_seed_says_so(tmp_path: Path) -> None:
    with TraceRecordingWrapper(gymnasium.make("TestDot-v0"), tmp_path) as w:
        w.reset()
        w.step(0)
    ep = gym_recording.load(tmp_path)[0]
    results = []
    for _ in range(5):  # an unseeded reset may land on the same position by chance
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ReplayMismatchWarning)
            results.append(ep.replay(render=False))
    failed = [r for r in results if not r.reproduced]
    assert failed, "five unseeded resets all reproduced the recording"
    assert "without a seed" in failed[0].message


def test_replay_needs_an_env_id(tmp_path: Path) -> None:
    with gym_recording.TraceRecording(tmp_path) as w:
        w.add_reset(np.zeros(2))
        w.add_step(0, np.zeros(2), 0.0)
    ep = gym_recording.load(tmp_path)[0]
    with pytest.raises(RecordingError, match="env_id"):
        ep.replay()
    with pytest.raises(RecordingError, match="cannot make environment 'NoSuchEnv-v0'"):
        ep.replay("NoSuchEnv-v0")


def test_replay_of_an_env_under_a_wrapper_that_cannot_be_made_again(tmp_path: Path) -> None:
    """A user's wrapper without RecordConstructorArgs is in the recorded spec but cannot be
    made again: the error says so and how to replay; with ``env_id`` the replay reproduces."""

    class Plain(gymnasium.Wrapper):  # type: ignore[type-arg]
        pass

    with TraceRecordingWrapper(Plain(gymnasium.make("CartPole-v1")), tmp_path) as env:
        env.reset(seed=3)
        env.step(0)
        env.step(1)
    ep = gym_recording.load(tmp_path)[0]
    with pytest.raises(
        RecordingError, match=r"inside the wrappers .*Plain.*env_id='CartPole-v1' to replay it"
    ):
        ep.replay(render=False)  # (a wrapper not Gymnasium's: made only if trusted)
    with pytest.raises(RecordingError, match="wrappers Plain cannot be made again; pass env_id="):
        ep.replay(render=False, trust_env_spec=True)
    assert ep.replay("CartPole-v1", render=False).reproduced


def test_cartpole_replay_reproduces(cartpole: Path) -> None:
    ep = gym_recording.load(cartpole)[2]
    result = ep.replay(render=False)
    assert result.reproduced, result.message
    if importlib.util.find_spec("pygame") is None:
        with pytest.raises(RecordingError, match="render=False"):
            ep.replay()
    else:
        frames = ep.replay().frames
        assert frames is not None and frames.shape[0] == ep.length + 1
        assert frames.shape[-1] == 3
