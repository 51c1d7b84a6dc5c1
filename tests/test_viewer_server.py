"""The viewer's HTTP server: static page, listing, trace files, Range requests, and refusals.

Everything here talks to a real server on 127.0.0.1 over a socket (``http.client``, which sends
the request target exactly as given, so traversal attempts reach the server un-normalised).
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest

from gym_recording import TraceFormatError
from gym_recording.tools.viewer import make_server

ROOT = Path(__file__).resolve().parents[1]
COMPAT_DIR = ROOT / "tests" / "data" / "compat"
MANIFEST = "openaigym.trace.0.4287.manifest.json"
BLOB = "openaigym.trace.0.4287.ep000000000.bin"
BATCH = "openaigym.trace.0.4287.ep000000000.json"
SECRET = b"top secret: this must never be served"


Response = tuple[int, dict[str, str], bytes]


def fetch(
    url: str, path: str, method: str = "GET", headers: dict[str, str] | None = None
) -> Response:
    """Send one request with ``path`` (after the URL's key) as the request target; return the
    response."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=10)
    try:
        conn.request(method, parts.path.rstrip("/") + path, headers=headers or {})
        response = conn.getresponse()
        body = response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, body
    finally:
        conn.close()


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    """A copy of the cartpole compat case, plus files and links the server must not serve."""
    if not (COMPAT_DIR / "cartpole").is_dir():
        pytest.skip(f"the compat recordings are not at {COMPAT_DIR}")
    rec = tmp_path / "rec"
    shutil.copytree(COMPAT_DIR / "cartpole", rec)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "openaigym.trace.secret.json").write_bytes(SECRET)
    (rec / "notes.txt").write_bytes(SECRET)
    (rec / ".gymrec-tmp-abc123").write_bytes(SECRET)
    (rec / "openaigym.trace.subdir").mkdir()
    (rec / "openaigym.trace.subdir" / "x.json").write_bytes(SECRET)
    # A link leading out of the directory, one to a non-trace file inside it, one inside it.
    (rec / "openaigym.trace.outside.json").symlink_to(outside / "openaigym.trace.secret.json")
    (rec / "openaigym.trace.notes.json").symlink_to(rec / "notes.txt")
    (rec / "openaigym.trace.alias.json").symlink_to(rec / MANIFEST)
    (rec / "openaigym.trace.dangling.json").symlink_to(rec / "does-not-exist")
    return rec


@pytest.fixture
def server_url(recording: Path) -> Iterator[str]:
    """The URL of a viewer server for ``recording``, serving in a thread."""
    server, url = make_server(str(recording))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# ------------------------------------------------------------------------------ make_server


def test_make_server_binds_loopback_and_returns_its_url(recording: Path) -> None:
    """make_server binds 127.0.0.1 on a free port and returns the page's URL, not yet serving."""
    server, url = make_server(str(recording))
    try:
        host, port = server.server_address[:2]
        assert host == "127.0.0.1"
        assert port > 0
        assert url == f"http://127.0.0.1:{port}/{server.key}/" and len(server.key) >= 22
    finally:
        server.server_close()


def test_make_server_refuses_a_missing_directory(tmp_path: Path) -> None:
    """A directory that does not exist is an error naming it; a remote URL is refused."""
    with pytest.raises(TraceFormatError, match="nope"):
        make_server(str(tmp_path / "nope"))
    with pytest.raises(TraceFormatError, match="serves a local directory, not a URL"):
        make_server("s3://bucket/run1")


def test_make_server_tells_a_path_from_a_url_as_every_reader_does(recording: Path) -> None:
    """A local directory whose path holds "://" (which record writes, and whose printed view
    command was refused as a URL), and a file:// URL, are served."""
    odd = recording.parent / "runs" / "http:" / "x"
    odd.parent.mkdir(parents=True)
    shutil.copytree(recording, odd, symlinks=True)
    for where in (f"{recording.parent}/runs/http://x", f"file://{recording}"):
        server, url = make_server(where)
        server.server_close()
        assert url.startswith("http://127.0.0.1:")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_view_that_cannot_print_its_url_says_why_not_the_port(recording: Path) -> None:
    """``view`` whose stdout is full: the error is the write's, exit 1 (it was "cannot serve
    on port 0: No space left on device; choose another --port", exit 2)."""
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "gym_recording", "view", str(recording), "--no-browser"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    assert proc.returncode == 1, proc.stderr
    assert "No space left on device" in proc.stderr and "port" not in proc.stderr


