"""Reading at scale: ``load()`` open time and iteration rate as a recording grows.

Recordings of 10 to 100,000 files (one writer) and of 1 to 3,000 writers (two batches each)
are laid out file by file from one batch the real writer wrote (its JSON and blob copied under
each batch's own names, manifests as the writer makes them, a new segment every 1000
batches), then read the way users read: ``gym_recording.load(d)`` (open: every manifest
listed, read and checked) and iterating every episode, touching its arrays (every batch read
and checked). Locally, and on a real S3 API (moto's server on 127.0.0.1) for the smaller
sizes. Each read runs in a fresh process.

    python benchmarks/scale.py                  # prints a Markdown table
    python benchmarks/scale.py --quick          # the smaller sizes only
    python benchmarks/scale.py --quick --latency-ms 10   # S3 requests 10 ms round trip
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import gym_recording
from gym_recording.format.manifest import encode_manifest
from gym_recording.format.names import batch_names, manifest_name, segment_id, writer_prefix
from gym_recording.format.wire import BatchEntry, ManifestDoc

SEGMENT = 1000  # batches per manifest, as the writer does


def template() -> tuple[dict[str, Any], bytes, bytes, str]:
    """One batch by the real writer: its manifest's keys, batch JSON, blob, and blob name."""
    d = tempfile.mkdtemp()
    with gym_recording.TraceRecording(d, env_id="CartPole-v1") as rec:
        rec.add_reset(np.zeros(4, np.float32), seed=0)
        for t in range(5):
            rec.add_step(t % 2, np.full(4, t, np.float32), 1.0, terminated=t == 4)
    (m,) = Path(d).glob("*.manifest.json")
    doc = json.loads(m.read_bytes())
    (entry,) = doc["batches"]
    batch, blob = (Path(d, entry["fn"]).read_bytes(), Path(d, entry["bin"]).read_bytes())
    shutil.rmtree(d)
    return doc, batch, blob, entry["bin"]


def lay_out(d: str, writers: int, batches: int) -> int:
    """Write a recording of ``writers`` writers of ``batches`` batches each; its file count."""
    doc, batch, blob, old_bin = template()
    head = {k: v for k, v in doc.items() if k not in ("batches", "segment", "writer")}
    os.makedirs(d, exist_ok=True)
    files = 0
    for w in range(writers):
        wid = f"{w}.1.scale"
        for seg in range(0, batches, SEGMENT):
            prefix = writer_prefix(segment_id(wid, seg // SEGMENT))
            entries = []
            for b in range(min(SEGMENT, batches - seg)):
                fn, bn = batch_names(prefix, b)
                data = batch.replace(old_bin.encode(), bn.encode())
                Path(d, bn).write_bytes(blob)
                Path(d, fn).write_bytes(data)
                entries.append(BatchEntry(b, 1, fn, bn, 5, len(data) + len(blob)))
            m = ManifestDoc(entries, writer=wid, segment=seg // SEGMENT, **head)
            Path(d, manifest_name(prefix)).write_bytes(encode_manifest(m))
            files += 2 * len(entries) + 1
    return files


def child(location: str) -> None:
    """Open and iterate ``location`` (in this fresh process); print JSON."""
    opts = None
    if location.startswith("s3://"):
        opts = {"endpoint_url": os.environ["AWS_ENDPOINT_URL"]}
    t = time.perf_counter()
    rec = gym_recording.load(location, storage_options=opts)
    n = len(rec)
    opened = time.perf_counter() - t
    t = time.perf_counter()
    steps = 0
    for ep in rec:
        steps += ep.length
        ep.observations.tobytes()
    iterated = time.perf_counter() - t
    rec.close()
    print(json.dumps({"open": opened, "iterate": iterated, "episodes": n, "steps": steps}))


def latency_proxy(host: str, port: int, delay: float) -> int:
    """A TCP proxy to ``host:port`` that holds each chunk ``delay`` s each way, on a thread
    of its own (an object store's round trip, which moto on 127.0.0.1 does not have); its
    port."""
    import asyncio
    import threading

    async def pipe(reader: Any, writer: Any) -> None:
        try:
            while data := await reader.read(65536):
                await asyncio.sleep(delay)
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()

    async def serve(client_r: Any, client_w: Any) -> None:
        server_r, server_w = await asyncio.open_connection(host, port)
        await asyncio.gather(pipe(client_r, server_w), pipe(server_r, client_w))

    loop = asyncio.new_event_loop()
    proxy = loop.run_until_complete(asyncio.start_server(serve, "127.0.0.1", 0))
    threading.Thread(target=loop.run_forever, daemon=True).start()
    return int(proxy.sockets[0].getsockname()[1])


def measure(location: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", location],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    ).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-s3", action="store_true")
    ap.add_argument(
        "--latency-ms",
        type=float,
        default=0.0,
        help="add this round trip to each S3 request (a proxy in front of moto's server)",
    )
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child)
        return
    by_files = [5, 50, 500, 5_000] + ([] if args.quick else [50_000])  # batches, one writer
    by_writers = [1, 10, 100, 1_000] + ([] if args.quick else [3_000])  # two batches each
    cases = [(1, b) for b in by_files] + [(w, 2) for w in by_writers]
    s3_max_files = 5_000
    server = None
    if not args.no_s3:
        from moto.server import ThreadedMotoServer

        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        if args.latency_ms:
            host, port = "127.0.0.1", latency_proxy(host, port, args.latency_ms / 2000)
        s3_env = {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": f"http://{host}:{port}",
        }
        os.environ.update(s3_env)
    print("| where | writers | files | episodes | open s | open us/file | iterate s "
          "| episodes/s | iterate us/file |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    root = tempfile.mkdtemp(prefix="gymrec-scale-")
    try:
        for writers, batches in cases:
            d = os.path.join(root, f"w{writers}-b{batches}")
            files = lay_out(d, writers, batches)
            places = [("local", d, None)]
            if server is not None and files <= s3_max_files:
                import s3fs

                fs = s3fs.S3FileSystem(endpoint_url=os.environ["AWS_ENDPOINT_URL"])
                bucket = f"scale-{writers}-{batches}"
                fs.mkdir(bucket)
                fs.put(d + "/", f"{bucket}/rec/", recursive=True)
                label = f"S3 (moto, +{args.latency_ms:g} ms)" if args.latency_ms else "S3 (moto)"
                places.append((label, f"s3://{bucket}/rec", None))
            for where, location, env in places:
                measure(location, env)  # (warm the page cache, or the server)
                r = measure(location, env)
                print(
                    f"| {where} | {writers:,} | {files:,} | {r['episodes']:,} | {r['open']:.3f} "
                    f"| {r['open'] / files * 1e6:.0f} | {r['iterate']:.3f} "
                    f"| {r['episodes'] / r['iterate']:,.0f} | {r['iterate'] / files * 1e6:.0f} |",
                    flush=True,
                )
            shutil.rmtree(d)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
