"""A read-only local HTTP server for the browser trace viewer (``gym-recording view``).

The server hands out two things and nothing else, under ``/<key>/``, a random key of its own
that the URL it prints holds (other users of the machine can reach the port, not the files):

- the static viewer page shipped in ``gym_recording/viewer/`` (``/<key>/``, ``static/<name>``);
- the trace files of one recording directory: ``api/files`` lists the names matching
  ``openaigym.trace.*`` (with their sizes), and ``files/<name>`` serves one of them, with HTTP
  Range support so that the page reads only the bytes of the arrays it shows.

Everything the page does with the files (parsing manifests and batches, validating every
reference, decoding arrays) happens in the browser, following FORMAT.md. The server only makes
sure that nothing outside the directory can be read: names must be plain trace-file names;
each file is opened once, relative to the directory, without following a symbolic link
(``O_NOFOLLOW``) or blocking (``O_NONBLOCK``), and served only if the open file is a regular
file with one link (``fstat``): writers make neither symbolic nor hard links, and a hard link
could name a file kept outside the directory. Only ``GET``/``HEAD`` are served; a client gets
10 seconds to send each whole request (then it is hung up on), and at most
:attr:`ViewerServer.max_clients` are served at once. It uses nothing but the standard library.
"""

from __future__ import annotations

import contextlib
import hmac
import http.server
import ipaddress
import json
import math
import os
import re
import secrets
import socket
import stat
import sys
import threading
import time
import webbrowser
from importlib import resources
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import unquote

from gym_recording._errors import TraceFormatError
from gym_recording.format.names import is_trace_name
from gym_recording.storage import local_path

__all__ = ["make_server", "serve"]

