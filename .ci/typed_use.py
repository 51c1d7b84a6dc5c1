"""A user's script, type-checked with ``mypy --strict`` by ``.ci/run``: the API's types infer.

Nothing runs it (its code is in a function nobody calls).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

import gym_recording
from gym_recording import TraceRecording, TraceRecordingVectorWrapper, TraceRecordingWrapper


class Mine(TraceRecordingWrapper[np.ndarray, int]):
    """A user's subclass: ``with`` (and construction) keep its type."""

    def every(self) -> int:
        """How often it records."""
        return 10


def user_script() -> None:
    """Record, then read: what the README shows."""
    env = TraceRecordingWrapper(gym.make("CartPole-v1"), "traces/")
    env.close()
    with TraceRecordingWrapper(gym.make("CartPole-v1"), compression="zstd") as recorded:
        obs, info = recorded.reset(seed=0)
    envs = TraceRecordingVectorWrapper(gym.make_vec("CartPole-v1", 2), "traces/")
    envs.close()
    with gym_recording.load("traces/") as rec:
        returns: list[float] = [ep.total_reward for ep in rec]
        first: np.ndarray = rec[0].rewards
    print(obs, info, returns, first)


def subclasses_and_results() -> None:
    """A subclass keeps its type through ``with``; indices may be numpy integers.

    A replay's and a player's results are their own types.
    """
    with Mine(gym.make("CartPole-v1"), "traces/") as mine:
        period: int = mine.every()
    with TraceRecordingVectorWrapper(gym.make_vec("CartPole-v1", 2), "traces/") as envs:
        n: int = envs.num_envs
    with TraceRecording("traces/") as buffer:
        count: int = buffer.episode_count
    with gym_recording.load("traces/") as rec:
        best = rec[np.argmax([ep.total_reward for ep in rec])]
        reproduced: bool = best.replay(render=False).reproduced
        frames: int = best.show().frames
    print(period, n, count, reproduced, frames)