def test_a_taken_port_is_an_oserror_and_a_usage_error_on_the_command_line(
    recording: Path,
) -> None:
    """make_server on a port in use raises the bind's OSError (the directory closed once, no
    EBADF in its place); ``view`` says so in one line and exits 2, as for a port out of range."""
    import errno
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError) as caught:
            make_server(str(recording), port=port)
        assert caught.value.errno == errno.EADDRINUSE
        for arg, needle in ((str(port), f"cannot serve on port {port}"), ("80000", "0 to 65535")):
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "gym_recording",
                    "view",
                    str(recording),
                    "--no-browser",
                    "--port",
                    arg,
                ],
                capture_output=True,
                text=True,
                timeout=60,
                stdin=subprocess.DEVNULL,
            )
            assert proc.returncode == 2, proc.stderr
            assert needle in proc.stderr and "Traceback" not in proc.stderr


def test_make_server_follows_a_symlinked_directory(recording: Path, tmp_path: Path) -> None:
    """DIR given through a symlink serves the directory it points to."""
    link = tmp_path / "link-to-rec"
    link.symlink_to(recording)
    server, url = make_server(str(link))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        status, _, body = fetch(url, f"/files/{MANIFEST}")
        assert status == 200
        assert body == (recording / MANIFEST).read_bytes()
    finally:
        server.shutdown()
        server.server_close()


# ------------------------------------------------------------------------------ static page


def test_page_is_served_at_root(server_url: str) -> None:
    """/ is the viewer page, with a restrictive Content-Security-Policy and no caching."""
    status, headers, body = fetch(server_url, "/")
    assert status == 200
    assert headers["content-type"].startswith("text/html")
    assert b'data-testid="episode-count"' in body
    assert "default-src 'none'" in headers["content-security-policy"]
    assert headers["cache-control"] == "no-store"
    assert fetch(server_url, "/index.html")[2] == body


@pytest.mark.parametrize(
    ("path", "content_type"),
    [("/static/viewer.js", "text/javascript"), ("/static/viewer.css", "text/css")],
)
def test_static_assets_are_served(server_url: str, path: str, content_type: str) -> None:
    """The page's script and style sheet come from the package."""
    status, headers, body = fetch(server_url, path)
    assert status == 200
    assert headers["content-type"].startswith(content_type)
    assert len(body) > 100


def test_page_needs_nothing_from_the_network(server_url: str) -> None:
    """The page references no external URL (it must work offline, no CDN)."""
    for path in ("/", "/static/viewer.js", "/static/viewer.css"):
        body = fetch(server_url, path)[2].decode()
        assert re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", body) is None, path
        assert "@import" not in body


@pytest.mark.parametrize(
    "path", ["/static/", "/static/_viewer.py", "/static/../_viewer.py", "/nope", "/api/nope"]
)
def test_unknown_paths_are_not_found(server_url: str, path: str) -> None:
    """Only the listed static assets exist."""
    assert fetch(server_url, path)[0] == 404


def test_only_the_url_s_key_opens_the_recording(server_url: str) -> None:
    """Every path is under the random key the printed URL holds: another user of the machine
    who reaches the port without the URL reads nothing (the server reads the files with the
    viewing user's rights, which a directory of mode 0700 kept from that user)."""
    key = urlsplit(server_url).path.strip("/")
    bare = urlsplit(server_url)._replace(path="/").geturl()
    for path in (
        "/",
        "/index.html",
        "/api/files",
        f"/files/{BLOB}",
        "/static/viewer.js",
        f"/{key[:-1]}/api/files",
        f"/{key}x/api/files",
        f"/{key.swapcase()}/api/files",
        f"/x/{key}/api/files",
        f"/{key}%C3%A9/api/files",
    ):
        status, _, body = fetch(bare, path)
        assert status == 404 and b"the URL `gym-recording view` printed" in body, path
    status, headers, _ = fetch(bare, f"/{key}")
    assert status == 308 and headers["location"] == f"/{key}/"
    assert fetch(bare, f"/{key}/api/files")[0] == 200


