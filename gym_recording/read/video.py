"""Episodes as video files: frames encoded with PyAV (FFmpeg), the ``video`` extra."""

from __future__ import annotations

import math
import os
from fractions import Fraction
from typing import Any

import numpy as np

from gym_recording._errors import ExportError
from gym_recording._optional import require
from gym_recording.storage.local import atomic_output

__all__ = ["DEFAULT_FPS", "write_video"]

#: The frame rate of a video of frames whose env declared none.
DEFAULT_FPS = 30.0
#: The most pixels a side of a frame that libx264 encodes.
MAX_SIDE = 16384


def _rgb(frames: np.ndarray) -> np.ndarray:
    """``[T, H, W, C]`` uint8 frames (C is 1, 3 or 4) as RGB ``[T, H, W, 3]``."""
    c = frames.shape[3]
    if c == 3:
        return frames
    if c == 4:
        return frames[..., :3]
    return np.repeat(frames, 3, axis=3)


def write_video(
    frames: np.ndarray, path: str | os.PathLike[str], fps: float, *, overwrite: bool = False
) -> str:
    """Encode ``frames`` (``uint8[T, H, W, C]``) as an H.264 MP4 at ``path``, atomically.

    Every frame becomes one video frame of the frames' size, shown for ``1 / fps`` s:
    4:2:0 chroma where both sides are even (what every player plays), 4:4:4 otherwise (odd
    sides cannot be 4:2:0), without B-frames.

    Returns:
        ``path``.

    Raises:
        ExportError: a path not ending in ``.mp4``, no frames, frames that are not pictures
            (or more than 16,384 pixels a side), a frame rate that is not a number of at
            least 1/1001, or what else FFmpeg refuses (nothing is written then).
        OutputExistsError: ``path`` exists and ``overwrite`` is false.
        DependencyNotInstalled: PyAV is missing (the ``video`` extra).
    """
    path = os.fspath(path)
    if not path.lower().endswith(".mp4"):
        msg = f"expected a path ending in .mp4 (an H.264 MP4 is written), got {path!r}"
        raise ExportError(msg)
    av: Any = require("av", "video", "writing videos")
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.dtype != np.uint8 or frames.shape[3] not in (1, 3, 4):
        msg = f"expected uint8 frames [T, H, W, C] (C 1, 3 or 4), got {frames.dtype}{frames.shape}"
        raise ExportError(msg)
    if not len(frames) or not (frames.shape[1] and frames.shape[2]):
        msg = f"cannot write a video of no frames or empty frames: {list(frames.shape)}"
        raise ExportError(msg)
    number = not isinstance(fps, bool) and isinstance(fps, (int, float, np.integer, np.floating))
    # (the rate is a fraction of denominator at most 1001: a slower one would be written at
    # another rate, 1/1001 for 1/2000, or at none)
    if not (number and 1 / 1001 <= fps < math.inf):
        msg = (
            "expected fps to be a positive number of at least 1/1001 (one frame in 1001 s), "
            f"got {fps!r}"
        )
        raise ExportError(msg)
    rate = Fraction(float(fps)).limit_denominator(1001)
    frames = _rgb(frames)
    h, w = frames.shape[1:3]
    if max(h, w) > MAX_SIDE:
        msg = (
            f"cannot write frames of {w}x{h} pixels as H.264 (libx264 takes at most "
            f"{MAX_SIDE} a side); export the frames to npz instead"
        )
        raise ExportError(msg)
    try:
        with (
            atomic_output(path, overwrite=overwrite, suffix=".mp4") as tmp,
            av.open(tmp, mode="w", format="mp4") as container,
        ):
            stream = container.add_stream("libx264", rate=rate)
            stream.width, stream.height = w, h
            even = h % 2 == 0 and w % 2 == 0
            stream.pix_fmt = "yuv420p" if even else "yuv444p"
            # (with B-frames, a rate past ~1,000 fps muxes frames a decoder drops: none)
            stream.options = {"crf": "18", "preset": "veryfast", "bf": "0"}
            for t, frame in enumerate(frames):
                vf = av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24")
                vf.pts = t
                vf.time_base = 1 / rate
                container.mux(stream.encode(vf))
            container.mux(stream.encode(None))
    except av.FFmpegError as exc:  # (what FFmpeg refuses of these frames: nothing is left)
        msg = f"FFmpeg could not encode {w}x{h} frames at {float(rate):g} fps into {path!r}: {exc}"
        raise ExportError(msg) from exc
    return path
