"""Record CartPole with its rendered frames, compressed, and write each episode as a video.

python examples/render_video.py [DIRECTORY] [--episodes N]

The videos go beside the recording, in ``DIRECTORY-videos``.

Needs pygame (CartPole's rendering: ``pip install "gymnasium[classic-control]"``) and PyAV
for the videos (``pip install "gym-recording[video]"``).
"""

from __future__ import annotations

import argparse
import os
import tempfile

import gymnasium as gym

import gym_recording
from gym_recording.wrappers import TraceRecordingWrapper


def main(directory: str, episodes: int) -> None:
    env = gym.make("CartPole-v1", render_mode="rgb_array")
    with TraceRecordingWrapper(env, directory, record_render=True, compression="zstd") as env:
        env.action_space.seed(0)
        for i in range(episodes):
            env.reset(seed=i)
            done = False
            while not done:
                _, _, terminated, truncated, _ = env.step(env.action_space.sample())
                done = terminated or truncated
    on_disk = sum(e.stat().st_size for e in os.scandir(directory) if e.is_file())
    with gym_recording.load(directory) as rec:
        raw = sum(ep.render_frames.nbytes for ep in rec if ep.render_frames is not None)
        print(f"recorded {len(rec)} episode(s) to {directory}")
        ratio = raw / on_disk
        print(
            f"frames: {raw / 1e6:.1f} MB raw; on disk: {on_disk / 1e6:.2f} MB ({ratio:,.0f}x less)"
        )
        videos = directory.rstrip("/") + "-videos"
        os.makedirs(videos, exist_ok=True)
        for ep in rec:
            path = ep.to_video(os.path.join(videos, f"episode-{ep.index}.mp4"), overwrite=True)
            print(f"episode {ep.index}: {ep.length + 1} frames at {ep.render_fps:g} fps -> {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "directory", nargs="?", help="where to record (default: a new temporary folder)"
    )
    parser.add_argument("--episodes", type=int, default=3, help="episodes to record (default: 3)")
    args = parser.parse_args()
    main(args.directory or tempfile.mkdtemp(prefix="gym-recording-"), args.episodes)