# ------------------------------------------------------------------------------ listing


def test_listing_names_only_trace_files_inside_the_directory(
    server_url: str, recording: Path
) -> None:
    """/api/files lists the regular openaigym.trace.* files, with sizes, and nothing else."""
    status, headers, body = fetch(server_url, "/api/files")
    assert status == 200
    assert headers["content-type"].startswith("application/json")
    assert headers["cache-control"] == "no-store"
    listing = json.loads(body)
    names = {f["name"]: f["size"] for f in listing["files"]}
    expected = {p.name for p in (COMPAT_DIR / "cartpole").iterdir()}
    assert set(names) == expected
    assert names[BLOB] == (recording / BLOB).stat().st_size
    assert listing["directory"] == str(recording.resolve())
    refused = {f["name"]: f["reason"] for f in listing["refused"]}
    link = "is a symbolic link (the viewer serves none: writers make none)"
    assert refused == {
        "openaigym.trace.outside.json": link,
        "openaigym.trace.notes.json": link,
        "openaigym.trace.dangling.json": link,
        "openaigym.trace.alias.json": link,
        "openaigym.trace.subdir": "is a directory, not a file",
    }


def test_a_fifo_is_refused_without_blocking(server_url: str, recording: Path) -> None:
    """A FIFO named like a trace file is listed as refused and never opened (it would block)."""
    os.mkfifo(recording / "openaigym.trace.fifo.bin")
    listing = json.loads(fetch(server_url, "/api/files")[2])
    assert {"name": "openaigym.trace.fifo.bin", "reason": "is not a regular file"} in listing[
        "refused"
    ]
    assert fetch(server_url, "/files/openaigym.trace.fifo.bin")[0] == 404


# ------------------------------------------------------------------------------ trace files


@pytest.mark.parametrize(
    ("name", "content_type"),
    [
        (MANIFEST, "application/json"),
        (BATCH, "application/json"),
        (BLOB, "application/octet-stream"),
    ],
)
def test_trace_files_are_served_whole(
    server_url: str, recording: Path, name: str, content_type: str
) -> None:
    """GET /files/<name> returns the file's bytes, uncached, advertising byte ranges."""
    status, headers, body = fetch(server_url, f"/files/{name}")
    assert status == 200
    assert body == (recording / name).read_bytes()
    assert headers["content-type"].startswith(content_type)
    assert headers["content-length"] == str(len(body))
    assert headers["cache-control"] == "no-store"
    assert headers["accept-ranges"] == "bytes"


def test_query_strings_are_ignored(server_url: str, recording: Path) -> None:
    """A cache-busting query string does not change what is served."""
    status, _, body = fetch(server_url, f"/files/{MANIFEST}?t=123")
    assert status == 200
    assert body == (recording / MANIFEST).read_bytes()


def test_percent_encoded_names_are_decoded(server_url: str, recording: Path) -> None:
    """The page encodes names with encodeURIComponent; the server decodes them."""
    status, _, body = fetch(server_url, "/files/" + quote(MANIFEST, safe=""))
    assert status == 200
    assert body == (recording / MANIFEST).read_bytes()


def test_no_link_is_served_even_inside_the_directory(server_url: str, recording: Path) -> None:
    """A symbolic link is never opened (O_NOFOLLOW), even to a trace file beside it; a hard
    link is refused too: it may name a file kept outside the directory."""
    status, _, _ = fetch(server_url, "/files/openaigym.trace.alias.json")
    assert status == 404
    os.link(recording / MANIFEST, recording / "openaigym.trace.hard.json")
    status, _, _ = fetch(server_url, "/files/openaigym.trace.hard.json")
    assert status == 404
    listing = json.loads(fetch(server_url, "/api/files")[2])
    refused = {f["name"]: f["reason"] for f in listing["refused"]}
    assert refused["openaigym.trace.hard.json"].startswith("is a hard link")
    assert MANIFEST not in {f["name"] for f in listing["files"]}  # (both names have 2 links)


