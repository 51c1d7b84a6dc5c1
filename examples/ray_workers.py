"""Ray workers record CartPole into one shared location; a Ray Data pipeline reads it all.

Each worker is a Ray task that wraps its own env with ``TraceRecordingWrapper`` and writes into
the same location: writers never collide (each has its own writer id), and a reader sees every
worker's complete batches. Then ``gym_recording.ray.read_traces`` reads the recording in
parallel, one read task per batch file, and a small pipeline computes per-worker statistics
and the mean observation of the steps that ended an episode.

Run (``pip install "gym-recording[ray]"``; about 20 s, most of it starting Ray)::

    python examples/ray_workers.py                        # a fresh local directory
    python examples/ray_workers.py s3://bucket/prefix     # any location every worker reaches

For ``s3://`` also install the ``remote`` extra; credentials and endpoint come from the usual
AWS configuration (``AWS_ENDPOINT_URL``, ``AWS_PROFILE`` ...). ``memory://`` does not work
here: it is private to each process.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import defaultdict
from typing import Any

import gymnasium as gym
import numpy as np
import ray

import gym_recording
from gym_recording.ray import read_traces
from gym_recording.wrappers import TraceRecordingWrapper


@ray.remote
def record_worker(location: str, worker: int, episodes: int) -> tuple[str, int]:
    """Record ``episodes`` CartPole episodes with a noisy balancing policy; return the writer."""
    env = TraceRecordingWrapper(
        gym.make("CartPole-v1"), location, metadata={"worker": worker}, batch_bytes=20_000
    )
    rng = np.random.default_rng(worker)
    steps = 0
    for e in range(episodes):
        obs, _ = env.reset(seed=1000 * worker + e)
        done = False
        while not done:
            lean = obs[2] + 0.5 * obs[3]
            action = int(lean > 0) if rng.random() > 0.1 * worker else int(rng.integers(2))
            obs, _, terminated, truncated, _ = env.step(action)
            done = terminated or truncated
            steps += 1
    env.close()
    return env.recording.writer_id, steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("location", nargs="?", help="shared directory or URL (default: temp dir)")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--episodes", type=int, default=5, help="episodes per worker")
    args = parser.parse_args()
    location = args.location or tempfile.mkdtemp(prefix="gym-recording-ray-")

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False

    t0 = time.time()
    results = ray.get(
        [record_worker.remote(location, w, args.episodes) for w in range(args.workers)]
    )
    steps = sum(s for _, s in results)
    elapsed = time.time() - t0
    print(f"{len(results)} workers recorded {steps} steps into {location} ({elapsed:.1f} s)")

    # Episodes: one row each; a pipeline of per-row transforms, then per-worker totals.
    episodes = read_traces(location).map(
        lambda row: {
            "writer": row["writer"],
            "length": row["length"],
            "total_reward": row["total_reward"],
            "max_angle": float(np.max(np.abs(row["observations"][:, 2]))),
        }
    )
    per_writer: dict[str, list[float]] = defaultdict(list)
    max_angle = 0.0
    for batch in episodes.iter_batches(batch_size=256):
        for writer, ret, angle in zip(
            batch["writer"], batch["total_reward"], batch["max_angle"], strict=True
        ):
            per_writer[str(writer)].append(float(ret))
            max_angle = max(max_angle, float(angle))
    for writer, _ in results:
        returns = per_writer[writer]
        print(f"  writer {writer}: {len(returns)} episodes, mean return {np.mean(returns):.1f}")
    print(f"  largest pole angle seen: {max_angle:.3f} rad")

    # Steps: one row each, with obs and next_obs as tensor columns; keep the episodes' ends.
    ends = read_traces(location, per="step").map_batches(_ends, batch_format="numpy")
    last_obs = [b["next_obs"] for b in ends.iter_batches(batch_size=None) if len(b["next_obs"])]
    if last_obs:
        stacked = np.concatenate(last_obs)
        print(f"  {len(stacked)} terminal steps; mean final observation {stacked.mean(0).round(3)}")

    # The same numbers from the plain Python reader.
    with gym_recording.load(location) as rec:
        total = sum(ep.total_reward for ep in rec)
        print(
            f"Python reader: {len(rec)} episodes, total reward {total:.0f}; Ray Data: "
            f"{sum(len(v) for v in per_writer.values())} episodes, total reward "
            f"{sum(sum(v) for v in per_writer.values()):.0f}"
        )
    print(f"done in {time.time() - t0:.1f} s")
    ray.shutdown()


def _ends(batch: dict[str, Any]) -> dict[str, Any]:
    """Keep the steps that terminated an episode."""
    keep = batch["terminated"]
    return {k: v[keep] for k, v in batch.items()}


if __name__ == "__main__":
    main()
