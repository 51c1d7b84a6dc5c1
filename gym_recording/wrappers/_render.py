"""What both wrappers do for ``record_render``: which episodes are rendered, and checks."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from gym_recording._errors import RecordingError

__all__ = ["RenderChoice", "check_frames", "render_choice", "render_fps"]

#: Whether episode ``i`` (its index, as ``episode_trigger`` gets it) is rendered.
RenderChoice = Callable[[int], bool]


def _always(_: int) -> bool:
    return True


def render_choice(
    record_render: bool | RenderChoice, env: Any, *, vector: bool
) -> RenderChoice | None:
    """The episodes ``record_render`` renders (``None``: none), once ``env`` is checked.

    Raises:
        TypeError: ``record_render`` is neither a bool nor a callable.
        RecordingError: ``env`` does not render RGB arrays.
    """
    if record_render is False or record_render is None:
        return None
    if record_render is not True and not callable(record_render):
        msg = (
            "expected record_render to be True, False, or a callable taking the episode "
            f"index, got {record_render!r}"
        )
        raise TypeError(msg)
    mode = getattr(env, "render_mode", None)
    metadata = getattr(env, "metadata", None)
    modes: Any = metadata.get("render_modes") if isinstance(metadata, dict) else None
    # Modes declared (gymnasium.Env's default, [], declares none) without rgb_array: the env
    # says it renders no RGB frames (and Gymnasium's env checker would fail its render()).
    unsupported = isinstance(modes, (list, tuple)) and bool(modes) and "rgb_array" not in modes
    if mode != "rgb_array" or unsupported:
        if unsupported:
            fix = f"this one does not (its metadata's render_modes are {list(modes)!r})"
        else:
            make = "gym.make_vec(env_id, num_envs, " if vector else "gym.make(env_id, "
            fix = f'make it with render_mode="rgb_array" ({make}render_mode="rgb_array"))'
        what = "a vector env" if vector else "an env"
        msg = f"record_render needs {what} that renders RGB frames: {fix}; its render_mode is"
        raise RecordingError(f"{msg} {mode!r}")
    return _always if record_render is True else record_render


def render_fps(env: Any) -> float | None:
    """The frame rate ``env`` declares (``metadata["render_fps"]``), if it is a positive number."""
    metadata = getattr(env, "metadata", None)
    value: Any = metadata.get("render_fps") if isinstance(metadata, dict) else None
    if value is None or isinstance(value, bool):
        return None
    try:
        fps = float(value)  # (ints, floats, numpy scalars)
    except (TypeError, ValueError, OverflowError):
        return None
    return fps if math.isfinite(fps) and 0 < fps <= 1e6 else None


def check_frames(frames: Any) -> Any:
    """``frames`` (what ``render()`` returned), unless one is ``None``.

    Raises:
        RecordingError: ``render()`` returned ``None`` (for a sub-env, in a vector env).
    """
    if frames is None or (isinstance(frames, (tuple, list)) and any(f is None for f in frames)):
        msg = (
            "expected render() to return an RGB frame, uint8[H, W, 3], got None; is the env "
            'made with render_mode="rgb_array"?'
        )
        raise RecordingError(msg)
    return frames
