"""gym-recording: record every step of a Gymnasium (or Gym) environment, and read it back.

Record by wrapping an env::

    from gym_recording.wrappers import TraceRecordingWrapper
    env = TraceRecordingWrapper(gymnasium.make("CartPole-v1"), "traces/")

and read with :func:`load`, which returns a sequence of :class:`Episode`. The file format is
specified in FORMAT.md.
"""

from gym_recording._errors import (
    DependencyNotInstalled,
    RecordingClosedError,
    RecordingError,
    TraceFormatError,
)
from gym_recording._format import FORMAT_VERSION
from gym_recording._reader import Episode, Recording, load
from gym_recording._transitions import iter_transitions
from gym_recording._version import __version__
from gym_recording.playback import TraceRecordingReader, scan_recorded_traces
from gym_recording.recording import TraceRecording

__all__ = [
    "FORMAT_VERSION",
    "DependencyNotInstalled",
    "Episode",
    "Recording",
    "RecordingClosedError",
    "RecordingError",
    "TraceFormatError",
    "TraceRecording",
    "TraceRecordingReader",
    "__version__",
    "iter_transitions",
    "load",
    "scan_recorded_traces",
]
