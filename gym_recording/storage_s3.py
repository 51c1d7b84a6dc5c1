"""Upload a recording directory to S3 and download it back, as the original ``storage_s3`` did.

Kept for code written against the original gym-recording; new code can record to and read
from ``s3://`` URLs directly. The implementation is in :mod:`gym_recording.tools.transfer`.
"""

from __future__ import annotations

from typing import Any

from gym_recording.tools import transfer
from gym_recording.tools.transfer import upload_recording

__all__ = ["CACHE_DIR", "download_recording", "upload_recording"]

#: Where downloads are cached: ``<tmp>/gym-recording-s3-<uid>/<bucket>/<key prefix>``.
CACHE_DIR = transfer.CACHE_DIR


def download_recording(
    s3url: str, *, storage_options: dict[str, Any] | None = None, cache_dir: str | None = None
) -> str:
    """Download the recording at ``s3url`` into :data:`CACHE_DIR`; return the directory.

    Args:
        s3url: The recording's ``s3://bucket/prefix`` URL.
        storage_options: Passed to s3fs (an ``endpoint_url``, credentials, ...).
        cache_dir: Where downloads are kept instead of :data:`CACHE_DIR`.

    Returns:
        The local directory that holds the recording's files.

    See :func:`gym_recording.tools.transfer.download_recording` (what is fetched again, and
    the errors).
    """
    cache_dir = cache_dir or CACHE_DIR
    return transfer.download_recording(s3url, storage_options=storage_options, cache_dir=cache_dir)
