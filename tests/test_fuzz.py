"""Fuzz the reader with Hypothesis: mutated valid recordings are read or refused, nothing else.

Each example takes one of a few valid recordings (hand-made ones, and one written by the real
writer with Dict observations, split episodes, infos and odd option values), applies one to
three mutations (edit any JSON value, target an array reference's shape/dtype/offset/size/name,
flip, cut or append bytes, nest a file in brackets, remove, swap or symlink files), writes it to
a fresh directory and reads it three ways: ``gym_recording.load`` (every episode, and the
spaces), ``scan_recorded_traces`` and ``verify``. Reading must either succeed or raise
:class:`~gym_recording.TraceFormatError`; ``verify`` must never raise, and must call the
recording sound exactly when ``load`` reads all of it.

300 examples run in the suite; set ``GYMREC_FUZZ_EXAMPLES`` for a longer run, and pass
``--hypothesis-show-statistics`` to see how many were read and how many refused.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import gym_recording
from gym_recording import TraceFormatError, TraceRecording, scan_recorded_traces
from gym_recording.tools.verify import verify

sys.path.insert(0, str(Path(__file__).resolve().parent / "hostile"))
import make_cases

EXAMPLES = int(os.environ.get("GYMREC_FUZZ_EXAMPLES", "300"))


def _writer_recording(compression: str | None = None) -> dict[str, bytes]:
    """A recording by the real writer: Dict observations, parts, infos, odd values."""
    d = tempfile.mkdtemp(prefix="gymrec-fuzz-base-")
    try:
        rng = np.random.default_rng(0)
        with TraceRecording(
            d, batch_bytes=400, record_infos=True, metadata={"k": [1, 2]}, compression=compression
        ) as w:
            for e in range(3):
                options = {
                    "t": (1, "x"),
                    "b": b"\x00\xff",
                    "s": np.array(["ab", "c"]),
                    "nan": float("nan"),
                    3: np.int16(7),
                }
                w.add_reset(
                    {"pos": rng.random(2, dtype=np.float32), "img": np.zeros((2, 2), np.uint8)},
                    seed=e,
                    options=options,
                    info={"i": np.arange(2)},
                )
                for s in range(4 + 3 * e):
                    w.add_step(
                        int(s % 3),
                        {
                            "pos": rng.random(2, dtype=np.float32),
                            "img": np.full((2, 2), s, np.uint8),
                        },
                        float(s),
                        terminated=s == 3 + 3 * e,
                        info={"s": s},
                    )
        return {p.name: p.read_bytes() for p in Path(d).iterdir()}
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _rec_files(rec: make_cases.Rec) -> dict[str, bytes]:
    return rec.files()


BASES: list[dict[str, bytes]] = [
    make_cases.base_files(),
    _rec_files(make_cases.base_split()),
    _writer_recording(),
    _writer_recording("zstd"),  # (compressed arrays, FORMAT.md §6.2)
]

# ---------------------------------------------------------------------------- strategies

NAMES = ["..", ".", "/etc/passwd", "../x", "a/b", "", "\x00", "link", "x.bin", "a" * 300]
DTYPES = ["O", "object", "|O", ">f8", "<f8", "V8", "i4,i4", "<U999999999", "U5", "float128"]
DTYPES += ["M8[s]", "bool", "uint8", "float32", "complex128", "int64"]
TYPES = ["ndarray", "jsonarray", "scalar", "tuple", "mapping", "bytes", "float", "repr", "dict"]
OPS = ["json", "json", "ref", "ref", "ref", "delete", "flip", "cut", "append", "nest"]
OPS += ["remove", "swap", "symlink"]
INTS = [0, 1, -1, 7, 8, 24, 2**31, 2**32, 2**62 + 6, 2**63 - 1, 2**63, 2**64, 2**64 + 8, 10**30]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from(INTS),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.sampled_from(NAMES + DTYPES + TYPES),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.sampled_from(["__type", "shape", "dtype", "data", "a"]), inner, max_size=4
        ),
    ),
    max_leaves=12,
)


def _deep(n: int, leaf: Any = 0) -> Any:
    v = leaf
    for _ in range(n):
        v = [v]
    return v


hostile_values = st.one_of(
    json_values,
    st.integers(90, 700).map(_deep),
    st.builds(
        lambda dt, shape, data: {"__type": "jsonarray", "dtype": dt, "shape": shape, "data": data},
        st.sampled_from(DTYPES),
        st.lists(st.sampled_from([0, 1, 2, 3, -1, 2**40]), max_size=3),
        json_values,
    ),
    st.builds(
        lambda shape, dtype, off, size, fn: {
            "__type": "ndarray",
            "shape": shape,
            "dtype": dtype,
            "npyoff": off,
            "size": size,
            "npyfile": fn,
        },
        st.lists(st.sampled_from(INTS[:8]), max_size=3),
        st.sampled_from(DTYPES),
        st.sampled_from(INTS),
        st.sampled_from(INTS),
        st.sampled_from(NAMES),
    ),
)


def _paths(v: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside parsed JSON (iteratively, breadth first)."""
    out = [prefix]
    stack = [(v, prefix)]
    while stack:
        cur, p = stack.pop()
        items = (
            cur.items()
            if isinstance(cur, dict)
            else enumerate(cur)
            if isinstance(cur, list)
            else ()
        )
        for k, c in items:
            out.append((*p, k))
            stack.append((c, (*p, k)))
    return out


