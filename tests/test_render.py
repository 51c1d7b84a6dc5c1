"""Rendered frames (``record_render``, FORMAT.md §4 ``render_frames``): recorded, read back,
shown, and exported as video."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from fractions import Fraction
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import pytest
from seed_reader import read_seed_format

import gym_recording
from gym_recording import LossyExportWarning, NoFramesError, RecordingError, TraceRecording
from gym_recording.format.names import batch_names
from gym_recording.tools.export import export
from gym_recording.wrappers import TraceRecordingVectorWrapper, TraceRecordingWrapper

pytest.importorskip("pygame")  # (CartPole's rgb_array rendering)


def _cartpole() -> gym.Env[Any, Any]:
    return gym.make("CartPole-v1", render_mode="rgb_array")


def _run(env: Any, seeds: list[int], max_steps: int = 60) -> list[list[int]]:
    """Episodes of random actions (one generator per seed); the actions taken."""
    actions = []
    for seed in seeds:
        env.reset(seed=seed)
        rng = np.random.default_rng(seed)
        taken = []
        for _ in range(max_steps):
            a = int(rng.integers(2))
            taken.append(a)
            _, _, terminated, truncated, _ = env.step(a)
            if terminated or truncated:
                break
        actions.append(taken)
    return actions


def _capture(seed: int, actions: list[int]) -> np.ndarray:
    """An independent capture: env.render() after the reset and after each step."""
    env = _cartpole()
    env.reset(seed=seed)
    frames = [env.render()]
    for a in actions:
        env.step(a)
        frames.append(env.render())
    env.close()
    return np.stack(frames)


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_cartpole_frames_read_back_equal_to_an_independent_capture(
    tmp_path: Path, compression: str | None
) -> None:
    """Frames equal, to the byte, what env.render() draws, with and without compression,
    raw ones in episodes split across batches, alongside the actions taken."""
    directory = tmp_path / "rec"
    seeds = [0, 1, 2]
    with TraceRecordingWrapper(
        _cartpole(), directory, record_render=True, compression=compression, batch_bytes=2_000_000
    ) as env:
        actions = _run(env, seeds)
    batches = [json.loads(p.read_text()) for p in directory.glob("*.ep*.json")]
    refs = [e["render_frames"] for b in batches for e in b["episodes"]]
    if compression is None:  # (compressed batches hold up to 64 MiB of frames: no split)
        assert len(refs) > len(seeds)  # episodes were split into parts
    assert all(("codec" in r) == (compression is not None) for r in refs)
    with gym_recording.load(directory) as rec:
        assert len(rec) == len(seeds)
        for ep, seed, taken in zip(rec, seeds, actions, strict=True):
            want = _capture(seed, taken)
            assert ep.render_frames is not None
            assert ep.render_frames.dtype == np.uint8
            assert ep.render_frames.shape == (ep.length + 1, 400, 600, 3)
            np.testing.assert_array_equal(ep.render_frames, want)
            assert ep.render_fps == 50.0
            assert ep.actions.tolist() == taken
            np.testing.assert_array_equal(ep.frames(), want)  # rendered frames preferred
    assert gym_recording.verify(directory).ok


def test_frames_take_far_less_disk_compressed(tmp_path: Path) -> None:
    """CartPole's frames compress far more than 50x (the issue's bar)."""
    with TraceRecordingWrapper(
        _cartpole(), tmp_path / "z", record_render=True, compression="zstd"
    ) as env:
        _run(env, [3, 4])
    disk = sum(p.stat().st_size for p in (tmp_path / "z").iterdir())
    with gym_recording.load(tmp_path / "z") as rec:
        raw = sum(ep.render_frames.nbytes for ep in rec)
    assert raw / disk > 50


def test_env_that_does_not_render_rgb_arrays_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RecordingError, match=r'render_mode="rgb_array".*None'):
        TraceRecordingWrapper(gym.make("CartPole-v1"), tmp_path, record_render=True)
    with pytest.raises(RecordingError, match=r"gym\.make_vec\(env_id, num_envs, render_mode="):
        TraceRecordingVectorWrapper(gym.make_vec("CartPole-v1", 2), tmp_path, record_render=True)

    class TextOnly(gym.Env[Any, Any]):  # (made with render_mode="rgb_array", which it ignores)
        metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"]}
        observation_space, action_space = gym.spaces.Discrete(2), gym.spaces.Discrete(2)

    with pytest.raises(
        RecordingError, match=r"does not \(its metadata's render_modes are \['ansi'\]"
    ):
        TraceRecordingWrapper(TextOnly(), tmp_path, record_render=True)

    # Made with render_mode="rgb_array", which its metadata does not list: Gymnasium's env
    # checker would fail the first render() with an AssertionError.
    class Made(TextOnly):
        def __init__(self, render_mode: str | None = None) -> None:
            self.render_mode = render_mode

    gym.register("TextOnly-v0", entry_point=Made)
    try:
        with pytest.warns(UserWarning, match="not in the possible render_modes"):
            made = gym.make("TextOnly-v0", render_mode="rgb_array")
        with pytest.raises(
            RecordingError, match=r"are \['ansi'\]\); its render_mode is 'rgb_array'"
        ):
            TraceRecordingWrapper(made, tmp_path, record_render=True)
    finally:
        del gym.registry["TextOnly-v0"]
    with pytest.raises(TypeError, match="record_render"):
        TraceRecordingWrapper(_cartpole(), tmp_path, record_render="yes")  # type: ignore[arg-type]

    class Undeclared(Made):  # (gymnasium.Env's default metadata: no mode declared)
        metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

        def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
            return 0, {}

        def step(self, action: Any) -> Any:
            return 1, 0.0, True, False, {}

        def render(self) -> Any:
            return np.full((16, 16, 3), 9, np.uint8)

    with TraceRecordingWrapper(Undeclared("rgb_array"), tmp_path / "u", record_render=True) as e:
        e.reset()
        e.step(0)
    with gym_recording.load(tmp_path / "u") as rec:
        assert rec[0].render_frames.shape == (2, 16, 16, 3)
    assert not list(tmp_path.glob("*.manifest.json"))


def test_record_render_callable_and_episode_trigger_choose_the_episodes(tmp_path: Path) -> None:
    """episode_trigger chooses what is recorded; a callable record_render which of those
    are rendered (by episode index)."""
    with TraceRecordingWrapper(
        _cartpole(),
        tmp_path,
        episode_trigger=lambda i: i != 1,
        record_render=lambda i: i % 2 == 0,
    ) as env:
        _run(env, [0, 1, 2, 3, 4], max_steps=5)
    with gym_recording.load(tmp_path) as rec:
        assert [ep.seed for ep in rec] == [0, 2, 3, 4]
        assert [ep.render_frames is not None for ep in rec] == [True, True, False, True]
        with pytest.raises(NoFramesError, match="record_render=True"):
            rec[2].frames()


class _Frames(gym.Env[np.ndarray, int]):
    """A tiny env whose render() returns what ``frame(t)`` says."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": 7}
    observation_space = gym.spaces.Box(0, 9, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, frame: Any) -> None:
        self.render_mode = "rgb_array"
        self.frame, self.t = frame, 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action: int) -> Any:
        self.t += 1
        return np.full(2, self.t, np.float32), 1.0, self.t == 4, False, {}

    def render(self) -> Any:
        return self.frame(self.t)


