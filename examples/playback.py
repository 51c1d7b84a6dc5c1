"""Read a recording back: random access with ``gym_recording.load``, and the original callback API.

python examples/playback.py DIRECTORY
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

import gym_recording
from gym_recording.playback import scan_recorded_traces


def describe(field: Any) -> str:
    """A field's layout: an array a step, or a dict or tuple of them (Dict and Tuple spaces)."""
    if isinstance(field, np.ndarray):
        return f"{field.dtype}{list(field.shape)}"
    if isinstance(field, dict):
        return "{" + ", ".join(f"{k!r}: {describe(v)}" for k, v in field.items()) + "}"
    if isinstance(field, tuple):
        return "(" + ", ".join(describe(v) for v in field) + ")"
    return f"{len(field)} values, one a step"


def first(field: Any) -> Any:
    """The field's value at the reset."""
    if isinstance(field, dict):
        return {k: first(v) for k, v in field.items()}
    if isinstance(field, tuple):
        return tuple(first(v) for v in field)
    return field[0]


def main(directory: str) -> None:
    with gym_recording.load(directory) as rec:
        print(rec)
        print(f"env {rec.env_id}, observation space {rec.observation_space}")
        returns = np.array([ep.total_reward for ep in rec])
        if not len(returns):
            print("0 episodes")
            return
        print(f"{len(rec)} episodes, mean return {returns.mean():.4g}, best {returns.max():.4g}")
        best = rec[int(returns.argmax())]  # random access loads one batch only
        print(f"best episode: {best}")
        print(f"  observations {describe(best.observations)}, seed {best.seed}")
        print(f"  first observation {first(best.observations)}")
        print(f"  ended terminated={best.terminated} truncated={best.truncated}")

    # The original gym-recording API keeps working.
    lengths = []
    scan_recorded_traces(directory, lambda obs, actions, rewards: lengths.append(len(rewards)))
    print(f"scan_recorded_traces saw {len(lengths)} episodes, {sum(lengths)} steps")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", help="a recording (a folder of traces, or a URL)")
    main(parser.parse_args().directory)
