"""The loops every benchmark drives an env with (``bench.py``, ``instructions.py``).

They import only gymnasium's env API and NumPy, so that ``instructions.py`` can drive another
tree of gym-recording (through ``PYTHONPATH``) with the same loop.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: The episode length of the single-env workloads (``gym.make``'s ``max_episode_steps``).
EPISODE_STEPS = 200


def drive(env: Any, action: Any, steps: int, alternate: bool = False) -> None:
    """The training loop every contender runs: step, reset at episode end."""
    env.reset(seed=0)
    step, reset = env.step, env.reset
    a0, a1 = action, (1 - action if alternate else action)
    for i in range(steps):
        _, _, terminated, truncated, _ = step(a0 if i & 1 else a1)
        if terminated or truncated:
            reset()


def drive_vector(venv: Any, steps: int) -> None:
    """A vector env's loop: every sub-env's action alternates, step by step."""
    venv.reset(seed=0)
    actions = np.ones(venv.num_envs, np.int64)
    for i in range(steps):
        actions[:] = i & 1
        venv.step(actions)
