"""The exception hierarchy: every error gym-recording raises is a :class:`RecordingError`.

Every class here is importable from :mod:`gym_recording`. The warnings gym-recording issues
are here too, so that one ``warnings.filterwarnings`` line can select them.
"""

from __future__ import annotations

__all__ = [
    "DependencyNotInstalled",
    "ExportError",
    "LossyExportWarning",
    "NoFramesError",
    "NoRecordingWarning",
    "OutputExistsError",
    "RecordingClosedError",
    "RecordingError",
    "ReplayMismatchWarning",
    "TraceFormatError",
]


class RecordingError(Exception):
    """Base class of every error raised by gym-recording."""


class TraceFormatError(RecordingError, ValueError):
    """A trace file does not follow FORMAT.md.

    The message names the file, what was expected and what was found.

    Attributes:
        path: The file (or directory) at fault, or ``None`` if unknown.
    """

    def __init__(self, message: str, path: str | None = None) -> None:
        self.path = path
        if path is not None and path not in message:
            message = f"{path}: {message}"
        super().__init__(message)


class RecordingClosedError(RecordingError):
    """A recording (writer or reader) was used after ``close()``."""


class DependencyNotInstalled(RecordingError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""

    @classmethod
    def for_extra(cls, module: str, extra: str, what: str) -> DependencyNotInstalled:
        """Build the error for a missing ``module`` needed by ``what``, installable as ``extra``."""
        return cls(
            f"{what} needs the optional dependency {module!r}, which is not installed; "
            f'run `pip install "gym-recording[{extra}]"`'
        )


class NoFramesError(RecordingError, ValueError):
    """An episode has nothing to show as pictures (no rendered frames, no image observations)."""


class ExportError(RecordingError, ValueError):
    """An export or import cannot be done as asked; the message says why."""


class OutputExistsError(ExportError):
    """The output of an export or import exists already (nothing is overwritten)."""


class NoRecordingWarning(UserWarning):
    """A directory opened for reading holds files, but none of a recording (a wrong path?)."""


class ReplayMismatchWarning(UserWarning):
    """A replay through the environment did not reproduce the recorded episode."""


class LossyExportWarning(UserWarning):
    """The target format cannot store the whole recording; the message says what is left out."""
