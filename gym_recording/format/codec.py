"""Compressed arrays (FORMAT.md §6.2): one zstd frame per array, and the checks on reading one.

A compressed ndarray reference names its codec (``"codec": "zstd"``) and the array's raw size
(``rawsize``); its ``size`` is the frame's length in the blob. :class:`Compressor` makes the
frames (zstandard releases the GIL while it compresses, so a writer thread compresses while
the environment steps); :func:`decompress` turns a frame back into the array's bytes, after
checking that the frame declares exactly ``rawsize`` bytes, so that memory is bounded by the
declared sizes: a frame that holds more or less, is truncated or corrupt is refused.
"""

from __future__ import annotations

import ctypes
import io
import os
import threading
import weakref
from typing import Any

import numpy as np
import zstandard

__all__ = [
    "CODECS",
    "MAX_RATIO",
    "CodecError",
    "Compressor",
    "FrameStream",
    "check_level",
    "decompress",
    "make_compressor",
]

#: Codecs a compressed reference may name.
CODECS = ("zstd",)
#: The most a zstd frame can expand (a 4-byte RLE block holds 128 KiB): a reference declaring
#: more raw bytes than this many times its frame cannot be genuine.
MAX_RATIO = 32768

#: The highest zstd level.
MAX_LEVEL = 22
#: A :class:`FrameStream` of a higher level uses this level's window and tables (see there).
STREAM_LEVEL_TABLES = 19
#: The bytes a worker of a threaded :class:`FrameStream` compresses at a time: small, so
#: that zstd's input buffers stay in the cache of the core that fills them.
STREAM_JOB_BYTES = 1024 * 1024

#: Arrays of at least this many bytes are decompressed into NumPy's memory (see decompress).
_LARGE = 4 * 1024 * 1024
_local = threading.local()  # (a decompressor per thread: one may not be shared)


class CodecError(ValueError):
    """A compressed array's frame does not hold what its reference declares."""


class Compressor:
    """Compresses arrays' bytes into zstd frames of one level.

    Args:
        level: zstd's level (1-22; 3 is zstd's default, fast and several hundred times
            smaller for rendered frames).

    Example:
        >>> c = Compressor(3)
        >>> frame = c.compress(bytes(100_000))
        >>> len(frame) < 100, decompress(frame, 100_000, "zstd").tobytes() == bytes(100_000)
        (True, True)
    """

    codec = "zstd"

    def __init__(self, level: int = 3) -> None:
        self.level = level
        self._cctx = zstandard.ZstdCompressor(
            level=level, write_content_size=True, write_checksum=True
        )

    def compress(self, data: Any) -> bytes:
        """One frame holding ``data`` (a bytes-like object).

        The frame declares its size in its header and ends with a checksum of its content,
        so that a damaged frame is refused.
        """
        return self._cctx.compress(data)

    def stream(self, *, threads: int = 0) -> FrameStream:
        """Frames compressed piece by piece at this level (see :class:`FrameStream`).

        For one thread: a compressor's context may not be shared.
        """
        return FrameStream(self.level, threads=threads)


