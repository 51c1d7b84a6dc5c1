"""Reading traces the original way: :func:`scan_recorded_traces` and :class:`TraceRecordingReader`.

Kept for code written against the original gym-recording; new code should use
:func:`gym_recording.load`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from gym_recording import _format
from gym_recording._reader import load
from gym_recording._storage import Storage, open_storage

__all__ = ["TraceRecordingReader", "scan_recorded_traces"]


def scan_recorded_traces(
    directory: str | os.PathLike[str],
    episode_cb: Callable[[Any, Any, Any], Any] | None = None,
    max_episodes: int | None = None,
) -> None:
    """Call ``episode_cb(observations, actions, rewards)`` for every episode in ``directory``.

    Args:
        directory: The recording directory.
        episode_cb: Called once per episode, in recording order. Raise from it to stop early.
        max_episodes: Stop after this many episodes.

    Raises:
        TraceFormatError: a file of the recording does not follow the format.

    Example:
        >>> import tempfile, numpy as np
        >>> from gym_recording import TraceRecording
        >>> d = tempfile.mkdtemp()
        >>> with TraceRecording(d) as rec:
        ...     rec.add_reset(np.zeros(3))
        ...     rec.add_step(0, np.ones(3), 1.0)
        >>> scan_recorded_traces(d, lambda o, a, r: print(o.shape, a.shape, r.shape))
        (2, 3) (1,) (1,)
    """
    if max_episodes is not None and max_episodes <= 0:
        return
    with load(directory) as rec:
        for n, ep in enumerate(rec, start=1):
            if episode_cb is not None:
                episode_cb(ep.observations, ep.actions, ep.rewards)
            if max_episodes is not None and n >= max_episodes:
                return


class TraceRecordingReader:
    """The original reader's interface: list batches, then read the episodes of one batch.

    Episodes come back as dicts with ``observations``, ``actions``, ``rewards`` and the
    version 2 keys; an episode split across batches comes back as its parts.

    Args:
        directory: The recording directory.

    Example:
        >>> import tempfile, numpy as np
        >>> from gym_recording import TraceRecording
        >>> d = tempfile.mkdtemp()
        >>> with TraceRecording(d) as rec:
        ...     rec.add_reset(np.zeros(3))
        >>> rdr = TraceRecordingReader(d)
        >>> [len(rdr.get_recorded_episodes(b)) for b in rdr.get_recorded_batches()]
        [1]
        >>> rdr.close()
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = os.fspath(directory)
        self._storage: Storage = open_storage(self.directory, create=False)

    def get_recorded_batches(self) -> list[dict[str, Any]]:
        """The batch entries of every manifest in the directory."""
        ret: list[dict[str, Any]] = []
        for name in sorted(self._storage.list_names()):
            if _format.MANIFEST_RE.match(name) is None:
                continue
            path = os.path.join(self.directory, name)
            data = self._storage.read_bytes(name, _format.MAX_MANIFEST_BYTES)
            m = _format.parse_manifest(data, name, path)
            ret.extend(
                {"first": b.first, "len": b.len, "fn": b.fn, "continues": b.continues}
                for b in m.batches
            )
        return ret

    def get_recorded_episodes(self, batch: dict[str, Any]) -> list[dict[str, Any]]:
        """The decoded episodes of one batch entry from :meth:`get_recorded_batches`."""
        if not isinstance(batch, dict):
            msg = f"expected a batch entry dict from get_recorded_batches(), got {batch!r:.60}"
            raise TypeError(msg)
        entry = _format.BatchEntry(
            first=batch.get("first", 0), len=batch.get("len", -1), fn=batch.get("fn", "")
        )
        path = os.path.join(self.directory, str(entry.fn))
        data = self._storage.read_bytes(entry.fn, _format.MAX_BATCH_JSON_BYTES)
        parsed = _format.parse_json(data, path)
        if entry.len < 0 and isinstance(parsed, dict):
            entry = _format.BatchEntry(entry.first, len(parsed.get("episodes") or []), entry.fn)
        objs = _format.decode_batch_episodes(parsed, entry, path)
        ctx = _format.DecodeContext(path, self._storage.map)
        return [_format.decode_episode(o, ctx, f"episodes[{i}]") for i, o in enumerate(objs)]

    def close(self) -> None:
        """Nothing to release: arrays keep their files mapped for as long as they live."""