def test_a_frame_that_cannot_be_stored_is_refused_and_the_episode_kept(tmp_path: Path) -> None:
    """A render() of the wrong kind or size is refused at the step that brings it; the
    episode is kept up to the step before, and the next reset records again."""

    def frame(t: int) -> Any:
        return np.full((5, 6, 3), t, np.uint8) if t != 2 else np.zeros((5, 7, 3), np.uint8)

    with TraceRecordingWrapper(_Frames(frame), tmp_path, record_render=True) as env:
        env.reset(seed=1)
        env.step(0)
        with pytest.raises(RecordingError, match=r"episode's size \[5, 6, 3\].*\[5, 7, 3\]"):
            env.step(0)
        env.step(0)  # (not recorded: the episode was cut)
        env.reset(seed=2)
        env.step(0)
    with gym_recording.load(tmp_path) as rec:
        assert [ep.length for ep in rec] == [1, 1]
        assert [int(f[0, 0, 0]) for f in rec[0].render_frames] == [0, 1]
        assert rec[0].render_fps == 7.0


def test_a_new_frame_size_waits_for_a_failed_write_and_nothing_is_lost(tmp_path: Path) -> None:
    """Frames of a new size need the batches of the old size written first. While one
    cannot be (a directory at its blob's name), the reset that brings them is refused,
    naming the failed write: no episode is started, the steps after it are not recorded,
    and nothing is lost. Once the way is clear, the next reset writes them and records."""
    size = [(5, 6, 3)]
    env = TraceRecordingWrapper(
        _Frames(lambda t: np.full(size[0], t, np.uint8)), tmp_path, record_render=True
    )
    blob = tmp_path / batch_names(env.recording.file_prefix, 0)[1]
    blob.mkdir()
    for seed in (0, 1):
        env.reset(seed=seed)
        env.step(0)
    with pytest.raises(gym_recording.WriteError):
        env.recording.save_complete()  # (the first episode's batch: it stays buffered)
    size[0] = (4, 4, 3)
    with pytest.raises(RecordingError, match=r"frame of shape \(4, 4, 3\).*Is a directory") as err:
        env.reset(seed=2)
    assert not isinstance(err.value, gym_recording.WriteError)  # (no reset is recorded)
    env.step(0)  # (not recorded)
    blob.rmdir()
    env.reset(seed=3)
    env.step(0)
    env.close()
    with gym_recording.load(tmp_path) as rec:
        assert [(ep.seed, ep.length) for ep in rec] == [(0, 1), (1, 1), (3, 1)]
        assert [ep.render_frames.shape[1:] for ep in rec] == [(5, 6, 3)] * 2 + [(4, 4, 3)]
        assert [int(f[0, 0, 0]) for f in rec[1].render_frames] == [0, 1]
    assert gym_recording.verify(tmp_path).ok