def _refs(v: Any) -> list[dict[str, Any]]:
    out = []
    stack = [v]
    while stack:
        cur = stack.pop()
        if isinstance(cur, dict):
            if cur.get("__type") == "ndarray":
                out.append(cur)
            stack.extend(cur.values())
        elif isinstance(cur, list):
            stack.extend(cur)
    return out


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    parent[path[-1]] = value
    return doc


def _delete(doc: Any, path: tuple[Any, ...]) -> Any:
    if not path:
        return doc
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    del parent[path[-1]]
    return doc


def _dumps(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":"), allow_nan=True).encode()


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    """A mutated recording: files by name, plus symlinks (name -> target)."""
    files = dict(draw(st.sampled_from(BASES)))
    links: dict[str, str] = {}
    ops = []
    for _ in range(draw(st.integers(1, 3))):
        names = sorted(files)
        if not names:
            break
        json_names = [n for n in names if n.endswith(".json")]
        op = draw(st.sampled_from(OPS))
        if op in ("json", "ref", "delete") and not json_names:
            continue
        ops.append(op)
        name = draw(st.sampled_from(json_names if op in ("json", "ref", "delete") else names))
        data = files[name]
        if op in ("json", "ref", "delete"):
            try:
                doc = json.loads(data)
            except (ValueError, RecursionError):  # already broken or nested by a mutation
                continue
            if op == "ref":
                refs = _refs(doc)
                if not refs:
                    continue
                ref = refs[draw(st.integers(0, len(refs) - 1))]
                key = draw(
                    st.sampled_from(
                        ["shape", "dtype", "npyoff", "size", "npyfile", "order", "codec", "rawsize"]
                    )
                )
                ref[key] = draw(
                    {
                        "shape": st.one_of(
                            st.lists(st.sampled_from(INTS), max_size=4), hostile_values
                        ),
                        "dtype": st.one_of(st.sampled_from(DTYPES), scalars),
                        "npyoff": st.one_of(st.sampled_from(INTS), scalars),
                        "size": st.one_of(st.sampled_from(INTS), scalars),
                        "npyfile": st.one_of(st.sampled_from(NAMES + sorted(files)), scalars),
                        "order": st.sampled_from(["C", "F", None, 0]),
                        "codec": st.one_of(st.sampled_from(["zstd", "lz4", ""]), scalars),
                        "rawsize": st.one_of(st.sampled_from(INTS), scalars),
                    }[key]
                )
            else:
                paths = _paths(doc)
                path = paths[draw(st.integers(0, len(paths) - 1))]
                if op == "delete":
                    doc = _delete(doc, path)
                else:
                    doc = _set(doc, path, draw(hostile_values))
            try:
                files[name] = _dumps(doc)
            except RecursionError:  # a deep value inside a deep file: keep the file as it was
                continue
        elif op == "flip":
            if data:
                i = draw(st.integers(0, len(data) - 1))
                files[name] = (
                    data[:i] + bytes([data[i] ^ draw(st.integers(1, 255))]) + data[i + 1 :]
                )
        elif op == "cut":
            files[name] = data[: draw(st.integers(0, max(0, len(data) - 1)))]
        elif op == "append":
            files[name] = data + draw(st.binary(min_size=1, max_size=16))
        elif op == "nest":
            n = draw(st.sampled_from([10, 600, 5000, 100_000]))
            files[name] = b"[" * n + data + b"]" * n
        elif op == "remove":
            del files[name]
        elif op == "swap":
            other = draw(st.sampled_from(names))
            files[name], files[other] = files[other], files[name]
        elif op == "symlink":
            del files[name]
            links[name] = draw(st.sampled_from(["/etc/passwd", "/dev/zero", "../outside", *names]))
    return {"files": files, "links": links, "ops": ops}


def _write(directory: Path, rec: dict[str, Any]) -> None:
    for name, data in rec["files"].items():
        (directory / name).write_bytes(data)
    for name, target in rec["links"].items():
        os.symlink(target, directory / name)


def _read_all(directory: Path) -> None:
    with gym_recording.load(directory) as r:
        for ep in r:
            copy.copy(ep.observations)
        _ = r.observation_space, r.action_space, r.metadata


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(rec=mutated())
def test_mutated_recordings_are_read_or_refused(rec):
    """Reading a mutated recording succeeds or raises TraceFormatError; verify agrees."""
    root = Path(tempfile.mkdtemp(prefix="gymrec-fuzz-"))
    try:
        d = root / "rec"
        d.mkdir()
        _write(d, rec)
        try:
            _read_all(d)
            loaded = True
        except TraceFormatError:
            loaded = False
        try:
            scan_recorded_traces(d, lambda o, a, r: None)
            scanned = True
        except TraceFormatError:
            scanned = False
        report = verify(d)
        event(f"load {'read' if loaded else 'refused'}")
        event(f"verify {'sound' if report.ok else 'flagged'}")
        for op in rec["ops"]:
            event(f"mutation {op}")
        # load() only refuses more than scan (it also rebuilds the spaces).
        assert scanned or not loaded
        if report.ok:
            assert loaded, report.lines()
        if not scanned:
            assert not report.ok
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("base", range(len(BASES)))
def test_unmutated_bases_are_sound(tmp_path, base):
    """Every starting recording is itself read and verified without a problem."""
    _write(tmp_path, {"files": BASES[base], "links": {}})
    _read_all(tmp_path)
    assert verify(tmp_path).ok, verify(tmp_path).lines()
