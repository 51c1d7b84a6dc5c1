"""Environment wrappers that record traces."""

from gym_recording.wrappers._trace_recording import TraceRecordingWrapper
from gym_recording.wrappers._vector import TraceRecordingVectorWrapper

__all__ = ["TraceRecordingVectorWrapper", "TraceRecordingWrapper"]
