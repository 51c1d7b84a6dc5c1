"""What the exporters share: the recording they read, episode by episode."""

from __future__ import annotations

import os
from collections.abc import Iterator

from gym_recording._errors import ExportError
from gym_recording._progress import progress
from gym_recording.format.limits import fits_int64
from gym_recording.format.names import no_recording
from gym_recording.read.episode import Episode
from gym_recording.read.recording import Recording, load
from gym_recording.storage import is_url


def open_recording(directory: str | os.PathLike[str]) -> Recording:
    """The recording in ``directory``, refused with an :class:`ExportError` if there is none."""
    rec = load(directory)
    if not rec.writers:
        rec.close()
        msg = f"{os.fspath(directory)} {no_recording()}"
        raise ExportError(msg)
    return rec


def source_location(rec: Recording) -> str:
    """Where ``rec`` was read from, for an export's metadata: a URL, or an absolute path."""
    return rec.directory if is_url(rec.directory) else os.path.abspath(rec.directory)


def int64_seed(seed: int | None) -> int | None:
    """``seed`` where an int64 column holds it; else (none, or one past int64) ``None``."""
    return seed if seed is not None and fits_int64(seed) else None


def episodes(rec: Recording, desc: str) -> Iterator[Episode]:
    """The episodes of ``rec``, with a progress bar labelled ``desc`` where one is shown."""
    yield from progress(rec, total=len(rec), desc=desc)


def episodes_text(n: int) -> str:
    """``n`` episodes, in words (``"1 episode"``, ``"2 episodes"``)."""
    return f"{n} episode{'s' * (n != 1)}"