class FrameStream:
    """zstd frames compressed piece by piece, each one's size known only at its end.

    zstd writes a frame's content size into its header only when it is known before the
    first byte, and FORMAT.md §6.2 requires it there: :meth:`finish` writes it into the
    header then (RFC 8878 §3.1.1.1: the Frame_Content_Size field, 8 bytes, after the
    Window_Descriptor), which leaves the blocks and the checksum as they are.

    Args:
        level: zstd's level, as for :class:`Compressor`.
        threads: zstd's own worker threads (0: none). With one or more, :meth:`add` copies
            the bytes into zstd's input buffer and returns; a worker of zstd's (C, without
            the GIL) compresses them while the caller goes on.

    Example:
        >>> s = FrameStream(3)
        >>> s.start(); s.add(bytes(70_000)); s.add(bytes(30_000))
        >>> decompress(s.finish(), 100_000, "zstd").tobytes() == bytes(100_000)
        True
    """

    def __init__(self, level: int = 3, *, threads: int = 0) -> None:
        # Not knowing a frame's size, zstd would size its tables for the level's whole
        # window (levels 20-22: 128 MiB, ~700 MB a stream): they are kept to level 19's.
        own = zstandard.ZstdCompressionParameters.from_level(level)
        cap = zstandard.ZstdCompressionParameters.from_level(min(level, STREAM_LEVEL_TABLES))
        params = zstandard.ZstdCompressionParameters.from_level(
            level,
            window_log=min(own.window_log, cap.window_log),
            hash_log=min(own.hash_log, cap.hash_log),
            chain_log=min(own.chain_log, cap.chain_log),
            write_checksum=1,
            write_content_size=1,
            threads=threads,
            job_size=STREAM_JOB_BYTES if threads else 0,
        )
        self._cctx: Any = zstandard.ZstdCompressor(compression_params=params)
        # zstd writes the frame into _sink itself, so that none of it is lost when an
        # interrupt (Ctrl-C) lands as zstd returns: Python raises it right after the call.
        self._sink: io.BytesIO | None = None
        self._writer: Any = None
        if threads:
            _THREADED.add(self)

    @property
    def rawsize(self) -> int:
        """The bytes added to the frame begun so far.

        zstd's own count: right after an interrupt too (zstd took the data whole, or none).
        """
        return int(self._cctx.frame_progression()[0]) if self._writer is not None else 0

    def close(self) -> None:
        """Free zstd's context (and its workers): the stream takes no more frames."""
        self._writer, self._sink, self._cctx = None, None, None

    def start(self) -> None:
        """Begin a frame (the one begun before, if not finished, is dropped)."""
        self._sink = io.BytesIO()
        self._writer = self._cctx.stream_writer(self._sink, closefd=False)
        self._writer.flush(zstandard.FLUSH_BLOCK)  # (begun now: zstd counts from 0, not on)

    def add(self, data: Any) -> None:
        """Compress ``data`` (a bytes-like object) as the frame's next bytes."""
        self._writer.write(data)

    def _frame(self, mode: int) -> bytes:
        """The frame so far, once zstd has written out what it holds (``mode``: a flush's)."""
        self._writer.flush(mode)
        return self._sink.getvalue()  # type: ignore[union-attr]

    def read_back(self) -> bytes:
        """The bytes added to the frame begun so far, decompressed (the frame goes on).

        Raises:
            CodecError: zstd cannot read back what it made.
        """
        frame = self._frame(zstandard.FLUSH_BLOCK)
        try:
            data = zstandard.ZstdDecompressor().decompressobj().decompress(frame)
        except zstandard.ZstdError as exc:
            raise CodecError(f"cannot read back the frame begun: {exc}") from None
        if len(data) != self.rawsize:
            msg = f"read back {len(data)} bytes of the frame begun, expected {self.rawsize}"
            raise CodecError(msg)
        return data

    def finish(self) -> bytes:
        """The frame, declaring its content size.

        Raises:
            CodecError: zstd made a header this does not know (it would be refused).
        """
        frame, rawsize = self._frame(zstandard.FLUSH_FRAME), self.rawsize
        self._writer = self._sink = None
        fhd = frame[4]
        # (no size field, no single segment, no dictionary: the header of a stream's frame)
        if len(frame) > 6 and not fhd & 0xE3:
            n = rawsize.to_bytes(8, "little")
            frame = b"".join((frame[:4], bytes((fhd | 0xC0,)), frame[5:6], n, frame[6:]))
        if zstandard.frame_content_size(frame) != rawsize:
            msg = f"zstd wrote a frame header this cannot complete ({frame[:6].hex()})"
            raise CodecError(msg)
        return frame


#: The streams whose zstd context has worker threads (see _forked).
_THREADED: weakref.WeakSet[FrameStream] = weakref.WeakSet()


def _forked() -> None:
    """In a forked child: close every stream with workers, and never free their contexts.

    The child has none of the parent's threads; freeing such a context joins its workers,
    which would never return. Each is given a reference that is never dropped.
    """
    for stream in list(_THREADED):
        if stream._cctx is not None:
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(stream._cctx))
        stream.close()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


def make_compressor(compression: str | None, level: int | None) -> Compressor | None:
    """The compressor that ``compression=`` and ``compression_level=`` ask for, checked.

    Raises:
        ValueError: an unknown codec, a level out of range, or a level without a codec.
    """
    if compression is None:
        if level is not None:
            msg = "compression_level needs compression='zstd'"
            raise ValueError(msg)
        return None
    if compression not in CODECS:
        names = ", ".join(map(repr, CODECS))
        msg = f"expected compression to be None or one of {names}, got {compression!r}"
        raise ValueError(msg)
    return Compressor() if level is None else Compressor(check_level(level))


def check_level(level: Any, what: str = "compression_level") -> int:
    """``level``, if it is zstd's (an int from 1 to :data:`MAX_LEVEL`); ``what`` names it.

    Raises:
        ValueError: it is not.
    """
    if (
        not isinstance(level, (int, np.integer))
        or isinstance(level, bool)
        or not 1 <= level <= MAX_LEVEL
    ):
        kind = "" if isinstance(level, (int, np.integer)) else f" (a {type(level).__name__})"
        msg = (
            f"expected {what} to be zstd's level, an int from 1 to {MAX_LEVEL}, got {level!r}{kind}"
        )
        raise ValueError(msg)
    return int(level)


