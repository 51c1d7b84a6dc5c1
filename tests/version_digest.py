"""What a reader returned for a recording, as JSON that another version's reader must equal.

Used by ``tests/data/versions/write_versions.py`` (run with an earlier release's package) and by
``tests/test_versions.py`` (today's). Arrays are their dtype, shape and SHA-256; floats are
exact (``float.hex``); containers keep their kind; dict keys are sorted (a dict's key order
is not part of what the format keeps).
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import numpy as np

__all__ = ["digest", "episode_digest", "recording_digest"]

#: Episode attributes left out: where an episode sits in a recording, not what it holds
#: (``index`` counts the writers in the order a directory listing gave them).
SKIPPED = frozenset({"index"})


def digest(x: Any) -> Any:
    """``x`` as JSON: exact, with its types (NumPy's dtypes included)."""
    if isinstance(x, np.ndarray):
        a = np.ascontiguousarray(x)
        return ["ndarray", a.dtype.str, list(a.shape), hashlib.sha256(a.tobytes()).hexdigest()]
    if isinstance(x, np.generic):
        return ["numpy", np.asarray(x).dtype.str, np.asarray(x).tobytes().hex()]
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return x
    if isinstance(x, int):
        return ["int", str(x)]
    if isinstance(x, float):
        return ["float", x.hex()]
    if isinstance(x, dict):
        return [
            "dict",
            [[str(k), digest(v)] for k, v in sorted(x.items(), key=lambda kv: str(kv[0]))],
        ]
    if isinstance(x, (list, tuple)):
        return [type(x).__name__, [digest(v) for v in x]]
    raise TypeError(f"no digest for {type(x).__name__}")


def episode_digest(ep: Any) -> dict[str, Any]:
    """Each attribute of an episode (a dataclass) but those of :data:`SKIPPED`."""
    return {
        f.name: digest(getattr(ep, f.name)) for f in dataclasses.fields(ep) if f.name not in SKIPPED
    }


def recording_digest(rec: Any) -> dict[str, list[dict[str, Any]]]:
    """Every episode of ``rec``, by writer id, in the order its writer recorded them."""
    out: dict[str, list[dict[str, Any]]] = {}
    for ep in rec:
        out.setdefault(ep.writer, []).append(episode_digest(ep))
    return out