@pytest.mark.parametrize(
    "bad",
    [None, np.zeros((5, 6, 4), np.uint8), np.zeros((5, 6, 3), np.float32), [[0, 0, 0]]],
    ids=["none", "rgba", "float", "list"],
)
def test_render_returning_no_rgb_frame_is_refused(tmp_path: Path, bad: Any) -> None:
    env = TraceRecordingWrapper(_Frames(lambda t: bad), tmp_path, record_render=True)
    with pytest.raises(RecordingError, match=r"uint8\[H, W, 3\]"):
        env.reset()
    env.close()


def test_trace_recording_takes_frames_of_each_episode_and_new_sizes(tmp_path: Path) -> None:
    """TraceRecording on its own: frames per episode, episodes of another frame size, and
    the refusals that keep every episode's frames one per observation."""
    rec = TraceRecording(tmp_path)
    sizes = [(4, 5, 3), (4, 5, 3), (9, 2, 3)]
    for e, size in enumerate(sizes):
        rec.add_reset(np.zeros(1), render_frame=np.full(size, e, np.uint8))
        for t in range(3):
            rec.add_step(0, np.ones(1), 0.0, render_frame=np.full(size, 10 * e + t, np.uint8))
    rec.add_reset(np.zeros(1))  # an episode without frames
    with pytest.raises(RecordingError, match="add_reset too"):
        rec.add_step(0, np.ones(1), 0.0, render_frame=np.zeros((4, 5, 3), np.uint8))
    rec.add_reset(np.zeros(1), render_frame=np.zeros((4, 5, 3), np.uint8))
    rec.add_step(0, np.ones(1), 0.0, render_frame=np.zeros((4, 5, 3), np.uint8))
    with pytest.raises(RecordingError, match="pass render_frame to every add_step"):
        rec.add_step(0, np.ones(1), 0.0)
    rec.close()
    with gym_recording.load(tmp_path) as r:
        assert [ep.length for ep in r] == [3, 3, 3, 0, 1]
        for e, size in enumerate(sizes):
            frames = r[e].render_frames
            assert frames.shape == (4, *size)
            assert frames[:, 0, 0, 0].tolist() == [e, 10 * e, 10 * e + 1, 10 * e + 2]
        assert r[3].render_frames is None
        assert r[4].render_frames.shape == (2, 4, 5, 3)


def test_frames_of_a_key_that_is_no_picture_say_so_not_that_nothing_is_rendered(
    tmp_path: Path,
) -> None:
    """``frames(key=...)`` of a symbolic grid, in an episode with rendered frames: the key is
    the problem, and its rendered frames are ``frames()``."""
    with TraceRecording(tmp_path) as rec:
        grid = {"image": np.zeros((7, 7, 3), np.uint8)}
        rec.add_reset(grid, render_frame=np.zeros((16, 16, 3), np.uint8))
        rec.add_step(0, grid, 0.0, render_frame=np.ones((16, 16, 3), np.uint8))
    ep = gym_recording.load(tmp_path)[0]
    assert ep.frames().shape == (2, 16, 16, 3)
    with pytest.raises(NoFramesError, match="no image observation 'image'") as exc:
        ep.frames(key="image")
    assert "ep.frames(), without a key" in str(exc.value)
    assert "has no rendered frames" not in str(exc.value)
    # (of an episode whose observations are pictures, not in a Dict: "image keys are [None]")
    pictures = gym_recording.Episode(np.zeros((3, 32, 32, 3), np.uint8), np.zeros(2), np.zeros(2))
    said = r"observations are pictures themselves: ep\.frames\(\)"
    with pytest.raises(NoFramesError, match=said):
        pictures.frames(key="pixels")
    scalars = gym_recording.Episode(np.zeros((3, 2)), np.zeros(2), np.zeros(2))
    with pytest.raises(NoFramesError, match="no Dict or Tuple key holds pictures"):
        scalars.frames(key="pixels")


