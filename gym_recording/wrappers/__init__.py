"""Environment wrappers that record traces."""

from gym_recording.wrappers._trace_recording import TraceRecordingWrapper

__all__ = ["TraceRecordingWrapper"]
