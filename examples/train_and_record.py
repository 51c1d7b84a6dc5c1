"""Train a linear CartPole policy by random search while recording every step.

The recording costs one line: ``TraceRecordingWrapper(env, directory)``. Runs in a few seconds.

    python examples/train_and_record.py [DIRECTORY]
"""

from __future__ import annotations

import argparse
import tempfile

import gymnasium as gym
import numpy as np

from gym_recording.wrappers import TraceRecordingWrapper


def run_episode(env: gym.Env, weights: np.ndarray, seed: int) -> float:
    """Play one episode with the linear policy ``weights``; return its return."""
    obs, _ = env.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        action = int(obs @ weights > 0)
        obs, reward, terminated, truncated, _ = env.step(action)
        total += float(reward)
        done = terminated or truncated
    return total


def main(directory: str) -> None:
    rng = np.random.default_rng(0)
    env = TraceRecordingWrapper(
        gym.make("CartPole-v1"), directory, metadata={"algorithm": "random search"}
    )
    best_w, best_ret = np.zeros(4), -np.inf
    with env:
        for it in range(40):
            candidate = best_w + rng.normal(scale=0.1, size=4)
            ret = np.mean([run_episode(env, candidate, seed=100 * it + k) for k in range(3)])
            if ret > best_ret:
                best_w, best_ret = candidate, ret
                print(f"iteration {it:2d}: new best mean return {best_ret:.1f}")
            if best_ret >= 500:
                break
    print(f"traces in {env.directory}")
    print(f"read them back with: python examples/playback.py {env.directory}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "directory", nargs="?", help="where the traces go (default: a new temporary folder)"
    )
    args = parser.parse_args()
    main(args.directory or tempfile.mkdtemp(prefix="cartpole-traces-"))