def test_readers_that_do_not_know_render_frames_still_read_the_episodes(tmp_path: Path) -> None:
    """FORMAT.md 2.2 is additive: the original gym-recording's reader (tests/seed_reader.py)
    reads the episodes of a raw recording with frames, which it ignores."""
    with TraceRecordingWrapper(_cartpole(), tmp_path, record_render=True) as env:
        actions = _run(env, [5], max_steps=8)
    (episodes,) = read_seed_format(tmp_path).values()
    # (it sees the parts of an episode split across batches as episodes one after the other)
    assert [a for ep in episodes for a in ep["actions"].tolist()] == actions[0]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_vector_env_renders_each_sub_env(tmp_path: Path, mode: str) -> None:
    """Each sub-env's episodes carry its own frames, equal to a capture of the sub-env
    alone, across NEXT_STEP autoresets."""
    n, steps = 3, 40
    envs = gym.make_vec("CartPole-v1", num_envs=n, vectorization_mode=mode, render_mode="rgb_array")
    rng = np.random.default_rng(0)
    taken = rng.integers(0, 2, (steps, n))
    with TraceRecordingVectorWrapper(envs, tmp_path, record_render=True) as venv:
        venv.reset(seed=10)
        for t in range(steps):
            venv.step(taken[t])
    with gym_recording.load(tmp_path) as rec:
        by_writer: dict[str, list[Any]] = {}
        for ep in rec:
            by_writer.setdefault(ep.writer, []).append(ep)
    assert len(by_writer) == n
    for i, eps in enumerate(sorted(by_writer.values(), key=lambda e: e[0].seed)):
        first = eps[0]
        assert first.seed == 10 + i
        want = _capture(10 + i, first.actions.tolist())
        np.testing.assert_array_equal(first.render_frames, want)
        for ep in eps:
            assert ep.render_frames is not None and len(ep.render_frames) == ep.length + 1
            assert ep.render_fps == 50.0


def test_vector_env_under_same_step_is_refused(tmp_path: Path) -> None:
    envs = gym.make_vec(
        "CartPole-v1",
        num_envs=2,
        vectorization_mode="sync",
        render_mode="rgb_array",
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
    )
    with pytest.raises(RecordingError, match="SAME_STEP"):
        TraceRecordingVectorWrapper(envs, tmp_path, record_render=True)
    envs.close()
    plain = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync")
    with pytest.raises(RecordingError, match="render_mode"):
        TraceRecordingVectorWrapper(plain, tmp_path, record_render=True)
    plain.close()


# ---- pictures of observations: frame stacks, grids


def test_frame_stacked_atari_shows_the_newest_frame_of_each_stack(tmp_path: Path) -> None:
    """A DQN-style observation, uint8[4, H, W] (FrameStackObservation of real ALE/Pong-v5's
    grayscale screens), is shown as grayscale frames: the newest of each stack."""
    pytest.importorskip("matplotlib")
    ale_py = pytest.importorskip("ale_py")
    gym.register_envs(ale_py)
    env = gym.make("ALE/Pong-v5", obs_type="grayscale")
    env = gym.wrappers.FrameStackObservation(env, 4)
    with TraceRecordingWrapper(env, tmp_path) as rec_env:
        rec_env.reset(seed=0)
        for _ in range(12):
            rec_env.step(rec_env.action_space.sample())
    with gym_recording.load(tmp_path) as rec:
        ep = rec[0]
        assert ep.observations.shape == (13, 4, 210, 160)
        frames = ep.frames()
        assert frames.shape == (13, 210, 160, 1)
        np.testing.assert_array_equal(frames[..., 0], ep.observations[:, -1])
        animation = ep.show(max_frames=20)
        assert animation.frames == 13


