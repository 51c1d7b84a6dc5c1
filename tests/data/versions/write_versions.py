"""Write this folder's recordings with the gym-recording found on ``sys.path`` (see README.md).

Run from the repository's root with an earlier release's package first on the path::

    git archive <commit> | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old:tests python tests/data/versions/write_versions.py tests/data/versions/2.0

It records each case the installed version can write (``compression`` needs format 2.1,
``record_render`` 2.2), then reads every case back with that same version's reader and
writes ``expected.json``: what that reader returned, as :func:`version_digest.digest` gives
it. A later reader must return the same.
"""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from version_digest import recording_digest

import gym_recording
from gym_recording.wrappers import TraceRecordingVectorWrapper, TraceRecordingWrapper


class SpacesEnv(gym.Env):  # type: ignore[type-arg]
    """Composite and odd spaces, infos of every kind, episodes of 0 to 7 steps."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self) -> None:
        self.observation_space = spaces.Dict(
            {
                "pos": spaces.Box(-1.0, 1.0, (3,), np.float64),
                "grid": spaces.Box(0, 255, (5, 5), np.uint8),
                "pair": spaces.Tuple((spaces.Discrete(3), spaces.MultiDiscrete([2, 3]))),
                "bits": spaces.MultiBinary(4),
                "name": spaces.Text(6),
            }
        )
        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self._t = 0
        self._limit = 0

    def _obs(self) -> dict[str, Any]:
        r = self.np_random
        return {
            "pos": r.uniform(-1, 1, 3),
            "grid": r.integers(0, 256, (5, 5), dtype=np.uint8),
            "pair": (int(r.integers(3)), r.integers(0, (2, 3)).astype(np.int64)),
            "bits": r.integers(0, 2, 4).astype(np.int8),
            "name": "".join(r.choice(list("abcxyz"), int(r.integers(1, 7)))),
        }

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        self._t, self._limit = 0, int(self.np_random.integers(0, 8))
        return self._obs(), {"level": (options or {}).get("level", 0), "note": "start"}

    def step(self, action: Any) -> Any:
        self._t += 1
        info = {
            "x": float(self.np_random.normal()),
            "count": self._t,
            "vec": self.np_random.normal(size=2),
            "tag": ["a", "b"][self._t % 2],
            "nested": {"ok": bool(self._t % 3), "none": None},
        }
        done = self._t >= self._limit
        return self._obs(), float(self._t) * 0.5, done and self._t % 2 == 0, done, info


def _supports(cls: type, name: str) -> bool:
    return name in inspect.signature(cls.__init__).parameters


def _drive(env: Any, episodes: int, seed: int, options: Any = None) -> None:
    """``episodes`` episodes, each until it ends, with actions from a seeded generator."""
    env.action_space.seed(seed)
    for k in range(episodes):
        env.reset(seed=seed + k if k % 2 == 0 else None, options=options if k == 1 else None)
        done = False
        while not done:
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            done = terminated or truncated
    env.close()


def _cartpole(d: Path, **kw: Any) -> None:
    env = gym.make("CartPole-v1", max_episode_steps=30, **kw.pop("make", {}))
    _drive(TraceRecordingWrapper(env, str(d), **kw), 3, seed=7)


def _spaces(d: Path) -> None:
    env = TraceRecordingWrapper(SpacesEnv(), str(d), record_infos=True, metadata={"case": "spaces"})
    _drive(env, 5, seed=3, options={"level": 2})


def _parts(d: Path) -> None:
    """One episode longer than a batch: written in parts (``continues``)."""
    env = gym.make("Pendulum-v1", max_episode_steps=120)
    env = TraceRecordingWrapper(env, str(d), batch_bytes=1024)
    _drive(env, 2, seed=11)


def _vector(d: Path) -> None:
    """Two sub-envs, each its own writer."""
    envs = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync")
    env = TraceRecordingVectorWrapper(envs, str(d))
    env.action_space.seed(5)
    env.reset(seed=[5, 6])
    for _ in range(40):
        env.step(env.action_space.sample())
    env.close()


def main(out: Path) -> None:
    cases: dict[str, Any] = {
        "cartpole": _cartpole,
        "spaces": _spaces,
        "parts": _parts,
        "vector": _vector,
    }
    if _supports(TraceRecordingWrapper, "compression"):
        cases["zstd"] = lambda d: _cartpole(d, compression="zstd")
    if _supports(TraceRecordingWrapper, "record_render"):
        cases["render"] = lambda d: _cartpole(
            d, compression="zstd", record_render=True, make={"render_mode": "rgb_array"}
        )
    expected: dict[str, Any] = {}
    for name, write in cases.items():
        d = out / name
        if d.exists():
            raise SystemExit(f"{d} exists: write a version's cases into an empty folder")
        write(d)
        with gym_recording.load(str(d)) as rec:
            expected[name] = recording_digest(rec)
    doc = {"gym_recording": gym_recording.__version__, "cases": expected}
    with open(out / "expected.json", "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