def decompress(frame: Any, rawsize: int, codec: str) -> np.ndarray:
    """The ``rawsize`` bytes that ``frame`` holds, as a read-only ``uint8`` array.

    Large arrays (4 MiB or more) are decompressed straight into a NumPy array, whose memory
    NumPy asks the kernel to back with huge pages: fresh small pages cost more to fill than
    zstd takes to decompress into them.

    Raises:
        CodecError: ``codec`` is unknown, ``rawsize`` is more than :data:`MAX_RATIO` times the
            frame, or the frame does not declare and hold exactly ``rawsize`` bytes
            (a decompression bomb, a truncated or corrupt frame, bytes after it).
    """
    if codec not in CODECS:
        msg = f"unknown codec {codec[:40]!r} (this reader knows {', '.join(CODECS)})"
        raise CodecError(msg)
    n = len(frame)
    if rawsize > MAX_RATIO * n:
        msg = f"rawsize {rawsize} is more than a {n}-byte zstd frame can hold"
        raise CodecError(msg)
    try:
        declared = zstandard.frame_content_size(frame)
    except zstandard.ZstdError:
        msg = f"expected a zstd frame of {rawsize} bytes, got {n} bytes that are not one"
        raise CodecError(msg) from None
    if declared != rawsize:
        what = "no content size" if declared < 0 else f"{declared} bytes"
        msg = f"the zstd frame declares {what}, expected rawsize {rawsize}"
        raise CodecError(msg)
    dctx = getattr(_local, "dctx", None)
    if dctx is None:
        dctx = _local.dctx = zstandard.ZstdDecompressor()
    try:
        if not rawsize:  # (zstd returns nothing for a frame declaring nothing, whole or not)
            obj = dctx.decompressobj()
            if obj.decompress(frame) or not obj.eof or obj.unused_data:
                msg = f"expected a whole zstd frame of no bytes, got {n} bytes that are not one"
                raise CodecError(msg)
            return np.frombuffer(b"", np.uint8)
        if rawsize < _LARGE:
            data = dctx.decompress(frame, max_output_size=rawsize, allow_extra_data=False)
            if len(data) != rawsize:  # (zstd checks the content size; kept should it ever not)
                msg = f"the zstd frame holds {len(data)} bytes, expected rawsize {rawsize}"
                raise CodecError(msg)
            return np.frombuffer(data, np.uint8)
        out = np.empty(rawsize, np.uint8)
        # (across frames: a whole frame after it is read, and refused; a piece of one, below)
        reader = dctx.stream_reader(frame, read_across_frames=True)
        view, got = memoryview(out.data), 0
        while got < rawsize:
            k = reader.readinto(view[got:])
            if not k:
                break
            got += k
        more = reader.read(1)  # (past the frame's end: its checksum is checked)
    except zstandard.ZstdError as exc:
        msg = f"the zstd frame does not decompress: {exc}"
        raise CodecError(msg) from None
    if got < rawsize:  # (the frame ended, or its bytes did)
        msg = (
            f"expected one whole zstd frame of rawsize {rawsize} bytes, got a truncated one "
            f"({got} bytes)"
        )
        raise CodecError(msg)
    if more:
        msg = f"the zstd frame holds {got + len(more)} bytes or more, expected rawsize {rawsize}"
        raise CodecError(msg)
    if (end := _frame_end(memoryview(frame).cast("B"))) != n:  # (the reader lets a piece pass)
        if end > n:  # (its last block or checksum cut)
            msg = "expected one whole zstd frame, got a truncated one"
        else:
            msg = f"expected one whole zstd frame, got {n - end} bytes after it"
        raise CodecError(msg)
    out.flags.writeable = False
    return out


def _frame_end(frame: memoryview) -> int:
    """Where the zstd frame at the start of ``frame`` ends (RFC 8878, 3.1.1).

    Its blocks' headers are walked, then its checksum counted; the frame decompressed whole.
    """
    at = zstandard.frame_header_size(frame)
    last = False
    while not last and at + 3 <= len(frame):
        header = int.from_bytes(frame[at : at + 3], "little")
        last, kind, size = bool(header & 1), (header >> 1) & 3, header >> 3
        at += 3 + (1 if kind == 1 else size)  # (an RLE block holds one byte)
    return at + 4 * zstandard.get_frame_parameters(frame).has_checksum