def test_small_integer_grids_are_not_pictures() -> None:
    """MiniGrid's symbolic 7x7x3 grid is not shown as a picture; a 16x16 one is."""
    grid = gym_recording.Episode(np.zeros((3, 7, 7, 3), np.uint8), np.zeros(2), np.zeros(2))
    with pytest.raises(NoFramesError, match="at least 16 pixels"):
        grid.frames()
    image = gym_recording.Episode(np.zeros((3, 16, 16, 3), np.uint8), np.zeros(2), np.zeros(2))
    assert image.frames().shape == (3, 16, 16, 3)
    stack_rgb = gym_recording.Episode(
        np.zeros((3, 2, 20, 24, 3), np.uint8), np.zeros(2), np.zeros(2)
    )
    assert stack_rgb.frames().shape == (3, 20, 24, 3)


def test_real_minigrid_grid_observation_is_not_a_picture(tmp_path: Path) -> None:
    minigrid = pytest.importorskip("minigrid")
    gym.register_envs(minigrid)
    with TraceRecordingWrapper(
        gym.make("MiniGrid-Empty-5x5-v0", render_mode="rgb_array"), tmp_path, record_render=True
    ) as env:
        env.reset(seed=0)
        env.step(2)
    with gym_recording.load(tmp_path) as rec:
        ep = rec[0]
        assert ep.observations["image"].shape == (2, 7, 7, 3)
        np.testing.assert_array_equal(ep.frames(), ep.render_frames)
        with pytest.raises(NoFramesError):
            ep.frames("image")


# ---- video


def _decode(path: Path) -> list[np.ndarray]:
    av = pytest.importorskip("av")
    with av.open(str(path)) as container:
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]


def test_to_video_writes_every_frame_at_the_recorded_size(tmp_path: Path) -> None:
    pytest.importorskip("av")
    with TraceRecordingWrapper(
        _cartpole(), tmp_path / "rec", record_render=True, compression="zstd"
    ) as env:
        _run(env, [7])
    with gym_recording.load(tmp_path / "rec") as rec:
        ep = rec[0]
        path = ep.to_video(tmp_path / "ep.mp4")
        frames = _decode(Path(path))
        assert len(frames) == ep.length + 1
        assert frames[0].shape == (400, 600, 3)
        # H.264 is lossy: close, not equal.
        assert np.abs(frames[5].astype(int) - ep.render_frames[5]).mean() < 3
        with pytest.raises(gym_recording.OutputExistsError):
            ep.to_video(tmp_path / "ep.mp4")
        odd = gym_recording.Episode(
            np.zeros((4, 1), np.float32),
            np.zeros(3),
            np.zeros(3),
            render_frames=np.full((4, 17, 21, 3), 200, np.uint8),
        )
        assert [f.shape for f in _decode(Path(odd.to_video(tmp_path / "odd.mp4", fps=12.5)))] == [
            (17, 21, 3)
        ] * 4
        # (frames of odd sides at a high rate: each one decodes, B-frames dropped them)
        fast = odd.to_video(tmp_path / "fast.mp4", fps=8000)
        assert len(_decode(Path(fast))) == 4
        # (and of even sides, whose noise made B-frames: seed 1 lost every frame)
        noise = np.random.default_rng(1).integers(0, 256, (11, 20, 22, 3), dtype=np.uint8)
        even = gym_recording.Episode(
            np.zeros((11, 1)), np.zeros(10), np.zeros(10), render_frames=noise
        )
        for fps in (2000, 1_000_000):
            assert len(_decode(Path(even.to_video(tmp_path / f"even{fps}.mp4", fps=fps)))) == 11


def test_to_video_refuses_a_frame_rate_under_one_frame_in_1001_seconds(tmp_path: Path) -> None:
    """A video's rate is a fraction of denominator at most 1001: fps=1/2000 was written at
    1/1001 fps (its frames shown for 1001 s, not 2000 s), silently. Refused, saying the
    allowed range, and nothing is written; 1/1001 itself is written at that rate."""
    av = pytest.importorskip("av")
    frames = np.full((3, 16, 16, 3), 100, np.uint8)
    ep = gym_recording.Episode(np.zeros((3, 1)), np.zeros(2), np.zeros(2), render_frames=frames)
    for fps in (1 / 2000, 1 / 1002, 1e-9):
        with pytest.raises(gym_recording.ExportError, match=r"at least 1/1001 \(one frame in"):
            ep.to_video(tmp_path / "slow.mp4", fps=fps)
    assert os.listdir(tmp_path) == []
    path = ep.to_video(tmp_path / "slowest.mp4", fps=1 / 1001)
    with av.open(path) as container:
        assert container.streams.video[0].average_rate == Fraction(1, 1001)
    assert len(_decode(Path(path))) == 3


