"""The recording buffer, :class:`TraceRecording`, under its original import path.

Kept for code written against the original gym-recording (``from gym_recording.recording
import TraceRecording``); it lives in :mod:`gym_recording.record.recording`.
"""

from gym_recording.record.recording import TraceRecording

__all__ = ["TraceRecording"]
