"""The record layer: steps collected into a buffer and written in batches.

- :mod:`~gym_recording.record.recording`: :class:`TraceRecording`, the episodes and their parts.
- :mod:`~gym_recording.record.buffer`: where a batch's steps live until they are written.
- :mod:`~gym_recording.record.steps`: the hot path, a wrapper's step into the buffer (and the
  one seam to the optional C step recorder).
- :mod:`~gym_recording.record.writer`: batch naming, sizing, segments, the manifest, and
  when and where each batch is written.
"""
