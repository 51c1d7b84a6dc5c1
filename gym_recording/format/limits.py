"""The bounds a reader holds every file to (FORMAT.md §9), and the writer keeps within.

A writer that follows FORMAT.md §1-§6 stays within all of them; the recorder checks what it
is given against them when it is given (``add_step``, ``add_reset``), so that whatever it
accepts, readers read.
"""

from __future__ import annotations

__all__ = [
    "COSTLY_JSON_BYTES",
    "INTP_MAX",
    "JSONARRAY_RATIO",
    "MAX_BATCH_JSON_BYTES",
    "MAX_DECODED_BYTES",
    "MAX_EPISODE_OBJECTS",
    "MAX_INFO_CELLS",
    "MAX_INT_DIGITS",
    "MAX_JSON_COST",
    "MAX_JSON_DEPTH",
    "MAX_MANIFEST_BYTES",
    "MAX_NDIM",
    "MAX_NESTING",
    "MAX_VALUE_COST",
    "fits_int64",
]

#: The largest manifest a reader accepts.
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
#: The largest batch JSON a reader accepts.
MAX_BATCH_JSON_BYTES = 512 * 1024 * 1024
#: The most episode objects a manifest's entry may list: what such a batch JSON holds, at
#: 46 bytes or more an object (``{"observations":[],"actions":[],"rewards":[]},``).
MAX_EPISODE_OBJECTS = MAX_BATCH_JSON_BYTES // 46
#: How deeply values (§6) and fields (§5) may nest: JSON containers plus ``__type`` wrappers.
MAX_NESTING = 100
#: The most characters of a JSON int, its minus sign included (§9): the digits Python
#: converts to and from text by default (``sys.get_int_max_str_digits()``); msgspec, the
#: reader's parser, counts the sign too.
MAX_INT_DIGITS = 4300
#: How deeply a manifest's JSON may nest (its metadata and env spec reach users as they are).
MAX_JSON_DEPTH = 512
#: The most dimensions an array may have.
MAX_NDIM = 32
#: The largest array size and offset, in bytes (numpy's index type).
INTP_MAX = 2**63 - 1
#: Bytes that decoding one batch may allocate for arrays built from JSON (``jsonarray``);
#: arrays read from blobs are views of the file and cost nothing here.
MAX_DECODED_BYTES = 256 * 1024 * 1024
#: ... and at most this many times the batch JSON's own size, so that a recording's
#: ``jsonarray`` values never take more memory than a fixed multiple of its files.
JSONARRAY_RATIO = 16
#: The most memory the Python objects parsed from one JSON document may take, as estimated
#: from its brackets, commas and colons before it is parsed (documents of more than
#: :data:`COSTLY_JSON_BYTES`; smaller ones cannot reach it).
MAX_JSON_COST = 1024 * 1024 * 1024
COSTLY_JSON_BYTES = 8 * 1024 * 1024
#: The most a writer keeps of JSON-encoded values in one batch (infos, options: their
#: estimated parsed size), and the most one value may take.
MAX_VALUE_COST = 256 * 1024 * 1024
#: The most info values one batch's ``info_columns`` may rebuild (rows times columns): what
#: a writer within :data:`MAX_VALUE_COST` can write, counting a value at least 64 bytes.
MAX_INFO_CELLS = 4_194_304


def fits_int64(n: int) -> bool:
    """Whether the int ``n`` is one of int64 (a seed may be any non-negative int)."""
    return -(2**63) <= n < 2**63
