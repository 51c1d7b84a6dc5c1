"""Read a recording back: random access with ``gym_recording.load``, and the original callback API.

python examples/playback.py DIRECTORY
"""

from __future__ import annotations

import argparse

import numpy as np

import gym_recording
from gym_recording.playback import scan_recorded_traces


def main(directory: str) -> None:
    with gym_recording.load(directory) as rec:
        print(rec)
        print(f"env {rec.env_id}, observation space {rec.observation_space}")
        returns = np.array([ep.total_reward for ep in rec])
        print(f"{len(rec)} episodes, mean return {returns.mean():.1f}, best {returns.max():.0f}")
        best = rec[int(returns.argmax())]  # random access loads one batch only
        print(f"best episode: {best}")
        print(f"  observations {best.observations.shape} {best.observations.dtype}")
        print(f"  first observation {best.observations[0]}, seed {best.seed}")
        print(f"  ended terminated={best.terminated} truncated={best.truncated}")

    # The original gym-recording API keeps working.
    lengths = []
    scan_recorded_traces(directory, lambda obs, actions, rewards: lengths.append(len(rewards)))
    print(f"scan_recorded_traces saw {len(lengths)} episodes, {sum(lengths)} steps")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", help="a recording (a folder of traces, or a URL)")
    main(parser.parse_args().directory)
