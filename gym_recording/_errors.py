"""The exception hierarchy: every error about a recording is a :class:`RecordingError`.

A wrong argument (a negative ``batch_bytes``, a ``metadata`` that is not a dict, an index
out of range) raises ``TypeError``, ``ValueError`` or ``IndexError``, as Python's own
functions do.

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
    "ReadError",
    "RecordingClosedError",
    "RecordingError",
    "ReplayMismatchWarning",
    "TraceFormatError",
    "WriteError",
]


class RecordingError(Exception):
    """Base class of the errors about a recording: its files, its values, its storage.

    A wrong argument raises ``TypeError``, ``ValueError`` or ``IndexError`` instead (some
    errors here are also a ``ValueError``: :class:`TraceFormatError`, ...).

    Example:
        >>> import gym_recording
        >>> try:
        ...     gym_recording.load("/nonexistent/traces")
        ... except gym_recording.RecordingError as exc:
        ...     print(type(exc).__name__)
        TraceFormatError
    """


class TraceFormatError(RecordingError, ValueError):
    """A trace file does not follow FORMAT.md.

    The message names the file, what was expected and what was found.

    Attributes:
        path: The file (or directory) at fault, or ``None`` if unknown.

    Example:
        >>> import os, tempfile, gym_recording
        >>> d = tempfile.mkdtemp()
        >>> with open(os.path.join(d, "openaigym.trace.0.1.a.manifest.json"), "w") as f:
        ...     _ = f.write("{")
        >>> try:
        ...     gym_recording.load(d)
        ... except gym_recording.TraceFormatError as exc:
        ...     os.path.basename(exc.path or "")
        'openaigym.trace.0.1.a.manifest.json'
    """

    def __init__(self, message: str, path: str | None = None) -> None:
        self.path = path
        if path is not None and path not in message:
            message = f"{path}: {message}"
        super().__init__(message)


class WriteError(RecordingError):
    """A batch's files could not be written (a full disk, an upload refused).

    What they hold stays buffered, and is written at the next flush or ``close()`` (or at
    exit). The call that raises it has recorded what it brought (its step, reset or rows):
    an episode goes on, and a wrapper's env has stepped or reset.

    Example:
        >>> import gym_recording
        >>> issubclass(gym_recording.WriteError, gym_recording.RecordingError)
        True
    """


class ReadError(RecordingError):
    """A recording's storage could not be read now: the network, the credentials, the system.

    The endpoint or its credentials, a file's permissions, too many open files. Not a
    damaged file (that is a :class:`TraceFormatError`): the same read may succeed
    later, and the message names the location and what failed.

    Example:
        >>> import gym_recording
        >>> issubclass(gym_recording.ReadError, gym_recording.TraceFormatError)
        False
    """


class RecordingClosedError(RecordingError):
    """A recording (writer or reader) was used after ``close()``.

    Example:
        >>> import tempfile, numpy as np, gym_recording
        >>> rec = gym_recording.TraceRecording(tempfile.mkdtemp())
        >>> rec.close()
        >>> try:
        ...     rec.add_reset(np.zeros(2))
        ... except gym_recording.RecordingClosedError:
        ...     print("closed")
        closed
    """


class DependencyNotInstalled(RecordingError, ImportError):
    """An optional dependency is missing; the message names the extra to install.

    Example:
        >>> print(DependencyNotInstalled.for_extra("av", "video", "ep.to_video()"))
        ep.to_video() needs the optional dependency 'av', which is not installed;
        run `pip install "gym-recording[video]"`
    """

    @classmethod
    def for_extra(cls, module: str, extra: str, what: str) -> DependencyNotInstalled:
        """Build the error for a missing ``module`` needed by ``what``, installable as ``extra``."""
        return cls(
            f"{what} needs the optional dependency {module!r}, which is not installed; "
            f'run `pip install "gym-recording[{extra}]"`'
        )


class NoFramesError(RecordingError, ValueError):
    """An episode has nothing to show as pictures (no rendered frames, no image observations).

    Example:
        >>> import tempfile, numpy as np, gym_recording
        >>> d = tempfile.mkdtemp()
        >>> with gym_recording.TraceRecording(d) as rec:
        ...     rec.add_reset(np.zeros(2))
        >>> try:
        ...     gym_recording.load(d)[0].frames()
        ... except gym_recording.NoFramesError:
        ...     print("no pictures: record with record_render=True")
        no pictures: record with record_render=True
    """


class ExportError(RecordingError, ValueError):
    """An export or import cannot be done as asked; the message says why.

    Example:
        >>> import tempfile, gym_recording
        >>> from gym_recording.tools.export import export
        >>> try:
        ...     export(tempfile.mkdtemp(), to="csv", out="x.csv")
        ... except gym_recording.ExportError as exc:
        ...     print(exc)
        unknown export format 'csv'; expected one of parquet, minari, npz, mp4
    """


class OutputExistsError(ExportError):
    """The output of an export or import exists already (nothing is overwritten).

    Example:
        >>> import tempfile, gym_recording
        >>> from gym_recording.tools.export import export
        >>> d = tempfile.mkdtemp()
        >>> try:
        ...     export(d, to="npz", out=d)
        ... except gym_recording.OutputExistsError:
        ...     print("exists already")
        exists already
    """


class NoRecordingWarning(UserWarning):
    """A directory opened for reading holds files, but none of a recording (a wrong path?).

    Example:
        >>> import os, tempfile, warnings, gym_recording
        >>> d = tempfile.mkdtemp()
        >>> with open(os.path.join(d, "notes.txt"), "w") as f:
        ...     _ = f.write("not a trace")
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     len(gym_recording.load(d))
        0
        >>> caught[0].category.__name__
        'NoRecordingWarning'
    """


class ReplayMismatchWarning(UserWarning):
    """A replay through the environment did not reproduce the recorded episode.

    Example (an episode reset without a seed does not replay):
        >>> import tempfile, warnings, gymnasium as gym, gym_recording
        >>> d = tempfile.mkdtemp()
        >>> with gym_recording.TraceRecordingWrapper(gym.make("CartPole-v1"), d) as env:
        ...     _ = env.reset()
        ...     _ = env.step(0)
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     gym_recording.load(d)[0].replay(render=False).reproduced
        False
        >>> caught[0].category.__name__
        'ReplayMismatchWarning'
    """


class LossyExportWarning(UserWarning):
    """The target format cannot store the whole recording; the message says what is left out.

    Example:
        >>> import os, tempfile, warnings, numpy as np, gym_recording
        >>> from gym_recording.tools.export import export
        >>> d = tempfile.mkdtemp()
        >>> with gym_recording.TraceRecording(d) as rec:
        ...     rec.add_reset(np.zeros(2), options={"level": 2})
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     _ = export(d, to="npz", out=os.path.join(d, "x.npz"))
        >>> print(caught[0].message)
        npz leaves out the reset options of 1 episode (`export --to minari` keeps what Minari can)
    """