def test_head_sends_headers_only(server_url: str, recording: Path) -> None:
    """HEAD answers with the GET's headers (the page reads blob sizes this way) and no body."""
    status, headers, body = fetch(server_url, f"/files/{BLOB}", method="HEAD")
    assert status == 200
    assert body == b""
    assert headers["content-length"] == str((recording / BLOB).stat().st_size)


# ------------------------------------------------------------------------------ ranges


@pytest.mark.parametrize(
    ("spec", "start", "stop"),
    [
        ("bytes=0-9", 0, 10),
        ("bytes=5-5", 5, 6),
        ("bytes=344-1047", 344, 1048),
        ("bytes=100-", 100, None),
        ("bytes=-7", -7, None),
        ("bytes=0-99999999", 0, None),
        ("bytes=-99999999", 0, None),
        ("BYTES = 3 - 4", 3, 5),
    ],
)
def test_single_ranges_are_partial_content(
    server_url: str, recording: Path, spec: str, start: int, stop: int | None
) -> None:
    """bytes=a-b, bytes=a- and bytes=-n give 206 with the right bytes and Content-Range."""
    data = (recording / BLOB).read_bytes()
    status, headers, body = fetch(server_url, f"/files/{BLOB}", headers={"Range": spec})
    assert status == 206
    want = data[start:stop]
    assert body == want
    first = start % len(data) if start < 0 else start
    assert headers["content-range"] == f"bytes {first}-{first + len(want) - 1}/{len(data)}"
    assert headers["content-length"] == str(len(want))


def test_head_with_a_range(server_url: str) -> None:
    """HEAD with a Range answers 206 headers and no body."""
    status, headers, body = fetch(
        server_url, f"/files/{BLOB}", method="HEAD", headers={"Range": "bytes=0-3"}
    )
    assert (status, body, headers["content-length"]) == (206, b"", "4")


@pytest.mark.parametrize("spec", ["bytes={size}-", "bytes={size}-{more}", "bytes=-0"])
def test_unsatisfiable_ranges_are_416(server_url: str, recording: Path, spec: str) -> None:
    """A range starting past the end (or empty) is 416 with Content-Range: bytes */size."""
    size = (recording / BLOB).stat().st_size
    header = spec.format(size=size, more=size + 10)
    status, headers, _ = fetch(server_url, f"/files/{BLOB}", headers={"Range": header})
    assert status == 416
    assert headers["content-range"] == f"bytes */{size}"


@pytest.mark.parametrize(
    "spec", ["bytes=0-1,4-5", "bytes=9-2", "items=0-5", "bytes=-", "bytes=x-y"]
)
def test_unsupported_or_malformed_ranges_are_ignored(
    server_url: str, recording: Path, spec: str
) -> None:
    """Several ranges, or a malformed header, get the whole file (RFC 9110 allows ignoring)."""
    status, _, body = fetch(server_url, f"/files/{BLOB}", headers={"Range": spec})
    assert status == 200
    assert body == (recording / BLOB).read_bytes()


def test_range_on_an_empty_file(server_url: str, recording: Path) -> None:
    """An empty trace file has no satisfiable range, but can be read whole."""
    (recording / "openaigym.trace.empty.bin").write_bytes(b"")
    assert fetch(server_url, "/files/openaigym.trace.empty.bin")[:1] == (200,)
    status, headers, _ = fetch(
        server_url, "/files/openaigym.trace.empty.bin", headers={"Range": "bytes=0-"}
    )
    assert (status, headers["content-range"]) == (416, "bytes */0")


# ------------------------------------------------------------------------------ refusals


