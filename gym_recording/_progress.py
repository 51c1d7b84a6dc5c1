"""Progress bars for long loops (tqdm, the ``progress`` extra), or none."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

__all__ = ["progress"]

T = TypeVar("T")


def progress(items: Iterable[T], *, total: int | None = None, desc: str = "") -> Iterator[T]:
    """Iterate ``items`` with a tqdm progress bar on stderr when tqdm is installed and useful.

    Without the ``progress`` extra (tqdm), or when stderr is not a terminal, this iterates
    silently.
    """
    try:
        from tqdm import tqdm
    except ImportError:
        yield from items
        return
    yield from tqdm(
        items,
        total=total,
        desc=desc,
        unit="ep",
        file=sys.stderr,
        leave=False,
        mininterval=0.5,
        disable=None,
    )
