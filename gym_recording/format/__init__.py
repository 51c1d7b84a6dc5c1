"""The format layer: bytes ⇄ objects, as FORMAT.md specifies them. No IO happens here.

- :mod:`~gym_recording.format.names`: file names, and how readers find writers (§1).
- :mod:`~gym_recording.format.limits`: the bounds every file is held to (§9).
- :mod:`~gym_recording.format.wire`: the JSON documents as typed structures, and their codec.
- :mod:`~gym_recording.format.arrays`: arrays in blobs (§6.1), laid out and viewed.
- :mod:`~gym_recording.format.values`: values (§6); :mod:`~gym_recording.format.fields`:
  fields (§5) and every walk over one.
- :mod:`~gym_recording.format.batch`: episode objects and batches (§4), encoded and decoded.
- :mod:`~gym_recording.format.manifest`: manifests (§3).
- :mod:`~gym_recording.format.spaces`: observation and action spaces (§7).

It imports nothing of gym-recording but the errors, so that storage, the recorder, the
reader and the tools all build on it.
"""

from gym_recording.format.wire import FORMAT_NAME, FORMAT_VERSION

__all__ = ["FORMAT_NAME", "FORMAT_VERSION"]