TRAVERSALS = [
    "/files/..%2F..%2Fetc%2Fpasswd",
    "/files/../../etc/passwd",
    "/files/..%2Foutside%2Fopenaigym.trace.secret.json",
    "/files/../outside/openaigym.trace.secret.json",
    "/files/%2Fetc%2Fpasswd",
    "/files//etc/passwd",
    "/files/%2e%2e",
    "/files/..",
    "/files/.",
    "/files/",
    "/files/..%5C..%5Cetc%5Cpasswd",
    "/files/openaigym.trace.x%5C..%5Cnotes.txt",
    "/files/openaigym.trace.0.4287.manifest.json%00",
    "/files/%ff%fe",
    "/files/notes.txt",
    "/files/.gymrec-tmp-abc123",
    "/files/openaigym.trace.outside.json",
    "/files/openaigym.trace.notes.json",
    "/files/openaigym.trace.dangling.json",
    "/files/openaigym.trace.subdir",
    "/files/openaigym.trace.subdir/x.json",
    "/files/openaigym.trace.subdir%2Fx.json",
    "/files/openaigym.trace.missing.json",
    "/../etc/passwd",
    "/%2e%2e/%2e%2e/etc/passwd",
    "//etc/passwd",
]


@pytest.mark.parametrize("path", TRAVERSALS)
def test_nothing_outside_the_trace_files_is_served(
    server_url: str, recording: Path, path: str
) -> None:
    """Traversal, absolute paths, NUL, backslashes, links out, non-trace files: all 404."""
    for method in ("GET", "HEAD"):
        status, _, body = fetch(server_url, path, method=method)
        assert status == 404, (method, path)
        assert SECRET not in body
        assert b"root:" not in body


def test_absolute_path_of_a_file_is_not_served(server_url: str, tmp_path: Path) -> None:
    """An absolute path, encoded as a name, is refused."""
    secret = tmp_path / "outside" / "openaigym.trace.secret.json"
    status, _, body = fetch(server_url, "/files/" + quote(str(secret), safe=""))
    assert status == 404
    assert SECRET not in body


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
def test_only_get_and_head_are_allowed(server_url: str, recording: Path, method: str) -> None:
    """Methods that could change something are 405, and change nothing."""
    before = (recording / MANIFEST).read_bytes()
    status, headers, _ = fetch(server_url, f"/files/{MANIFEST}", method=method)
    assert status == 405
    assert headers["allow"] == "GET, HEAD"
    assert (recording / MANIFEST).read_bytes() == before


def test_a_refused_request_s_body_is_not_taken_for_the_next_request(server_url: str) -> None:
    """A POST's body, which the server does not read, is not answered as a request of its
    own: the connection is closed after the 405."""
    parts = urlsplit(server_url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        body = f"GET /nothere HTTP/1.1\r\nHost: {parts.netloc}\r\n\r\n".encode()
        head = f"POST /api/files HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        sock.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
        got = b""
        while chunk := sock.recv(65536):
            got += chunk
    assert got.startswith(b"HTTP/1.1 405") or got.startswith(b"HTTP/1.0 405")
    assert b" 404 " not in got


def test_listings_on_many_threads_at_once_each_name_every_file(recording: Path) -> None:
    """Listings answered side by side each list the directory whole (they shared one
    descriptor's read position: some came back empty, some twice as long)."""
    for i in range(150):
        (recording / f"openaigym.trace.{i}.x.json").write_bytes(b"{}")
    server, url = make_server(str(recording))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    counts: list[int] = []
    try:

        def poll() -> None:
            for _ in range(20):
                status, _, body = fetch(url, "/api/files")
                assert status == 200
                counts.append(len(json.loads(body)["files"]))

        pollers = [threading.Thread(target=poll) for _ in range(6)]
        for t in pollers:
            t.start()
        for t in pollers:
            t.join()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
    assert len(counts) == 120 and len(set(counts)) == 1, sorted(set(counts))


def test_foreign_host_header_is_refused(server_url: str) -> None:
    """A request naming another host (DNS rebinding) is refused; loopback names are fine."""
    port = urlsplit(server_url).port
    assert fetch(server_url, "/api/files", headers={"Host": f"evil.example:{port}"})[0] == 403
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", "localhost"):
        assert fetch(server_url, "/api/files", headers={"Host": host})[0] == 200


# ------------------------------------------------------------------------------ serve and CLI


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _read_url(proc: subprocess.Popen[str], deadline: float = 30.0) -> str:
    """Read stdout lines until one is an http:// URL."""
    assert proc.stdout is not None
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        line = proc.stdout.readline()
        if not line:
            break
        match = re.search(r"http://\S+", line)
        if match:
            return match.group(0)
    proc.kill()
    _, err = proc.communicate(timeout=10)
    pytest.fail(f"no URL printed; stderr: {err}")


def _check_and_interrupt(proc: subprocess.Popen[str], url: str, recording: Path) -> None:
    try:
        status, _, body = fetch(url, f"/files/{MANIFEST}")
        assert status == 200
        assert body == (recording / MANIFEST).read_bytes()
        assert fetch(url, "/")[0] == 200
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)  # (a bound, not a speed: loaded machines are slow)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            pytest.fail("the server did not stop on Ctrl+C")
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""