_STATIC_FILES = {
    "index.html": "text/html; charset=utf-8",
    "viewer.js": "text/javascript; charset=utf-8",
    # fzstd, the zstd decompressor of compressed recordings (vendored from npm, MIT).
    "fzstd.js": "text/javascript; charset=utf-8",
    # xxhash-wasm, which checks their frames' content checksums (vendored from npm, MIT).
    "xxhash-wasm.js": "text/javascript; charset=utf-8",
    "viewer.css": "text/css; charset=utf-8",
}
_CSP = (  # ('wasm-unsafe-eval': xxhash-wasm compiles its WebAssembly; no JavaScript eval)
    "default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; "
    "style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
# (at most 19 digits: an int64; a longer number is no range a file can have)
_RANGE_RE = re.compile(r"^\s*bytes\s*=\s*(\d{0,19})\s*-\s*(\d{0,19})\s*$", re.IGNORECASE)
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_CHUNK = 1 << 16


class ViewerServer(http.server.ThreadingHTTPServer):
    """A :class:`~http.server.ThreadingHTTPServer` that serves one recording directory.

    Attributes:
        root: The recording directory, resolved (symlinks followed).
        key: The random first part of every path it serves (``/<key>/...``): whoever can
            reach the port but was not given the URL reads nothing.
        check_host: Whether to refuse requests whose ``Host`` header is not a loopback name
            (a defence against DNS rebinding; on only when bound to a loopback address).
    """

    daemon_threads = True
    allow_reuse_address = True
    #: Clients served at once; more are disconnected at once until one is done.
    max_clients = 32

    def __init__(self, root: Path, address: tuple[str, int]) -> None:
        self.root = root
        self.key = secrets.token_urlsafe(16)
        self.key_bytes = self.key.encode()
        self.root_fd = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        self.check_host = _is_loopback(address[0])
        self._slots = threading.BoundedSemaphore(self.max_clients)
        # Each client's deadline to have sent its request, watched by one thread for all.
        self._deadlines: dict[_Handler, float] = {}
        self._watch = threading.Condition()
        self._watcher: threading.Thread | None = None
        self._wakes_at = math.inf  # (when the watcher looks next)
        self._closed = False
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        try:
            super().__init__(address, _Handler)
        except BaseException:
            self._close_root()  # (a failed bind has closed it already, in server_close)
            raise

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve the client on a thread of its own, or hang up if too many are served."""
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def server_close(self) -> None:
        """Close the socket and the directory."""
        super().server_close()
        self._close_root()
        with self._watch:
            self._closed = True
            self._watch.notify()

    def time_out(self, client: _Handler, seconds: float | None) -> None:
        """Hang up on ``client`` unless it is done sending a request within ``seconds``.

        ``None`` calls it off. (One thread watches every client: a timer thread per request
        cost more than the rest of answering it.)
        """
        with self._watch:
            if seconds is None:
                self._deadlines.pop(client, None)
                return
            deadline = self._deadlines[client] = time.monotonic() + seconds
            if self._watcher is None:
                self._watcher = threading.Thread(
                    target=self._hang_up_on_late_clients, name="gym-recording-viewer-timeouts"
                )
                self._watcher.daemon = True
                self._watcher.start()
            elif deadline < self._wakes_at:  # (else it looks at this one in time)
                self._watch.notify()

    def _hang_up_on_late_clients(self) -> None:
        with self._watch:
            while not self._closed:
                now = time.monotonic()
                for client, deadline in list(self._deadlines.items()):
                    if deadline <= now:
                        del self._deadlines[client]
                        client.hang_up()
                self._wakes_at = min(self._deadlines.values(), default=math.inf)
                self._watch.wait(None if self._wakes_at == math.inf else self._wakes_at - now)

    def _close_root(self) -> None:
        fd, self.root_fd = self.root_fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)

    def open_trace(self, name: str) -> tuple[int, os.stat_result] | None:
        """The trace file ``name`` directly in the root: a descriptor and its stat, or ``None``.

        Opened once, without following a symbolic link or blocking, then checked: a regular
        file with one link.
        """
        if not is_trace_name(name):
            return None
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        try:
            fd = os.open(name, flags | getattr(os, "O_CLOEXEC", 0), dir_fd=self.root_fd)
        except OSError:
            return None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            os.close(fd)
            return None
        return fd, info

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Ignore clients that hang up mid-response (the page cancels requests); report the rest."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def _is_loopback(host: str) -> bool:
    """Return whether ``host`` is a loopback address or ``localhost``."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_name(header: str) -> str:
    """Return the host part of a ``Host`` header, without port or IPv6 brackets, lower-case."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def _parse_range(header: str, size: int) -> tuple[int, int] | bool | None:
    """Parse a single-range ``Range`` header against a file of ``size`` bytes.

    Args:
        header: The header's value, e.g. ``"bytes=0-99"``, ``"bytes=100-"`` or ``"bytes=-50"``.
        size: The file's length in bytes.

    Returns:
        ``(start, end)`` (inclusive) for a satisfiable range; ``None`` if the header is malformed
        or asks for several ranges (RFC 9110 lets a server then ignore it and send the whole
        file); ``False`` if the range cannot be satisfied (the caller answers 416).
    """
    match = _RANGE_RE.match(header)
    if match is None:
        return None
    first, last = match.group(1), match.group(2)
    if not first and not last:
        return None
    if not first:  # suffix range: the last n bytes
        length = int(last)
        if length == 0 or size == 0:
            return False
        return max(0, size - length), size - 1
    start = int(first)
    end = int(last) if last else size - 1
    if last and end < start:
        return None
    if start >= size:
        return False
    return start, min(end, size - 1)


def _refusal(root_fd: int, name: str) -> str | None:
    """Say why the trace-named entry ``name`` is not served (``None`` if it vanished)."""
    try:
        info = os.stat(name, dir_fd=root_fd, follow_symlinks=False)
    except OSError:
        return None
    if stat.S_ISLNK(info.st_mode):
        return "is a symbolic link (the viewer serves none: writers make none)"
    if stat.S_ISDIR(info.st_mode):
        return "is a directory, not a file"
    if stat.S_ISREG(info.st_mode) and info.st_nlink != 1:
        return "is a hard link (the viewer serves files of one link only: writers make none)"
    return "is not a regular file"


class _Handler(http.server.BaseHTTPRequestHandler):
    """Serves the viewer page, the file listing and the trace files; refuses everything else."""

    server: ViewerServer
    #: Seconds a client has to send each whole request (and to begin the next on one
    #: connection); then it is hung up on, and its thread ends.
    timeout = 10.0
    server_version = "gym-recording-viewer"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    #: TCP_NODELAY: a response's headers and body go out in two writes, and on a connection
    #: kept alive Nagle's algorithm held the body until the browser's delayed ACK, a stall on
    #: every file (paid once per writer's manifest as the page opens a recording).
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        """Keep the terminal quiet: the viewer logs nothing per request."""

    def handle_one_request(self) -> None:
        """Read and answer one request; hang up on a client still sending it at the timeout.

        (The socket's own timeout bounds each read only: a byte every few seconds would
        hold the thread for ever.)
        """
        self.server.time_out(self, self.timeout)
        try:
            super().handle_one_request()
        finally:
            self.server.time_out(self, None)

    def hang_up(self) -> None:
        """Shut the connection down (the thread serving it then sees it closed)."""
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    # -- methods --------------------------------------------------------------------------

    def do_GET(self) -> None:
        """Answer a GET request."""
        self._dispatch(send_body=True)

    def do_HEAD(self) -> None:
        """Answer a HEAD request (the headers of the matching GET)."""
        self._dispatch(send_body=False)

    def _refuse_method(self) -> None:
        """Answer 405 to every method that could change something."""
        self.server.time_out(self, None)
        self.close_connection = True  # (its body, unread, is not the next request)
        self._send_error(405, "method not allowed", extra={"Allow": "GET, HEAD"})

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_TRACE = do_CONNECT = _refuse_method

    # -- routing --------------------------------------------------------------------------

    def _dispatch(self, *, send_body: bool) -> None:
        self.server.time_out(self, None)  # (the request is read: answering takes its time)
        if self.server.check_host and _host_name(self.headers.get("Host", "")) not in (
            _LOOPBACK_NAMES
        ):
            self._send_error(403, "forbidden host", send_body=send_body)
            return
        # The request target is origin-form ("/<key>/path?query"); anything else matches no
        # route.
        path = self.path.split("?", 1)[0].split("#", 1)[0]
        key, slash, path = path[1:].partition("/")
        given = key.encode("latin-1", "replace")  # (as http.server decoded the request line)
        if not self.path.startswith("/") or not hmac.compare_digest(given, self.server.key_bytes):
            msg = "not found (the viewer's pages are at the URL `gym-recording view` printed)"
            self._send_error(404, msg, send_body=send_body)
            return
        if not slash:  # ("/<key>": the page's relative URLs need "/<key>/")
            self._head(308, "text/plain; charset=utf-8", 0, {"Location": f"/{key}/"})
            return
        path = "/" + path
        if path in ("/", "/index.html"):
            self._send_static("index.html", send_body=send_body)
        elif path.startswith("/static/") and path[len("/static/") :] in _STATIC_FILES:
            self._send_static(path[len("/static/") :], send_body=send_body)
        elif path == "/api/files":
            self._send_listing(send_body=send_body)
        elif path.startswith("/files/"):
            self._send_trace_file(path[len("/files/") :], send_body=send_body)
        else:
            self._send_error(404, "not found", send_body=send_body)

    # -- responses ------------------------------------------------------------------------

    def _send_error(
        self,
        code: int,
        message: str,
        *,
        send_body: bool = True,
        extra: dict[str, str] | None = None,
    ) -> None:
        body = (message + "\n").encode()
        self._head(code, "text/plain; charset=utf-8", len(body), extra or {})
        if send_body:
            self.wfile.write(body)

    def _head(self, code: int, content_type: str, length: int, extra: dict[str, str]) -> None:
        """Send the status line and the headers every response has, then ``extra``."""
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(length))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        for key, value in extra.items():
            self.send_header(key, value)
        self.end_headers()

    def _send_bytes(
        self, body: bytes, content_type: str, *, send_body: bool, csp: bool = False
    ) -> None:
        extra = {
            "Referrer-Policy": "no-referrer",
            **({"Content-Security-Policy": _CSP} if csp else {}),
        }
        self._head(200, content_type, len(body), extra)
        if send_body:
            self.wfile.write(body)

    def _send_static(self, name: str, *, send_body: bool) -> None:
        body = resources.files(__name__).joinpath(name).read_bytes()
        self._send_bytes(body, _STATIC_FILES[name], send_body=send_body, csp=name == "index.html")

    def _send_listing(self, *, send_body: bool) -> None:
        root = self.server.root
        files: list[dict[str, Any]] = []
        refused: list[dict[str, str]] = []
        try:  # (in what the files are opened in; on a descriptor of its own: requests on
            # other threads would share the read position of the server's)
            listing = os.open(".", os.O_RDONLY | os.O_DIRECTORY, dir_fd=self.server.root_fd)
            try:
                entries = list(os.scandir(listing))
                opened = os.fstat(listing)
            finally:
                os.close(listing)
        except OSError as exc:
            self._send_error(500, f"cannot list the directory: {exc.strerror}", send_body=send_body)
            return
        try:
            now = os.stat(root)
        except OSError:
            now = None
        if now is None or (opened.st_dev, opened.st_ino) != (now.st_dev, now.st_ino):
            msg = (
                f"{root} was removed or replaced since the viewer started; start "
                "`gym-recording view` again to see what is there now"
            )
            self._send_error(410, msg, send_body=send_body)
            return
        for entry in entries:
            if not is_trace_name(entry.name):
                continue
            trace = self.server.open_trace(entry.name)
            if trace is None:
                reason = _refusal(self.server.root_fd, entry.name)
                if reason is not None:
                    refused.append({"name": entry.name, "reason": reason})
                continue
            fd, info = trace
            os.close(fd)
            files.append({"name": entry.name, "size": info.st_size, "mtime": info.st_mtime})
        files.sort(key=lambda f: str(f["name"]))
        refused.sort(key=lambda f: f["name"])
        body = json.dumps({"directory": str(root), "files": files, "refused": refused}).encode()
        self._send_bytes(body, "application/json; charset=utf-8", send_body=send_body)

    def _send_trace_file(self, raw_name: str, *, send_body: bool) -> None:
        # A "/" in the raw path (before unquoting) is never part of a plain name.
        name = ""
        if "/" not in raw_name:
            with contextlib.suppress(UnicodeDecodeError):
                name = unquote(raw_name, errors="strict")
        trace = self.server.open_trace(name) if name else None
        if trace is None:
            self._send_error(404, "not found", send_body=send_body)
            return
        fd, info = trace
        with os.fdopen(fd, "rb") as handle:
            self._send_file_body(handle, name, info.st_size, send_body=send_body)

    def _send_file_body(self, handle: BinaryIO, name: str, size: int, *, send_body: bool) -> None:
        content_type = "application/json" if name.endswith(".json") else "application/octet-stream"
        start, end = 0, size - 1
        status = 200
        range_header = self.headers.get("Range")
        if range_header is not None:
            parsed = _parse_range(range_header, size)
            if parsed is False:
                self._send_error(
                    416,
                    "range not satisfiable",
                    send_body=send_body,
                    extra={"Content-Range": f"bytes */{size}"},
                )
                return
            if isinstance(parsed, tuple):
                start, end = parsed
                status = 206
        length = max(0, end - start + 1)
        extra = {"Accept-Ranges": "bytes"}
        if status == 206:
            extra["Content-Range"] = f"bytes {start}-{end}/{size}"
        self._head(status, content_type, length, extra)
        if not send_body:
            return
        handle.seek(start)
        remaining = length
        while remaining > 0:
            chunk = handle.read(min(_CHUNK, remaining))
            if not chunk:  # the file shrank under us: close rather than send short data
                self.close_connection = True
                return
            self.wfile.write(chunk)
            remaining -= len(chunk)


def make_server(
    directory: str, host: str = "127.0.0.1", port: int = 0
) -> tuple[http.server.ThreadingHTTPServer, str]:
    """Bind the viewer's server to ``host:port`` for the recording in ``directory``.

    The server is bound but not yet serving: call ``serve_forever()`` (in a thread, for
    example) and ``server_close()`` when done.

    Args:
        directory: The recording directory to serve (read-only).
        host: The address to bind; the default serves this machine only.
        port: The port to bind; 0 picks a free one.

    Returns:
        The server and the URL of the viewer page, e.g.
        ``"http://127.0.0.1:8000/x1Yb3kD0q8sVvNnEa2GqRw/"`` (its key: see :class:`ViewerServer`).

    Raises:
        TraceFormatError: ``directory`` does not exist, is not a directory, or cannot be
            opened.
        OSError: The address cannot be bound.

    Example:
        >>> import tempfile
        >>> server, url = make_server(tempfile.gettempdir())
        >>> url.startswith("http://127.0.0.1:")
        True
        >>> server.server_close()
    """
    path = local_path(os.fspath(directory))  # (as every reader tells a URL from a path)
    if path is None:
        msg = (
            f"{directory}: `gym-recording view` serves a local directory, not a URL; copy the "
            "recording here first (gym_recording.storage_s3.download_recording for s3://)"
        )
        raise TraceFormatError(msg, os.fspath(directory))
    root = Path(path).resolve()
    if not root.is_dir():
        what = "is not a directory" if root.exists() else "does not exist"
        msg = f"expected a recording directory, but {str(directory)!r} {what}"
        raise TraceFormatError(msg, directory)
    try:
        server = ViewerServer(root, (host, port))
    except OSError as exc:
        if exc.filename is None:  # (the address: the caller says so)
            raise
        msg = f"{directory}: cannot open the directory ({exc.strerror}); check its permissions"
        raise TraceFormatError(msg, directory) from None
    bound_port = server.server_address[1]
    shown_host = f"[{host.strip('[]')}]" if ":" in host else host
    return server, f"http://{shown_host}:{bound_port}/{server.key}/"


def serve(
    directory: str, *, port: int = 0, host: str = "127.0.0.1", open_browser: bool = True
) -> None:
    """Serve the viewer for ``directory`` until interrupted (Ctrl+C).

    Prints the viewer's URL on its own line to stdout (flushed), opens it in the default
    browser unless ``open_browser`` is false, and serves until ``KeyboardInterrupt`` (or what
    derives from it: the command line's SIGTERM), then returns.

    Args:
        directory: The recording directory to serve (read-only).
        port: The port to bind; 0 picks a free one.
        host: The address to bind; the default serves this machine only.
        open_browser: Whether to open the page in the default web browser.

    Raises:
        TraceFormatError: ``directory`` does not exist, is not a directory, or cannot be
            opened.
        OSError: The address cannot be bound.
    """
    server, url = make_server(directory, host=host, port=port)
    try:  # (from the URL on: a stop after it is printed is the way serving ends)
        print(url, flush=True)
        if open_browser:
            threading.Thread(target=_open_browser, args=(url,), daemon=True).start()
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def _open_browser(url: str) -> None:
    """Open ``url`` in the default browser; failing to do so is not an error."""
    with contextlib.suppress(Exception):
        if not webbrowser.open(url):
            print(f"open {url} in a web browser", file=sys.stderr, flush=True)