def test_to_video_refuses_frames_wider_than_h264_takes(tmp_path: Path) -> None:
    """libx264 encodes at most 16,384 pixels a side: a wider frame (a panorama) raised FFmpeg's
    own error, and the command line printed its traceback."""
    pytest.importorskip("av")
    frames = np.zeros((2, 16, 16386, 3), np.uint8)
    wide = gym_recording.Episode(np.zeros((2, 1)), np.zeros(1), np.zeros(1), render_frames=frames)
    with pytest.raises(gym_recording.ExportError, match=r"16386x16 pixels as H\.264"):
        wide.to_video(tmp_path / "wide.mp4")
    assert os.listdir(tmp_path) == []
    edge = gym_recording.Episode(
        np.zeros((2, 1)), np.zeros(1), np.zeros(1), render_frames=frames[:, :, :16384]
    )
    assert len(_decode(Path(edge.to_video(tmp_path / "edge.mp4")))) == 2


def test_cli_exports_one_video_per_episode(tmp_path: Path) -> None:
    pytest.importorskip("av")
    directory = tmp_path / "rec"
    with TraceRecordingWrapper(_cartpole(), directory, record_render=lambda i: i != 1) as env:
        _run(env, [0, 1, 2], max_steps=6)
    out = tmp_path / "videos"
    done = subprocess.run(
        [sys.executable, "-m", "gym_recording", "export", str(directory), "--to", "mp4", str(out)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONWARNINGS": "default"},
    )
    assert done.returncode == 0, done.stderr
    assert "1 of 3 episodes have no rendered frames" in done.stderr
    names = sorted(p.name for p in out.iterdir())
    assert names == ["episode-000000.mp4", "episode-000002.mp4"]
    with gym_recording.load(directory) as rec:
        for name, ep in zip(names, (rec[0], rec[2]), strict=True):
            assert len(_decode(out / name)) == ep.length + 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", LossyExportWarning)
        with pytest.raises(LossyExportWarning):
            export(directory, to="mp4", out=tmp_path / "again")
    assert not (tmp_path / "again").exists()
    # A source that is no recording: refused before any directory of the output is made.
    with pytest.raises(gym_recording.TraceFormatError):
        export(tmp_path / "no-such-dir", to="mp4", out=tmp_path / "made" / "videos")
    assert not (tmp_path / "made").exists()


def test_npz_export_carries_the_frames_and_parquet_says_it_does_not(tmp_path: Path) -> None:
    """npz holds every episode's frames, indexed as the observations are; parquet, which
    has one row per step, leaves them out and says so."""
    directory = tmp_path / "rec"
    with TraceRecordingWrapper(_cartpole(), directory, record_render=True) as env:
        _run(env, [1, 2], max_steps=5)
    path = export(directory, to="npz", out=tmp_path / "out.npz")
    data = np.load(path)
    with gym_recording.load(directory) as rec:
        for e, ep in enumerate(rec):
            o = data["observation_starts"][e]
            np.testing.assert_array_equal(
                data["render_frames"][o : o + ep.length + 1], ep.render_frames
            )
    pytest.importorskip("pyarrow")
    with pytest.warns(LossyExportWarning, match="rendered frames of 2 episodes"):
        export(directory, to="parquet", out=tmp_path / "out.parquet")


def test_compress_and_decompress_carry_the_frames(tmp_path: Path) -> None:
    """`gym-recording compress` / `decompress` copy the rendered frames too, to the byte."""
    from gym_recording.tools.recode import recode

    raw = tmp_path / "raw"
    with TraceRecordingWrapper(_cartpole(), raw, record_render=True) as env:
        _run(env, [4], max_steps=6)
    recode(raw, tmp_path / "z", compression="zstd")
    recode(tmp_path / "z", tmp_path / "back", compression=None)
    (batch,) = (tmp_path / "z").glob("*.ep*.json")
    assert json.loads(batch.read_text())["episodes"][0]["render_frames"]["codec"] == "zstd"
    with gym_recording.load(raw) as a, gym_recording.load(tmp_path / "back") as b:
        np.testing.assert_array_equal(a[0].render_frames, b[0].render_frames)
        assert a[0].render_fps == b[0].render_fps == 50.0


def test_frames_keep_batches_at_their_size_among_episodes_without_frames(tmp_path: Path) -> None:
    """Batches of episodes without frames size the next ones by their small steps; frames
    still cut a batch at its size (1.25x batch_bytes of arrays, raw)."""
    rec = TraceRecording(tmp_path, batch_bytes=20_000)
    frame = np.zeros((16, 16, 3), np.uint8)

    def episode(steps: int, frames: bool) -> None:
        rec.add_reset(np.zeros(2, np.float32), render_frame=frame if frames else None)
        for t in range(steps):
            f = np.full((16, 16, 3), t % 251, np.uint8) if frames else None
            rec.add_step(0, np.ones(2, np.float32), 1.0, render_frame=f)

    episode(5, True)
    for _ in range(40):
        episode(30, False)
    episode(3000, True)
    rec.close()
    blobs = [p.stat().st_size for p in tmp_path.glob("*.bin")]
    assert max(blobs) <= 1.25 * 20_000 + 4 * 1024
    with gym_recording.load(tmp_path) as r:
        last = r[len(r) - 1]
        assert last.length == 3000
        assert last.render_frames[1:, 0, 0, 0].tolist() == [t % 251 for t in range(3000)]


@pytest.mark.parametrize("stream", [True, False])
def test_compressed_frames_are_the_same_streamed_or_compressed_with_their_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    """A compressed recording compresses its frames on a thread as they come, or (the plain
    path, record/frames.py's STREAM off: the reason this test reaches into the record
    layer) with the rest of their batch: the same episodes either way, across an episode
    cut into parts (more frames than a batch holds), episodes without frames, a frame of
    one observation only, and a new frame size."""
    from gym_recording.record import frames as frame_stores

    monkeypatch.setattr(frame_stores, "STREAM", stream)
    big, small = (64, 64, 3), (8, 8, 3)  # (a compressed batch holds 6,826 frames of 12 KiB)

    def frame(t: int, shape: tuple[int, ...]) -> np.ndarray:
        f = np.zeros(shape, np.uint8)
        f[0, 0, 0], f[-1, -1, 2] = t % 251, t // 251
        return f

    plan = [(3, big), (0, big), (2, None), (7_000, big), (1, None), (5, small), (4, big)]
    rec = TraceRecording(tmp_path, compression="zstd")
    for steps, shape in plan:
        rec.add_reset(np.zeros(1), render_frame=None if shape is None else frame(0, shape))
        for t in range(1, steps + 1):
            f = None if shape is None else frame(t, shape)
            rec.add_step(0, np.full(1, t), 0.0, render_frame=f)
    rec.close()
    objects = [
        e for p in tmp_path.glob("*.ep*.json") for e in json.loads(p.read_text())["episodes"]
    ]
    assert max(e.get("part", 0) for e in objects) >= 1  # the long episode is in parts
    assert all(e["render_frames"]["codec"] == "zstd" for e in objects if "render_frames" in e)
    with gym_recording.load(tmp_path) as r:
        assert [ep.length for ep in r] == [steps for steps, _ in plan]
        for ep, (steps, shape) in zip(r, plan, strict=True):
            if shape is None:
                assert ep.render_frames is None
                continue
            want = np.stack([frame(t, shape) for t in range(steps + 1)])
            np.testing.assert_array_equal(ep.render_frames, want)
    assert gym_recording.verify(tmp_path).ok


def test_frames_of_an_ndarray_subclass_are_stored_as_arrays(tmp_path: Path) -> None:
    class Frame(np.ndarray):
        pass

    with TraceRecording(tmp_path) as rec:
        rec.add_reset(np.zeros(1), render_frame=np.full((4, 5, 3), 1, np.uint8).view(Frame))
        rec.add_step(0, np.ones(1), 0.0, render_frame=np.full((4, 5, 3), 2, np.uint8))
        rec.add_step(0, np.ones(1), 0.0, render_frame=np.full((4, 5, 3), 3, np.uint8).view(Frame))
    with gym_recording.load(tmp_path) as r:
        assert type(r[0].render_frames) is np.ndarray
        assert r[0].render_frames[:, 0, 0, 0].tolist() == [1, 2, 3]


def test_vector_render_failure_cuts_the_rendered_episodes_and_recording_goes_on(
    tmp_path: Path,
) -> None:
    """A render() that raises in a vector step ends each rendered episode at its last
    recorded step and is raised; the steps after it are recorded, frames aligned."""
    failed: list[int] = []

    def frame(t: int) -> np.ndarray:
        if t == 2 and not failed:
            failed.append(t)
            raise RuntimeError("render failed")
        return np.full((4, 5, 3), t, np.uint8)

    envs = gym.vector.SyncVectorEnv([lambda: _Frames(frame), lambda: _Frames(frame)])
    with TraceRecordingVectorWrapper(envs, tmp_path, record_render=True) as venv:
        venv.reset(seed=0)
        venv.step(np.array([0, 0]))
        with pytest.raises(RuntimeError, match="render failed"):
            venv.step(np.array([0, 0]))
        for _ in range(8):
            venv.step(np.array([0, 0]))
    with gym_recording.load(tmp_path) as rec:
        episodes = list(rec)
    # cut at step 1; two whole episodes; two begun by the last step's autoreset
    assert sorted(ep.length for ep in episodes) == [0, 0, 1, 1, 4, 4]
    for ep in episodes:
        assert ep.render_frames[:, 0, 0, 0].tolist() == list(range(ep.length + 1))
        np.testing.assert_array_equal(ep.observations[1:, 0], np.arange(1, ep.length + 1))


def _interrupt_once_stalled(rec: TraceRecording, go: Any) -> None:
    """Ctrl-C the main thread once ``rec``'s steps stop (it waits in a stalled compressor),
    then let the compressor go on (``go``, a threading.Event)."""
    import _thread
    import threading
    import time

    def interrupt() -> None:
        steps = -1
        while rec.steps != steps:
            steps = rec.steps
            time.sleep(0.3)
        _thread.interrupt_main()
        go.set()

    threading.Thread(target=interrupt, daemon=True).start()


def test_an_interrupt_while_waiting_for_the_compressor_keeps_every_step_with_its_frame(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C lands where the stepping thread waits: in the compressor (zstd's input
    buffers full), which takes a step's frame once the step's values are stored. The frame
    is then held back, copied, and compressed later: no step is recorded without its
    frame, and what was recorded reads back. (The codec's FrameStream is made to stall from
    its 20th frame on: the reason this test reaches into the format layer.)"""
    import threading

    from gym_recording.format import codec

    go = threading.Event()
    add = codec.FrameStream.add
    calls = [0]

    def stalled(self: Any, data: Any) -> None:
        calls[0] += 1
        if calls[0] >= 20:
            go.wait()
        add(self, data)

    monkeypatch.setattr(codec.FrameStream, "add", stalled)
    rec = TraceRecording(tmp_path, compression="zstd")
    frame = np.zeros((64, 64, 3), np.uint8)

    _interrupt_once_stalled(rec, go)
    rec.add_reset(np.zeros(1), render_frame=frame)
    with pytest.raises(KeyboardInterrupt):
        for t in range(1, 1000):
            frame[0, 0, 0] = t
            rec.add_step(0, np.full(1, float(t)), 0.0, render_frame=frame)
    rec.close()
    assert gym_recording.verify(tmp_path).ok
    with gym_recording.load(tmp_path) as r:
        (ep,) = list(r)
        assert 0 < ep.length < 999
        assert ep.render_frames[:, 0, 0, 0].tolist() == list(range(ep.length + 1))
        assert ep.observations[:, 0].tolist() == list(range(ep.length + 1))


def test_an_interrupt_in_the_observations_compressor_keeps_the_frame_of_its_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compressed recording streams image observations as it streams frames. Ctrl-C in
    the wait for the observation's compressor, at the end of a step: that step's frame is
    taken from the env too (copied), before the env draws the next into the same buffer,
    and the recording goes on. (The codec's FrameStream is made to stall once: the reason
    this test reaches into the format layer.)"""
    import threading

    from gym_recording.format import codec

    obs = np.zeros((64, 64, 3), np.uint8)  # (12 KiB: streamed)
    frame = np.zeros((48, 48, 3), np.uint8)  # (one buffer each, drawn again every step)
    go = threading.Event()
    add = codec.FrameStream.add
    seen = [0]

    def stalled(self: Any, data: Any) -> None:
        if memoryview(data).nbytes == obs.nbytes:
            seen[0] += 1
            if seen[0] == 10:
                go.wait()
        add(self, data)

    monkeypatch.setattr(codec.FrameStream, "add", stalled)
    rec = TraceRecording(tmp_path, compression="zstd")

    _interrupt_once_stalled(rec, go)
    rec.add_reset(obs, render_frame=frame)
    t = 0
    with pytest.raises(KeyboardInterrupt):
        for t in range(1, 1000):
            obs[...], frame[...] = t, t
            rec.add_step(0, obs, 0.0, render_frame=frame)
    for u in range(t + 1, t + 4):  # (the user goes on)
        obs[...], frame[...] = u, u
        rec.add_step(0, obs, 0.0, render_frame=frame)
    rec.close()
    assert gym_recording.verify(tmp_path).ok
    with gym_recording.load(tmp_path) as r:
        (ep,) = list(r)
    assert ep.length == 12  # (the interrupted step was stored: it is kept)
    assert ep.observations[:, 0, 0, 0].tolist() == list(range(13))
    assert ep.render_frames[:, 0, 0, 0].tolist() == list(range(13))
