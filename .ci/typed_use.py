"""A user's script, type-checked with ``mypy --strict`` by ``.ci/run``: the API's types infer.

Nothing runs it (its code is in a function nobody calls).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

import gym_recording
from gym_recording import TraceRecordingVectorWrapper, TraceRecordingWrapper


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
