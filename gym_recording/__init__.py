"""gym-recording: record every step of a Gymnasium (or Gym) environment, and read it back.

Record by wrapping an env::

    from gym_recording import TraceRecordingWrapper
    env = TraceRecordingWrapper(gymnasium.make("CartPole-v1"), "traces/")

and read with :func:`load`, which returns a sequence of :class:`Episode`. The file format is
specified in FORMAT.md.

This module is the public API. The wrappers are also importable from
:mod:`gym_recording.wrappers`, and code written against the original gym-recording keeps
:mod:`gym_recording.playback`, :mod:`gym_recording.recording` and
:mod:`gym_recording.storage_s3`. The subpackages are
the implementation, in layers: ``format`` (bytes and objects), ``storage`` (atomic files),
``record`` and ``read``, then ``wrappers`` and ``tools``.
"""

from gym_recording._errors import (
    DependencyNotInstalled,
    ExportError,
    LossyExportWarning,
    NoFramesError,
    NoRecordingWarning,
    OutputExistsError,
    ReadError,
    RecordingClosedError,
    RecordingError,
    ReplayMismatchWarning,
    TraceFormatError,
    WriteError,
)
from gym_recording._version import __version__
from gym_recording.format.spaces import UnknownSpace
from gym_recording.format.wire import FORMAT_VERSION
from gym_recording.playback import TraceRecordingReader, scan_recorded_traces
from gym_recording.read.episode import Episode
from gym_recording.read.recording import Recording, load
from gym_recording.read.transitions import iter_transitions
from gym_recording.record.recording import TraceRecording
from gym_recording.tools.verify import VerifyReport, verify
from gym_recording.wrappers import TraceRecordingVectorWrapper, TraceRecordingWrapper

__all__ = [
    "FORMAT_VERSION",
    "DependencyNotInstalled",
    "Episode",
    "ExportError",
    "LossyExportWarning",
    "NoFramesError",
    "NoRecordingWarning",
    "OutputExistsError",
    "ReadError",
    "Recording",
    "RecordingClosedError",
    "RecordingError",
    "ReplayMismatchWarning",
    "TraceFormatError",
    "WriteError",
    "TraceRecording",
    "TraceRecordingReader",
    "TraceRecordingVectorWrapper",
    "TraceRecordingWrapper",
    "UnknownSpace",
    "VerifyReport",
    "__version__",
    "iter_transitions",
    "load",
    "scan_recorded_traces",
    "verify",
]

# Public names say where users import them from (in tracebacks, reprs and docs), as httpx does.
for _name in __all__:
    _obj = globals()[_name]
    if hasattr(_obj, "__module__") and not isinstance(_obj, str):
        _obj.__module__ = __name__
del _name, _obj
