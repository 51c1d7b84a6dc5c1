"""A real S3 API on loopback for the tests: moto's server mode, reached through s3fs.

Nothing is mocked in-process: the tests talk HTTP to ``ThreadedMotoServer`` on 127.0.0.1 with
the same s3fs/botocore code that talks to AWS.
"""

from __future__ import annotations

import logging
import secrets
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest


@dataclass(frozen=True)
class S3Server:
    """Where the server listens, and the storage options that reach it."""

    endpoint: str
    env: dict[str, str]

    @property
    def storage_options(self) -> dict[str, Any]:
        return {"endpoint_url": self.endpoint, "key": "testing", "secret": "testing"}

    def new_bucket(self, prefix: str = "gymrec") -> str:
        """Create a fresh bucket; return its name."""
        import s3fs

        name = f"{prefix}-{secrets.token_hex(4)}"
        s3fs.S3FileSystem(**self.storage_options).mkdir(name)
        return name


@contextmanager
def moto_s3() -> Iterator[S3Server]:
    """Start moto's S3 server on a free loopback port, with AWS_* pointing at it."""
    s3fs = pytest.importorskip("s3fs")
    moto_server = pytest.importorskip("moto.server")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one log line per request
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
    }
    try:
        with pytest.MonkeyPatch.context() as mp:
            for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
                mp.delenv(key, raising=False)
            for key, value in env.items():
                mp.setenv(key, value)
            # s3fs caches filesystems by their arguments, not by the environment.
            s3fs.S3FileSystem.clear_instance_cache()
            yield S3Server(endpoint, env)
    finally:
        s3fs.S3FileSystem.clear_instance_cache()
        server.stop()


# A moto server in a process of its own: servers started in one process share their buckets.
_SERVE = """
import logging, sys
from moto.server import ThreadedMotoServer

logging.getLogger("werkzeug").setLevel(logging.WARNING)
server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
print("http://%s:%d" % server.get_host_and_port(), flush=True)
sys.stdin.read()  # (until the test is done with it)
server.stop()
"""


@contextmanager
def moto_s3_process() -> Iterator[S3Server]:
    """Start another moto S3 server, with buckets of its own, in a child process.

    It is reached through its storage options only (the AWS_* variables stay as they are).
    """
    pytest.importorskip("moto.server")
    proc = subprocess.Popen(
        [sys.executable, "-c", _SERVE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        endpoint = proc.stdout.readline().strip()
        assert endpoint.startswith("http://127.0.0.1:"), f"moto did not start: {endpoint!r}"
        yield S3Server(endpoint, {})
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