def test_serve_prints_the_url_and_stops_on_ctrl_c(recording: Path) -> None:
    """serve() prints its URL, serves, and returns cleanly on KeyboardInterrupt."""
    code = (
        "import sys; from gym_recording.tools.viewer import serve; "
        "serve(sys.argv[1], open_browser=False)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(recording)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=str(ROOT),
    )
    url = _read_url(proc)
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/[A-Za-z0-9_-]{22,}/", url)
    _check_and_interrupt(proc, url, recording)


@pytest.mark.skipif(
    importlib.util.find_spec("gym_recording.__main__") is None,
    reason="the command line (gym_recording.__main__) does not exist yet",
)
def test_cli_view_serves_the_directory(recording: Path) -> None:
    """`python -m gym_recording view DIR --port 0 --no-browser` prints a URL and serves DIR."""
    command = [sys.executable, "-m", "gym_recording", "view", str(recording)]
    proc = subprocess.Popen(
        [*command, "--port", "0", "--no-browser"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=str(ROOT),
    )
    url = _read_url(proc)
    _check_and_interrupt(proc, url, recording)


def _view_stderr(directory: Path) -> str:
    """What `gym-recording view DIR` says on stderr, serving the page, until Ctrl+C."""
    command = [sys.executable, "-m", "gym_recording", "view", str(directory), "--no-browser"]
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env()
    )
    try:
        url = _read_url(proc)
        assert fetch(url, "/")[0] == 200
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return err


