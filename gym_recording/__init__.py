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

import inspect

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
    "TraceRecording",
    "TraceRecordingReader",
    "TraceRecordingVectorWrapper",
    "TraceRecordingWrapper",
    "UnknownSpace",
    "VerifyReport",
    "WriteError",
    "__version__",
    "iter_transitions",
    "load",
    "scan_recorded_traces",
    "verify",
]

# Public names say where users import them from (in tracebacks, reprs and docs), as httpx does;
# so do their classes' methods (which is also where doctest looks for their examples).
for _name in __all__:
    _obj = globals()[_name]
    if not hasattr(_obj, "__module__") or isinstance(_obj, str):
        continue
    for _cls in _obj.__mro__ if isinstance(_obj, type) else ():
        if _cls.__module__.startswith(f"{__name__}.") and globals().get(_cls.__name__) is _cls:
            for _attr in vars(_cls).values():
                _attr = _attr.fget if isinstance(_attr, property) else _attr
                _attr = getattr(_attr, "__func__", _attr)  # (static and class methods)
                if inspect.isfunction(_attr) and _attr.__module__ == _cls.__module__:
                    _attr.__module__ = __name__
    _obj.__module__ = __name__
del _name, _obj, _cls, _attr