def test_cli_view_of_a_directory_without_a_recording_warns_and_serves(
    recording: Path, tmp_path: Path
) -> None:
    """`view` of a directory of other files (a recording's parent) says, in one warning line,
    what info and verify say of it, then serves it all the same (a recording may come);
    a recording's own directory gets no warning."""
    parent = recording.parent
    err = _view_stderr(parent)
    assert err.startswith(f"gym-recording: warning: {parent} holds no recording ("), err
    assert err.rstrip().endswith("pass the directory the recorder wrote"), err
    assert len(err.splitlines()) == 1, err
    info = subprocess.run(
        [sys.executable, "-m", "gym_recording", "info", str(parent)],
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert err.split("warning: ", 1)[1] == info.stderr.split("error: ", 1)[1]
    assert _view_stderr(recording) == ""


def test_cli_view_of_a_missing_directory_says_it_does_not_exist(tmp_path: Path) -> None:
    """As info and verify say it: "does not exist", not "not a directory"; a file "is not
    a directory"."""
    (tmp_path / "a-file").write_text("x")
    for name, what in (("nope", "does not exist"), ("a-file", "is not a directory")):
        proc = subprocess.run(
            [sys.executable, "-m", "gym_recording", "view", str(tmp_path / name)],
            capture_output=True,
            text=True,
            env=_env(),
            timeout=60,
        )
        assert proc.returncode == 1 and proc.stdout == ""
        expected = f"expected a recording directory, but {str(tmp_path / name)!r} {what}"
        assert proc.stderr == f"gym-recording: error: {expected}\n"


# ------------------------------------------------------------------------------ hostile clients


def test_a_name_flipping_between_file_and_link_never_serves_the_target(
    server_url: str, recording: Path, tmp_path: Path
) -> None:
    """The file is opened once, without following links: however the name flips between a
    regular file and a link to a secret, the secret is never sent."""
    secret = tmp_path / "secret.txt"
    secret.write_bytes(SECRET)
    name = recording / "openaigym.trace.flip.json"
    stop = threading.Event()

    def flip() -> None:
        while not stop.is_set():
            with open(recording / ".tmp-file", "wb") as f:
                f.write(b"{}")
            os.replace(recording / ".tmp-file", name)
            if os.path.lexists(recording / ".tmp-link"):
                os.unlink(recording / ".tmp-link")
            os.symlink(secret, recording / ".tmp-link")
            os.replace(recording / ".tmp-link", name)

    flipper = threading.Thread(target=flip, daemon=True)
    flipper.start()
    try:
        statuses = set()
        for _ in range(200):
            status, _, body = fetch(server_url, "/files/openaigym.trace.flip.json")
            assert SECRET not in body
            statuses.add(status)
    finally:
        stop.set()
        flipper.join(timeout=5)
    assert statuses <= {200, 404}


@pytest.mark.parametrize("header", ["bytes=" + "9" * 5000 + "-", "bytes=0-" + "1" * 30])
def test_a_range_of_absurd_digits_is_ignored(server_url: str, recording: Path, header: str) -> None:
    """A number no file offset can be is a malformed Range: the whole file is sent."""
    status, _, body = fetch(server_url, f"/files/{BLOB}", headers={"Range": header})
    assert status == 200 and body == (recording / BLOB).read_bytes()


def test_stalled_clients_are_bounded_and_time_out(
    recording: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Clients that send half a request hold at most ``max_clients`` threads, each for at most
    the request timeout; then the server answers again."""
    import socket

    from gym_recording.tools import viewer

    # (the private class: its timeout, a few seconds: the stalled clients are still served
    # when they are counted, on a loaded machine too)
    monkeypatch.setattr(viewer._Handler, "timeout", 3.0)
    server, url = make_server(str(recording))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    port = server.server_address[1]
    stalled = []
    try:
        for _ in range(server.max_clients + 20):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"GET /api/files HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # (no blank line)
            stalled.append(s)
        time.sleep(0.2)
        # This server's threads, one a client it serves (the servers of earlier tests may
        # start threads meanwhile; Thread._target is private, read only to tell them apart).
        serving = [
            t
            for t in threading.enumerate()
            if getattr(t, "_target", None) == server.process_request_thread
        ]
        assert 0 < len(serving) <= server.max_clients
        deadline = time.monotonic() + 20
        while True:  # once the stalled ones time out, a client is served again
            try:
                status, _, _ = fetch(url, "/api/files")
                break
            except (ConnectionError, http.client.HTTPException, OSError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        assert status == 200
    finally:
        for s in stalled:
            s.close()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_a_client_sending_its_request_a_byte_at_a_time_is_hung_up_on(
    recording: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The timeout bounds a whole request, not each read: a client dribbling a byte more
    often than the timeout (a thread held for ever, 32 of them shutting everyone out) is
    hung up on before it is done."""
    import select
    import socket

    from gym_recording.tools import viewer

    # (the private class: its timeout, a few seconds: the stalled clients are still served
    # when they are counted, on a loaded machine too)
    monkeypatch.setattr(viewer._Handler, "timeout", 3.0)
    server, _ = make_server(str(recording))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    s = socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=5)
    hung_up = False
    try:
        request = b"GET /api/files HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200
        for byte in request:  # 200 x 0.1 s: 40 times the timeout
            try:
                s.sendall(bytes([byte]))
                time.sleep(0.1)
                if select.select([s], [], [], 0)[0]:  # (readable: an answer, or the end)
                    hung_up = s.recv(1, socket.MSG_PEEK) == b""
            except (ConnectionResetError, BrokenPipeError):
                hung_up = True
            if hung_up:
                break
        assert hung_up, "the server held a client sending a byte every 0.1 s for 20 s"
    finally:
        s.close()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_a_replaced_directory_is_said_to_be_replaced(tmp_path: Path) -> None:
    """Recording again into a directory removed since `view` started: the listing says so
    (the server reads the directory it opened, which is gone), not an empty recording."""
    rec = tmp_path / "rec"
    shutil.copytree(COMPAT_DIR / "cartpole", rec)
    server, url = make_server(str(rec))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        assert fetch(url, "/api/files")[0] == 200
        shutil.rmtree(rec)
        shutil.copytree(COMPAT_DIR / "cartpole", rec)
        status, _, body = fetch(url, "/api/files")
        assert status == 410 and b"removed or replaced since the viewer started" in body
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
