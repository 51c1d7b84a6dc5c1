"""Build the hostile recordings in this folder: ``python tests/hostile/make_cases.py``.

Every case starts from the same small, valid recording (one writer, hand-fixed ids and times)
and breaks one thing, as an attacker or a damaged disk would. The result is committed, so that
the files can be read, diffed and fed to other readers (the browser viewer, other languages);
this script only documents and reproduces them. ``README.md`` gets one line per case saying
what it attacks.

The ``_outside`` folder is a valid recording that cases try to reach from inside theirs (by
``..``, absolute paths or symbolic links): a reader that follows them would read it happily.

Cases that git cannot hold (a FIFO, files of hundreds of megabytes) are made at test time by
``tests/test_hostile.py`` from :func:`base_files`.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
PREFIX = "openaigym.trace.0.1.hostile"
MANIFEST = f"{PREFIX}.manifest.json"
BATCH0 = f"{PREFIX}.ep000000000.json"
BIN0 = f"{PREFIX}.ep000000000.bin"
BATCH1 = f"{PREFIX}.ep000000002.json"
BIN1 = f"{PREFIX}.ep000000002.bin"


# --------------------------------------------------------------------------------------------
# The valid base recording
# --------------------------------------------------------------------------------------------


class Blob:
    """Arrays at 8-aligned offsets, as the writer lays them out (FORMAT.md §6.1)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.data = bytearray()

    def add(self, arr: np.ndarray) -> dict[str, Any]:
        self.data += b"\0" * (-len(self.data) % 8)
        off = len(self.data)
        arr = np.ascontiguousarray(arr)
        self.data += arr.tobytes()
        return ndarray_ref(self.name, arr, off)


def ndarray_ref(name: str, arr: np.ndarray, off: int) -> dict[str, Any]:
    """The batch JSON's reference to ``arr``, stored at byte ``off`` of blob ``name``."""
    return {
        "__type": "ndarray",
        "shape": list(arr.shape),
        "order": "C",
        "dtype": arr.dtype.name,
        "npyfile": name,
        "npyoff": off,
        "size": arr.nbytes,
    }


def edit_ref(key: str, i: int = 1, **changes: Any) -> Callable[[list[dict[str, Any]]], None]:
    """An edit of a batch's episode objects: object ``i``'s reference ``key`` gets ``changes``."""

    def edit(eps: list[dict[str, Any]]) -> None:
        eps[i][key].update(changes)

    return edit


def _episode(blob: Blob, steps: int, k: int, **flags: Any) -> dict[str, Any]:
    obs = (np.arange((steps + 1) * 2, dtype=np.float32) + k).reshape(steps + 1, 2)
    ep = {
        "actions": blob.add(np.arange(steps, dtype=np.int64) % 2),
        "observations": blob.add(obs),
        "rewards": blob.add(np.ones(steps, dtype=np.float64)),
        "terminated": False,
        "truncated": False,
        "seed": k,
        "options": None,
    }
    ep.update(flags)
    return ep


def _manifest(entries: list[dict[str, Any]], writer: str = "0.1.hostile") -> dict[str, Any]:
    return {
        "batches": entries,
        "format": "gym-recording",
        "format_version": "2.0",
        "writer": writer,
        "created": "2024-01-01T00:00:00+00:00",
        "env_id": None,
        "env_spec": None,
        "observation_space": None,
        "action_space": None,
        "versions": {},
        "metadata": {},
        "record_infos": False,
        "segment": 0,
    }


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def write_batches(
    directory: Path,
    prefix: str,
    batches: list[tuple[list[Any], str | None, bytes, bytes | None]],
    *,
    env_id: str,
    continues: tuple[int, ...] = (),
) -> None:
    """Write a version-2 recording of one writer (for the reader's tests).

    Each batch is ``(episode objects, blob name or None, blob bytes, batch JSON bytes or
    None)``: its JSON file is those bytes, or the objects dumped; a blob without a name gets
    the writer's (``<prefix>.ep<first>.bin``). The manifest (``prefix``'s, writer id
    taken from it) lists every batch with its byte count; those in ``continues`` continue.
    """
    directory.mkdir(parents=True, exist_ok=True)
    entries = []
    first = 0
    for i, (objs, bin_name, blob, raw) in enumerate(batches):
        fn = f"{prefix}.ep{first:09d}.json"
        bin_name = bin_name or f"{prefix}.ep{first:09d}.bin"
        data = raw or json.dumps({"episodes": objs}).encode()
        (directory / fn).write_bytes(data)
        (directory / bin_name).write_bytes(blob)
        entry: dict[str, Any] = {"first": first, "len": len(objs), "fn": fn, "bin": bin_name}
        entry["bytes"] = len(data) + len(blob)
        if i in continues:
            entry["continues"] = True
        entries.append(entry)
        first += len(objs)
    manifest = _manifest(entries, writer=prefix.removeprefix("openaigym.trace."))
    manifest["env_id"] = env_id
    (directory / f"{prefix}.manifest.json").write_bytes(dumps(manifest))


def _steps(episodes: list[Any]) -> int | None:
    total = 0
    for e in episodes:
        r = e.get("rewards") if isinstance(e, dict) else None
        if isinstance(r, list):
            total += len(r)
        elif isinstance(r, dict) and isinstance(r.get("shape"), list) and r["shape"]:
            if not isinstance(r["shape"][0], int):
                return None
            total += r["shape"][0]
        else:
            return None
    return total


class Rec:
    """A recording being built: JSON documents (editable) and raw files, by name."""

    def __init__(self) -> None:
        self.json: dict[str, Any] = {}
        self.raw: dict[str, bytes] = {}
        self.links: dict[str, str] = {}  # name -> symlink target
        self.dirs: list[str] = []  # subdirectories (each gets a README so that git keeps it)

    def finish_entries(self) -> None:
        """Recompute ``steps`` and ``bytes`` of the manifest's entries from the files, so that
        a case is refused for what it breaks, not for sizes that no longer match."""
        m = self.json.get(MANIFEST)
        if not isinstance(m, dict) or not isinstance(m.get("batches"), list):
            return
        for entry in m["batches"]:
            fn = entry.get("fn") if isinstance(entry, dict) else None
            batch = self.json.get(fn) if isinstance(fn, str) else None
            if not isinstance(batch, dict) or not isinstance(batch.get("episodes"), list):
                continue
            steps = _steps(batch["episodes"])
            if steps is not None:
                entry["steps"] = steps
            if entry.get("bin") in self.raw:
                entry["bytes"] = len(dumps(batch)) + len(self.raw[entry["bin"]])

    def files(self) -> dict[str, bytes]:
        out = dict(self.raw)
        out.update({k: dumps(v) for k, v in self.json.items()})
        return out

    def write(self, directory: Path) -> None:
        directory.mkdir(parents=True)
        for name, data in self.files().items():
            (directory / name).write_bytes(data)
        for name, target in self.links.items():
            os.symlink(target, directory / name)
        for name in self.dirs:
            (directory / name).mkdir(exist_ok=True)
            (directory / name / "README").write_text("a directory where a file is expected\n")


def base() -> Rec:
    """One batch of two episodes: 2 steps terminated, 1 step truncated."""
    rec = Rec()
    blob = Blob(BIN0)
    eps = [_episode(blob, 2, 0, terminated=True), _episode(blob, 1, 1, truncated=True)]
    rec.json[BATCH0] = {"episodes": eps}
    rec.raw[BIN0] = bytes(blob.data)
    rec.json[MANIFEST] = _manifest([{"first": 0, "len": 2, "fn": BATCH0, "bin": BIN0}])
    rec.finish_entries()
    return rec


def base_split() -> Rec:
    """Two batches: one episode, then an episode of 3 steps split 2 + 1 across the batches."""
    rec = Rec()
    b0, b1 = Blob(BIN0), Blob(BIN1)
    first = _episode(b0, 2, 5, continues=True)
    second = _episode(b1, 1, 9, part=1, terminated=True, seed=None)  # (its first row: a copy)
    rec.json[BATCH0] = {"episodes": [_episode(b0, 1, 4, terminated=True), first]}
    rec.json[BATCH1] = {"episodes": [second]}
    rec.raw[BIN0], rec.raw[BIN1] = bytes(b0.data), bytes(b1.data)
    rec.json[MANIFEST] = _manifest(
        [
            {"first": 0, "len": 2, "fn": BATCH0, "bin": BIN0, "continues": True},
            {"first": 2, "len": 1, "fn": BATCH1, "bin": BIN1},
        ]
    )
    rec.finish_entries()
    return rec


def base_files() -> dict[str, bytes]:
    """The files of the valid base recording, by name."""
    return base().files()


# --------------------------------------------------------------------------------------------
# The cases
# --------------------------------------------------------------------------------------------

CASES: dict[str, tuple[str, Callable[[], Rec]]] = {}


def case(
    name: str, what: str, split: bool = False, totals: bool = True
) -> Callable[[Callable[[Rec], Any]], Any]:
    """Register a case: ``what`` it attacks; ``totals=False`` keeps the manifest's steps and
    bytes as the mutation left them."""

    def deco(fn: Callable[[Rec], Any]) -> Callable[[Rec], Any]:
        def build() -> Rec:
            rec = base_split() if split else base()
            fn(rec)
            if totals:
                rec.finish_entries()
            return rec

        CASES[name] = (what, build)
        return fn

    return deco


def entry(rec: Rec, i: int = 0) -> dict[str, Any]:
    return rec.json[MANIFEST]["batches"][i]


def ep(rec: Rec, j: int = 0, batch: str = BATCH0) -> dict[str, Any]:
    return rec.json[batch]["episodes"][j]


def ref(rec: Rec, key: str = "observations", j: int = 0) -> dict[str, Any]:
    return ep(rec, j)[key]


# ---- names: every name taken from a file must be a plain name inside the directory


@case("manifest-bad-writer-id", "a second manifest whose writer id breaks §1 (`0..1`)")
def _(rec: Rec) -> None:
    rec.json["openaigym.trace.0..1.manifest.json"] = rec.json[MANIFEST]


@case("fn-dotdot", "batch `fn` climbs out of the directory with `../`")
def _(rec: Rec) -> None:
    entry(rec)["fn"] = f"../_outside/{BATCH0}"


@case("fn-absolute", "batch `fn` is an absolute path (`/etc/passwd`)")
def _(rec: Rec) -> None:
    entry(rec)["fn"] = "/etc/passwd"


@case("fn-subdir", "batch `fn` names a file in a subdirectory (`sub/...`)")
def _(rec: Rec) -> None:
    entry(rec)["fn"] = f"sub/{BATCH0}"
    rec.dirs.append("sub")


@case("fn-backslash", "batch `fn` uses a Windows separator (`..\\\\x`)")
def _(rec: Rec) -> None:
    entry(rec)["fn"] = f"..\\{BATCH0}"


@case("fn-dot", "batch `fn` is `.` (the directory itself)")
def _(rec: Rec) -> None:
    entry(rec)["fn"] = "."


@case("fn-nul", "batch `fn` holds a NUL byte (C readers would cut the name there)")
def _(rec: Rec) -> None:
    entry(rec)["fn"] = BATCH0 + "\u0000../../etc/passwd"


@case("fn-surrogate", "batch `fn` holds a lone UTF-16 surrogate, which no filesystem can encode")
def _(rec: Rec) -> None:
    entry(rec)["fn"] = "\ud800" + BATCH0


@case("fn-too-long", "batch `fn` is 300 bytes long (more than a file name may be)")
def _(rec: Rec) -> None:
    entry(rec)["fn"] = "a" * 300


@case("fn-not-string", "batch `fn` is a number")
def _(rec: Rec) -> None:
    entry(rec)["fn"] = 42


@case("bin-dotdot", "the manifest's `bin` name climbs out of the directory")
def _(rec: Rec) -> None:
    entry(rec)["bin"] = f"../_outside/{BIN0}"


@case("npyfile-dotdot", "an array's `npyfile` climbs out of the directory with `../`")
def _(rec: Rec) -> None:
    ref(rec)["npyfile"] = f"../_outside/{BIN0}"


@case("npyfile-absolute", "an array's `npyfile` is an absolute path (`/dev/zero`)")
def _(rec: Rec) -> None:
    ref(rec)["npyfile"] = "/dev/zero"


@case("npyfile-symlink-out", "an array's `npyfile` is a symbolic link to a blob outside")
def _(rec: Rec) -> None:
    ref(rec)["npyfile"] = "link.bin"
    rec.links["link.bin"] = f"../_outside/{BIN0}"


@case("npyfile-symlink-passwd", "the blob itself is a symbolic link to `/etc/passwd`")
def _(rec: Rec) -> None:
    del rec.raw[BIN0]
    rec.links[BIN0] = "/etc/passwd"


@case("batch-symlink-out", "the batch JSON is a symbolic link to a batch outside")
def _(rec: Rec) -> None:
    del rec.json[BATCH0]
    rec.links[BATCH0] = f"../_outside/{BATCH0}"


@case("manifest-symlink-out", "the manifest is a symbolic link to a manifest outside")
def _(rec: Rec) -> None:
    del rec.json[MANIFEST]
    rec.links[MANIFEST] = f"../_outside/{MANIFEST}"


@case("batch-is-directory", "the batch JSON named by the manifest is a directory")
def _(rec: Rec) -> None:
    del rec.json[BATCH0]
    rec.dirs.append(BATCH0)


@case("blob-is-directory", "the blob named by `npyfile` is a directory")
def _(rec: Rec) -> None:
    del rec.raw[BIN0]
    rec.dirs.append(BIN0)


@case("manifest-is-directory", "a directory is named like a manifest")
def _(rec: Rec) -> None:
    rec.dirs.append("openaigym.trace.9.9.manifest.json")


# ---- dtypes: only the allow-list, never object


@case("dtype-object", "an array reference asks for `object` dtype (pickles, pointers)")
def _(rec: Rec) -> None:
    ref(rec)["dtype"] = "object"


@case("dtype-O", "an array reference asks for numpy's `|O` object dtype")
def _(rec: Rec) -> None:
    ref(rec)["dtype"] = "|O"


@case("dtype-big-endian", "an array reference asks for `>f4` (byte order is fixed little-endian)")
def _(rec: Rec) -> None:
    ref(rec)["dtype"] = ">f4"


@case("dtype-structured", "an array reference asks for a structured dtype `f4,f4`")
def _(rec: Rec) -> None:
    ref(rec)["dtype"] = "f4,f4"


@case("dtype-datetime", "an array reference asks for `datetime64` (not on the allow-list)")
def _(rec: Rec) -> None:
    ref(rec)["dtype"] = "datetime64[s]"
    ref(rec)["size"] = 48


@case("dtype-not-string", "an array's dtype is a number")
def _(rec: Rec) -> None:
    ref(rec)["dtype"] = 4


# ---- shapes: lists of non-negative ints whose byte size does not overflow


@case("shape-negative", "a shape holds -1 (numpy would infer it)")
def _(rec: Rec) -> None:
    ref(rec)["shape"] = [-1, 2]


@case("shape-bool", "a shape holds `true` (a bool is not an int)")
def _(rec: Rec) -> None:
    ref(rec)["shape"] = [3, True, 2]


@case("shape-float", "a shape holds `3.0`")
def _(rec: Rec) -> None:
    ref(rec)["shape"] = [3.0, 2]


@case("shape-wraps-64bit", "shape `[2**62+6]` float32: its byte size wraps to `size` 24 mod 2**64")
def _(rec: Rec) -> None:
    ref(rec)["shape"] = [2**62 + 6]


@case("shape-huge", "shape `[2**40, 2**40]` with the exact (huge) `size`")
def _(rec: Rec) -> None:
    ref(rec)["shape"] = [2**40, 2**40]
    ref(rec)["size"] = 2**80 * 4


@case("shape-huge-digits", "a shape dimension of 4000 decimal digits")
def _(rec: Rec) -> None:
    ref(rec)["shape"] = [10**3999, 0]
    ref(rec)["size"] = 0


@case("shape-zero-huge", "shape `[0, 2**63]`: empty, but no array of it can exist")
def _(rec: Rec) -> None:
    ep(rec)["options"] = {
        "__type": "ndarray",
        "shape": [0, 2**63],
        "order": "C",
        "dtype": "float64",
        "npyfile": BIN0,
        "npyoff": 0,
        "size": 0,
    }


@case("shape-33-dims", "a shape of 33 dimensions")
def _(rec: Rec) -> None:
    ref(rec)["shape"] = [3, 2] + [1] * 31


@case("shape-not-list", "a shape given as the string `3x2`")
def _(rec: Rec) -> None:
    ref(rec)["shape"] = "3x2"


@case("shape-nan", "a shape holds the non-standard JSON token `NaN`")
def _(rec: Rec) -> None:
    ref(rec)["shape"] = [float("nan"), 2]


# ---- size and offset


@case("size-mismatch", "`size` is not `prod(shape) * itemsize`")
def _(rec: Rec) -> None:
    ref(rec)["size"] = 23


@case("size-bool", "`size` is `true` for a one-byte array (true == 1 in Python)")
def _(rec: Rec) -> None:
    r = ref(rec, "actions", 1)
    r.update(dtype="bool", shape=[1], size=True)


@case("size-float", "`size` is `24.0`")
def _(rec: Rec) -> None:
    ref(rec)["size"] = 24.0


@case("npyoff-negative", "`npyoff` is -8 (before the start of the blob)")
def _(rec: Rec) -> None:
    ref(rec)["npyoff"] = -8


@case("npyoff-past-end", "`npyoff + size` runs past the end of the blob")
def _(rec: Rec) -> None:
    ref(rec)["npyoff"] = len(rec.raw[BIN0]) - 8


@case("npyoff-bool", "`npyoff` is `false` (false == 0 in Python)")
def _(rec: Rec) -> None:
    ref(rec, "actions")["npyoff"] = False


@case("npyoff-float", "`npyoff` is `16.0`")
def _(rec: Rec) -> None:
    ref(rec)["npyoff"] = float(ref(rec)["npyoff"])


@case("npyoff-wraps-64bit", "`npyoff` is 2**64 + 16, which wraps to a valid offset in C")
def _(rec: Rec) -> None:
    ref(rec)["npyoff"] = 2**64 + ref(rec)["npyoff"]


@case("blob-truncated", "the blob is 4 bytes shorter than its arrays need")
def _(rec: Rec) -> None:
    rec.raw[BIN0] = rec.raw[BIN0][:-4]


@case("blob-missing", "the blob does not exist")
def _(rec: Rec) -> None:
    del rec.raw[BIN0]


@case(
    "blob-extended",
    "bytes appended to the blob: the manifest's `bytes` no longer match",
    totals=False,
)
def _(rec: Rec) -> None:
    rec.raw[BIN0] += b"\0" * 8


@case("overlap-fields", "observations and actions share bytes of the blob")
def _(rec: Rec) -> None:
    obs = ref(rec)
    ref(rec, "actions").update(npyoff=obs["npyoff"])


@case(
    "overlap-bomb",
    "version 1 style per-step list of 2048 references to the same 64 KiB: stacking them would "
    "allocate 128 MiB from a 300 KB file",
)
def _(rec: Rec) -> None:
    big = np.zeros(16384, dtype=np.float32)
    blob = Blob(BIN0)
    blob.data = bytearray(rec.raw[BIN0])
    r = blob.add(big)
    rec.raw[BIN0] = bytes(blob.data)
    e = ep(rec)
    e["observations"] = [dict(r) for _ in range(2048)]
    e["actions"] = [0] * 2047
    e["rewards"] = [0.0] * 2047


# ---- counts: episodes, steps and sizes against the manifest; first/len chain


@case("len-too-big", "the manifest lists 3 episodes for a batch of 2")
def _(rec: Rec) -> None:
    entry(rec)["len"] = 3


@case(
    "len-past-int64",
    "two batches of 2**62 episodes each: more than a batch file can hold, and together more "
    "than an index can count",
    split=True,
)
def _(rec: Rec) -> None:
    entry(rec, 0)["len"] = entry(rec, 1)["len"] = 2**62
    entry(rec, 1)["first"] = 2**62


@case("len-too-small", "the manifest lists 1 episode for a batch of 2")
def _(rec: Rec) -> None:
    entry(rec)["len"] = 1


@case("first-nonzero", "the first batch starts at episode 5: episodes 0-4 are missing")
def _(rec: Rec) -> None:
    entry(rec)["first"] = 5


@case("first-gap", "the second batch's `first` skips an episode", split=True)
def _(rec: Rec) -> None:
    entry(rec, 1)["first"] = 3


@case("first-negative", "`first` is -1")
def _(rec: Rec) -> None:
    entry(rec)["first"] = -1


@case("len-bool", "`len` is `true`")
def _(rec: Rec) -> None:
    entry(rec)["len"] = True


@case("fn-listed-twice", "one batch file listed by two entries: its episodes would be read twice")
def _(rec: Rec) -> None:
    rec.json[MANIFEST]["batches"].append(dict(entry(rec), first=2))


@case("batch-of-two-manifests", "a second writer's manifest lists the first writer's batch")
def _(rec: Rec) -> None:
    other = "openaigym.trace.0.2.hostile.manifest.json"
    m = _manifest([dict(entry(rec))], writer="0.2.hostile")
    m["created"] = "2024-01-01T00:00:01+00:00"
    rec.json[other] = m


@case("steps-mismatch", "the manifest's `steps` disagree with the batch", totals=False)
def _(rec: Rec) -> None:
    entry(rec)["steps"] = 99


@case("steps-not-int", "the manifest's `steps` is a string", totals=False)
def _(rec: Rec) -> None:
    entry(rec)["steps"] = "3"


@case("continues-not-bool", "the manifest's `continues` is the string `yes`")
def _(rec: Rec) -> None:
    entry(rec)["continues"] = "yes"


# ---- JSON size and nesting


@case("json-deep-batch", "the batch JSON is 100000 nested lists (a RecursionError bomb)")
def _(rec: Rec) -> None:
    del rec.json[BATCH0]
    rec.raw[BATCH0] = b"[" * 100_000 + b"]" * 100_000


@case("json-deep-manifest", "the manifest's metadata nests 800 levels deep")
def _(rec: Rec) -> None:
    v: Any = {}
    for _ in range(800):
        v = {"a": v}
    rec.json[MANIFEST]["metadata"] = v


@case("json-deep-observations", "observations stored as a list nested 300 levels deep")
def _(rec: Rec) -> None:
    v: Any = [0.0]
    for _ in range(300):
        v = [v]
    e = ep(rec)
    e["observations"] = [v, v, v]


@case("json-deep-values", "reset options nest 200 tuple wrappers deep")
def _(rec: Rec) -> None:
    v: Any = 1
    for _ in range(200):
        v = {"__type": "tuple", "items": [v]}
    ep(rec)["options"] = v


@case("json-truncated", "the manifest JSON is cut off in the middle")
def _(rec: Rec) -> None:
    data = dumps(rec.json.pop(MANIFEST))
    rec.raw[MANIFEST] = data[: len(data) // 2]


@case("json-not-utf8", "the batch JSON holds bytes that are not UTF-8")
def _(rec: Rec) -> None:
    data = dumps(rec.json.pop(BATCH0))
    rec.raw[BATCH0] = data.replace(b'"seed"', b'"s\xff\xfed"', 1)


@case("json-huge-int", "a manifest number of 5000 digits (Python refuses to parse it)")
def _(rec: Rec) -> None:
    data = dumps(rec.json.pop(MANIFEST))
    rec.raw[MANIFEST] = data.replace(b'"first":0', b'"first":' + b"9" * 5000, 1)


@case("manifest-not-object", "the manifest is a JSON list")
def _(rec: Rec) -> None:
    rec.json[MANIFEST] = [rec.json[MANIFEST]]


@case("batches-not-list", "the manifest's `batches` is an object")
def _(rec: Rec) -> None:
    rec.json[MANIFEST]["batches"] = {"0": entry(rec)}


@case("format-version-future", "`format_version` 3.0: a format this reader does not know")
def _(rec: Rec) -> None:
    rec.json[MANIFEST]["format_version"] = "3.0"


@case("format-version-number", "`format_version` is the number 2")
def _(rec: Rec) -> None:
    rec.json[MANIFEST]["format_version"] = 2


@case("format-version-zero", "`format_version` 0.9: a major version no writer wrote")
def _(rec: Rec) -> None:
    rec.json[MANIFEST]["format_version"] = "0.9"


@case("format-version-1-minor", "`format_version` 1.5: version 1 has no minor versions")
def _(rec: Rec) -> None:
    rec.json[MANIFEST]["format_version"] = "1.5"


@case("nan-token-v2", "a version 2 batch holds a `NaN` token (only version 1 files may)")
def _(rec: Rec) -> None:
    ep(rec)["options"] = {"x": float("nan")}


@case("render-fps-zero", "the manifest's `render_fps` is 0 (it must be positive)")
def _(rec: Rec) -> None:
    rec.json[MANIFEST]["render_fps"] = 0


@case("bytes-without-bin", "a batch entry without `bin` whose `bytes` do not match its files")
def _(rec: Rec) -> None:
    del entry(rec)["bin"]
    entry(rec)["bytes"] = 1


# ---- batch and episode structure


@case("batch-not-object", "the batch JSON is a list")
def _(rec: Rec) -> None:
    rec.json[BATCH0] = rec.json[BATCH0]["episodes"]


@case("batch-is-manifest", "the manifest lists itself as its batch")
def _(rec: Rec) -> None:
    entry(rec)["fn"] = MANIFEST


@case("batch-missing", "the manifest lists a batch file that does not exist")
def _(rec: Rec) -> None:
    del rec.json[BATCH0]


@case("episodes-not-list", "the batch's `episodes` is a string")
def _(rec: Rec) -> None:
    rec.json[BATCH0]["episodes"] = "ab"
    entry(rec)["len"] = 2


@case("episode-not-object", "an episode is a number")
def _(rec: Rec) -> None:
    rec.json[BATCH0]["episodes"][1] = 7


@case("episode-no-rewards", "an episode has no `rewards`")
def _(rec: Rec) -> None:
    del ep(rec)["rewards"]


@case("steps-disagree", "3 observations and 2 actions but 1 reward (N+1/N/N broken)")
def _(rec: Rec) -> None:
    r = ref(rec, "rewards")
    r.update(shape=[1], size=8)


@case("rewards-2d", "rewards of shape [2, 1]")
def _(rec: Rec) -> None:
    ref(rec, "rewards")["shape"] = [2, 1]


@case("rewards-complex", "rewards of dtype complex64")
def _(rec: Rec) -> None:
    ref(rec, "rewards")["dtype"] = "complex64"


@case("rewards-strings", 'rewards stored as a list holding the string `"1.5"`')
def _(rec: Rec) -> None:
    ep(rec, 1)["rewards"] = ["1.5"]


@case("rewards-huge-int", "rewards stored as a list holding 10**400 (no float can hold it)")
def _(rec: Rec) -> None:
    ep(rec, 1)["rewards"] = [10**400]


@case("terminated-not-bool", "`terminated` is the string `yes`")
def _(rec: Rec) -> None:
    ep(rec)["terminated"] = "yes"


@case("seed-not-int", "`seed` is 1.5")
def _(rec: Rec) -> None:
    ep(rec)["seed"] = 1.5


@case("started-at-huge", "`started_at` is 10**400 (no float can hold it)")
def _(rec: Rec) -> None:
    ep(rec)["started_at"] = 10**400


@case("ended-at-string", "`ended_at` is the string `now`")
def _(rec: Rec) -> None:
    ep(rec)["ended_at"] = "now"


@case("infos-wrong-length", "`infos` holds 1 value for an episode of 2 steps (needs 3)")
def _(rec: Rec) -> None:
    ep(rec)["infos"] = [{}]


@case("field-0d", "observations are a 0-d array: no step axis")
def _(rec: Rec) -> None:
    r = ref(rec)
    r.update(shape=[], size=4)


@case("field-unknown", "observations are a bare number")
def _(rec: Rec) -> None:
    ep(rec)["observations"] = 3


# ---- split episodes: parts and continues


@case("part-without-start", "the first episode of the recording claims to be part 1")
def _(rec: Rec) -> None:
    ep(rec)["part"] = 1


@case("continues-mid-batch", "an episode that is not the batch's last claims to continue")
def _(rec: Rec) -> None:
    ep(rec)["continues"] = True


@case(
    "continues-unlisted",
    "an episode continues but the manifest does not say so: the next batch's first part would "
    "be read twice",
    split=True,
)
def _(rec: Rec) -> None:
    entry(rec)["continues"] = False


@case(
    "continues-dropped",
    "the manifest says the batch continues but its last episode does not: a part would be lost",
    split=True,
)
def _(rec: Rec) -> None:
    ep(rec, 1)["continues"] = False


@case("part-gap", "an episode's second part is numbered 3", split=True)
def _(rec: Rec) -> None:
    ep(rec, 0, BATCH1)["part"] = 3


@case(
    "parts-do-not-join", "an episode's two parts have observations of different widths", split=True
)
def _(rec: Rec) -> None:
    r = ep(rec, 0, BATCH1)["observations"]
    r.update(shape=[2, 1], size=8)


@case(
    "part-not-a-copy",
    "an episode's second part does not begin with the observation its first part ends with "
    "(a copy, FORMAT.md §4): a reader would drop the one it holds unseen",
    split=True,
)
def _(rec: Rec) -> None:
    off = ep(rec, 0, BATCH1)["observations"]["npyoff"]
    data = bytearray(rec.raw[BIN1])
    data[off : off + 4] = np.float32(-1).tobytes()
    rec.raw[BIN1] = bytes(data)


@case(
    "join-bomb",
    "the second part of a split episode references the first batch's blob, the same bytes as "
    "the first part (joined N times over, N files of 8 MiB would make one episode of N x 8 MiB)",
    split=True,
)
def _(rec: Rec) -> None:
    first = ep(rec, 1)["observations"]
    ep(rec, 0, BATCH1)["observations"].update(
        npyfile=BIN0, npyoff=first["npyoff"], shape=[2, 2], size=16
    )


@case(
    "overlap-across-episodes",
    "the second episode's observations are the first episode's bytes (two episodes, one region)",
)
def _(rec: Rec) -> None:
    a = ep(rec, 0)["observations"]
    ep(rec, 1)["observations"].update(npyoff=a["npyoff"], shape=[2, 2], size=16)


@case(
    "parts-dict-then-array",
    "an episode's first part has Dict observations, the second an array",
    split=True,
)
def _(rec: Rec) -> None:
    first = ep(rec, 1)
    first["observations"] = {"__type": "dict", "fields": {"x": first["observations"]}}


@case(
    "parts-f32-then-c128",
    "an episode's parts have float32 then complex128 observations (joining would cast)",
    split=True,
)
def _(rec: Rec) -> None:
    r = ep(rec, 0, BATCH1)["observations"]
    blob = Blob(BIN1)
    blob.data = bytearray(rec.raw[BIN1])
    c = blob.add(np.zeros((2, 2), dtype=np.complex128))
    rec.raw[BIN1] = bytes(blob.data)
    r.update(c)


@case("parts-infos-one-part", "infos are recorded in the first part of an episode only", split=True)
def _(rec: Rec) -> None:
    ep(rec, 1)["infos"] = [{}, {}, {}]


@case("fn-other-writer", "the manifest lists a batch file named with another writer's prefix")
def _(rec: Rec) -> None:
    other = "openaigym.trace.0.2.other.ep000000000.json"
    rec.json[other] = rec.json.pop(BATCH0)
    entry(rec)["fn"] = other


@case("fn-temp-name", "the manifest lists a batch under a temporary file's name (`.gymrec-tmp-*`)")
def _(rec: Rec) -> None:
    tmp = ".gymrec-tmp-abc123"
    rec.json[tmp] = rec.json.pop(BATCH0)
    entry(rec)["fn"] = tmp


@case("json-utf16", "the batch JSON is UTF-16 (FORMAT.md §2: UTF-8 only)")
def _(rec: Rec) -> None:
    rec.raw[BATCH0] = dumps(rec.json.pop(BATCH0)).decode().encode("utf-16")


@case("json-utf32-manifest", "the manifest is UTF-32")
def _(rec: Rec) -> None:
    rec.raw[MANIFEST] = dumps(rec.json.pop(MANIFEST)).decode().encode("utf-32")


@case("json-bom", "the batch JSON starts with a UTF-8 byte order mark")
def _(rec: Rec) -> None:
    rec.raw[BATCH0] = b"\xef\xbb\xbf" + dumps(rec.json.pop(BATCH0))


@case("json-cesu8", "a string of the batch JSON holds CESU-8 surrogate bytes (not UTF-8)")
def _(rec: Rec) -> None:
    ep(rec)["options"] = {"s": "SURROGATE"}
    data = dumps(rec.json.pop(BATCH0))
    rec.raw[BATCH0] = data.replace(b"SURROGATE", b"\xed\xa0\x80\xed\xb0\x80")


@case(
    "jsonarray-wide-strings",
    "a jsonarray of 4000 one-character strings of dtype `<U1000`: 16 MB in memory from 20 KB "
    "of JSON (more than 16 times the batch's JSON)",
)
def _(rec: Rec) -> None:
    ep(rec)["options"] = _jsonarray("<U1000", [4000], ["a"] * 4000)


@case("jsonarray-no-width", "a jsonarray of dtype `<U` (no width: numpy sizes it by its data)")
def _(rec: Rec) -> None:
    ep(rec)["options"] = _jsonarray("<U", [2], ["a" * 1000, "b"])


@case("jsonarray-cut-strings", "a jsonarray of dtype `<U1` holding `abc` (numpy would cut it)")
def _(rec: Rec) -> None:
    ep(rec)["options"] = _jsonarray("<U1", [2], ["abc", "x"])


@case("jsonarray-null-float", "a float64 jsonarray holding `null` (numpy would make it NaN)")
def _(rec: Rec) -> None:
    ep(rec)["options"] = _jsonarray("<f8", [2], [1.0, None])


@case("jsonarray-text-bool", 'a bool jsonarray holding `"a"` (numpy would make it true)')
def _(rec: Rec) -> None:
    ep(rec)["options"] = _jsonarray("|b1", [1], ["a"])


# ---- values (FORMAT.md §6)


def _jsonarray(dtype: Any, shape: Any, data: Any) -> dict[str, Any]:
    return {"__type": "jsonarray", "dtype": dtype, "shape": shape, "data": data}


@case("jsonarray-huge-strings", "a jsonarray of 1000 strings of dtype `<U100000000` (400 GB)")
def _(rec: Rec) -> None:
    ep(rec)["options"] = _jsonarray("<U100000000", [1000], [""] * 1000)


@case("jsonarray-void", "a jsonarray of raw `V8` (void) dtype")
def _(rec: Rec) -> None:
    ep(rec)["options"] = _jsonarray("V8", [1], [{"__type": "bytes", "base64": "AAAAAAAAAAA="}])


@case("jsonarray-structured", "a jsonarray of structured dtype `O,O`")
def _(rec: Rec) -> None:
    ep(rec)["options"] = _jsonarray("O,O", [1], [[1, 2]])


@case("jsonarray-bad-dtype", "a jsonarray whose dtype is not a numpy dtype")
def _(rec: Rec) -> None:
    ep(rec)["options"] = _jsonarray("__import__('os')", [1], [1])


@case("jsonarray-shape-lie", "an object jsonarray declaring shape [2, 2] around ragged data")
def _(rec: Rec) -> None:
    ep(rec)["options"] = _jsonarray("|O", [2, 2], [[1, 2], [3]])


@case("jsonarray-shape-negative", "a jsonarray of shape [-1]")
def _(rec: Rec) -> None:
    ep(rec)["options"] = _jsonarray("<i8", [-1], [1, 2])


@case("scalar-object", "a numpy scalar of dtype `object`")
def _(rec: Rec) -> None:
    ep(rec)["options"] = {"__type": "scalar", "dtype": "object", "value": 1}


@case("scalar-list", "an int64 scalar whose value is a list (numpy would make an array)")
def _(rec: Rec) -> None:
    ep(rec)["options"] = {"__type": "scalar", "dtype": "int64", "value": [1, 2, 3]}


@case("scalar-overflow", "an int8 scalar of value 1000")
def _(rec: Rec) -> None:
    ep(rec)["options"] = {"__type": "scalar", "dtype": "int8", "value": 1000}


@case("scalar-fraction", "an int64 scalar of value 1.5 (numpy would make it 1)")
def _(rec: Rec) -> None:
    ep(rec)["options"] = {"__type": "scalar", "dtype": "int64", "value": 1.5}


@case("scalar-bool-nan", "a bool scalar of value NaN (NaN is NaN in float dtypes only)")
def _(rec: Rec) -> None:
    nan = {"__type": "float", "value": "nan"}
    ep(rec)["options"] = {"__type": "scalar", "dtype": "bool", "value": nan}


@case("scalar-float16-overflow", "a float16 scalar of value 1e300 (numpy would make it inf)")
def _(rec: Rec) -> None:
    ep(rec)["options"] = {"__type": "scalar", "dtype": "float16", "value": 1e300}


@case("type-null", 'a value `{"__type": null}`: a typed value of no type')
def _(rec: Rec) -> None:
    ep(rec)["options"] = {"__type": None}


@case("complex-overflow", "a complex value whose real part is 10**400")
def _(rec: Rec) -> None:
    ep(rec)["options"] = {"__type": "complex", "real": 10**400, "imag": 0}


@case("unknown-type", "a value of `__type` `pickle`")
def _(rec: Rec) -> None:
    payload = base64.b64encode(b"cos\nsystem\n(S'echo hi'\ntR.").decode()
    ep(rec)["options"] = {"__type": "pickle", "data": payload}


@case("bytes-bad-base64", "a bytes value that is not base64")
def _(rec: Rec) -> None:
    ep(rec)["options"] = {"__type": "bytes", "base64": "@@@"}


@case("mapping-unhashable-key", "a mapping whose key is a dict")
def _(rec: Rec) -> None:
    ep(rec)["options"] = {"__type": "mapping", "items": [[{"a": 1}, 2]]}


@case("float-bad-token", "a non-finite float wrapper holding `1e999`")
def _(rec: Rec) -> None:
    ep(rec)["options"] = {"__type": "float", "value": "1e999"}


# ---- info columns (FORMAT.md §4, version 2.1): the step infos' keys as arrays


def info_columns(rec: Rec, values: np.ndarray | None = None, kind: str = "float") -> dict[str, Any]:
    """Episode 0 (2 steps) gets infos whose key ``x`` is a column; returns ``info_columns``."""
    values = np.array([0.5, 1.5]) if values is None else values
    blob = bytearray(rec.raw[BIN0])
    blob += b"\0" * (-len(blob) % 8)
    data = ndarray_ref(BIN0, values, len(blob))
    rec.raw[BIN0] = bytes(blob + values.tobytes())
    e = ep(rec)
    e["infos"] = [{"r": 0}, {}, {}]
    e["info_columns"] = {"order": ["x"], "columns": {"x": {"kind": kind, "data": data}}}
    return e["info_columns"]


@case("info-columns-without-infos", "`info_columns` in an episode object that has no infos")
def _(rec: Rec) -> None:
    info_columns(rec)
    del ep(rec)["infos"]


@case("info-columns-short", "an info column of 1 row for a 2-step episode object")
def _(rec: Rec) -> None:
    info_columns(rec, np.array([0.5]))


@case("info-columns-not-in-order", "an info column whose key `order` does not name")
def _(rec: Rec) -> None:
    info_columns(rec)["order"] = ["y"]


@case("info-columns-kind-dtype", "an info column of kind `float` holding int64")
def _(rec: Rec) -> None:
    info_columns(rec, np.array([1, 2], np.int64))


@case("info-columns-key-missing", "a step info lacks a key of `order` that is not a column")
def _(rec: Rec) -> None:
    info_columns(rec)["order"] = ["x", "y"]


@case("info-columns-key-twice", "a step info holds a key that is also a column")
def _(rec: Rec) -> None:
    info_columns(rec)
    ep(rec)["infos"][1] = {"x": 3}


@case("info-columns-rest-mapping", "a step info's other keys as a `mapping` object, not JSON's")
def _(rec: Rec) -> None:
    info_columns(rec)
    ep(rec)["infos"][1] = {"__type": "mapping", "items": [["y", 1]]}


@case("info-columns-rest-mapping-2", "the same after an empty reset info, before an empty step's")
def _(rec: Rec) -> None:
    info_columns(rec)
    ep(rec)["infos"][:2] = [{}, {"__type": "mapping", "items": [["y", 1]]}]


def render_frames(rec: Rec, frames: np.ndarray, j: int = 0) -> None:
    """Episode object ``j`` of the first batch gets ``frames`` as its ``render_frames``."""
    blob = bytearray(rec.raw[BIN0])
    blob += b"\0" * (-len(blob) % 8)
    ep(rec, j)["render_frames"] = ndarray_ref(BIN0, frames, len(blob))
    rec.raw[BIN0] = bytes(blob + frames.tobytes())


@case("render-frames-dtype", "rendered frames of float32, not uint8 (FORMAT.md §4, 2.2)")
def _(rec: Rec) -> None:
    render_frames(rec, np.zeros((3, 4, 5, 3), np.float32))


@case("render-frames-short", "2 rendered frames for an episode object of 3 observations")
def _(rec: Rec) -> None:
    render_frames(rec, np.zeros((2, 4, 5, 3), np.uint8))


@case("render-frames-rgba", "rendered frames of 4 channels, not RGB")
def _(rec: Rec) -> None:
    render_frames(rec, np.zeros((3, 4, 5, 4), np.uint8))


@case("render-frames-no-pixels", "rendered frames of 0 x 5 pixels")
def _(rec: Rec) -> None:
    render_frames(rec, np.zeros((3, 0, 5, 3), np.uint8))


@case("parts-render-one-part", "rendered frames in the first part of an episode only", split=True)
def _(rec: Rec) -> None:
    render_frames(rec, np.zeros((3, 4, 5, 3), np.uint8), 1)


# ---- compressed arrays (FORMAT.md §6.2): frames that do not hold what the reference declares


def zstd_ref(
    rec: Rec, frame: bytes | None = None, raw: bytes | None = None, **changes: Any
) -> dict[str, Any]:
    """Episode 0's observations compressed: ``frame`` (default: a true frame of ``raw``,
    default the array's bytes) appended to the blob, and the reference pointing at it."""
    import zstandard

    r = ref(rec)
    blob = bytearray(rec.raw[BIN0])
    data = raw if raw is not None else bytes(blob[r["npyoff"] : r["npyoff"] + r["size"]])
    if frame is None:
        frame = zstandard.ZstdCompressor(level=3).compress(data)
    blob += b"\0" * (-len(blob) % 8)
    r.update(codec="zstd", rawsize=r["size"], npyoff=len(blob), size=len(frame))
    r.update(changes)
    rec.raw[BIN0] = bytes(blob + frame)
    return r


@case("zstd-unknown-codec", "a compressed array names a codec no reader knows (`lz4`)")
def _(rec: Rec) -> None:
    zstd_ref(rec, codec="lz4")


@case("zstd-empty-codec", "a compressed array's codec is the empty string")
def _(rec: Rec) -> None:
    zstd_ref(rec, codec="")


@case("zstd-no-rawsize", "a compressed array has a codec but no `rawsize`")
def _(rec: Rec) -> None:
    del zstd_ref(rec)["rawsize"]


@case("zstd-rawsize-without-codec", "an array has a `rawsize` but no codec")
def _(rec: Rec) -> None:
    del zstd_ref(rec)["codec"]


@case("zstd-rawsize-wrong", "`rawsize` is not prod(shape) * itemsize")
def _(rec: Rec) -> None:
    r = zstd_ref(rec)
    r["rawsize"] += 4


@case("zstd-frame-larger", "the frame holds more bytes than `rawsize` (a decompression bomb)")
def _(rec: Rec) -> None:
    r = ref(rec)
    zstd_ref(rec, raw=bytes(r["size"]) * 4096)


@case("zstd-frame-smaller", "the frame holds fewer bytes than `rawsize`")
def _(rec: Rec) -> None:
    r = ref(rec)
    zstd_ref(rec, raw=bytes(r["size"] // 2))


@case("zstd-ratio-bomb", "a 12-byte frame declared as 2**40 raw bytes (more than zstd can expand)")
def _(rec: Rec) -> None:
    r = zstd_ref(rec)
    r["shape"] = [2**20, 2**18, 1]
    r["dtype"] = "float32"
    r["rawsize"] = 2**40


@case("zstd-no-content-size", "the frame does not declare its content size")
def _(rec: Rec) -> None:
    import zstandard

    r = ref(rec)
    data = bytes(rec.raw[BIN0][r["npyoff"] : r["npyoff"] + r["size"]])
    zstd_ref(rec, frame=zstandard.ZstdCompressor(write_content_size=False).compress(data))


@case("zstd-truncated", "the frame is cut short (its last 4 bytes missing)")
def _(rec: Rec) -> None:
    import zstandard

    r = ref(rec)
    data = bytes(rec.raw[BIN0][r["npyoff"] : r["npyoff"] + r["size"]])
    zstd_ref(rec, frame=zstandard.ZstdCompressor(level=3).compress(data)[:-4])


@case("zstd-empty-truncated", "a zero-step episode's rewards: an empty array's frame, cut short")
def _(rec: Rec) -> None:
    import zstandard

    blob = Blob(BIN0)
    blob.data = bytearray(rec.raw[BIN0])
    empty = _episode(blob, 0, 0)
    blob.data += b"\0" * (-len(blob.data) % 8)
    frame = zstandard.ZstdCompressor(level=3).compress(b"")[:-1]
    empty["rewards"].update(codec="zstd", rawsize=0, npyoff=len(blob.data), size=len(frame))
    rec.raw[BIN0] = bytes(blob.data + frame)
    rec.json[BATCH0]["episodes"][0] = empty


@case("zstd-corrupt", "the frame's compressed bytes are overwritten")
def _(rec: Rec) -> None:
    import zstandard

    r = ref(rec)
    data = bytes(rec.raw[BIN0][r["npyoff"] : r["npyoff"] + r["size"]] * 8)
    frame = bytearray(zstandard.ZstdCompressor(level=3).compress(data))
    frame[8:-1] = b"\xa5" * (len(frame) - 9)
    zstd_ref(rec, frame=bytes(frame), raw=data)
    r["shape"] = [r["shape"][0] * 8, 2]
    r["rawsize"] = len(data)


@case("zstd-checksum-mismatch", "the frame decodes, to bytes its content checksum does not match")
def _(rec: Rec) -> None:
    import zstandard

    r = ref(rec)
    data = bytes(rec.raw[BIN0][r["npyoff"] : r["npyoff"] + r["size"]])
    checksum = zstandard.ZstdCompressor(write_checksum=True).compress(data)[-4:]
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x10  # (a bit flipped on the disk: the frame still decodes)
    # One raw block (RFC 8878 §3.1.1): single segment, a 4-byte content size, a checksum.
    header = b"\x28\xb5\x2f\xfd\xa4" + len(data).to_bytes(4, "little")
    block = (len(data) << 3 | 1).to_bytes(3, "little")  # (the last block, raw)
    zstd_ref(rec, frame=header + block + bytes(flipped) + checksum)


@case("zstd-trailing-bytes", "the frame's `size` takes in bytes after the frame")
def _(rec: Rec) -> None:
    import zstandard

    r = ref(rec)
    data = bytes(rec.raw[BIN0][r["npyoff"] : r["npyoff"] + r["size"]])
    zstd_ref(rec, frame=zstandard.ZstdCompressor(level=3).compress(data) + b"junk")


@case("zstd-large-partial-tail", "6 MiB of image observations whose frame is followed by 3 bytes")
def _(rec: Rec) -> None:
    import zstandard

    data = bytes(3 * 2**21)  # (4 MiB or more: decompressed by the reader's streaming path)
    frame = zstandard.ZstdCompressor(level=3).compress(data) + b"\x28\xb5\x2f"
    r = zstd_ref(rec, frame=frame, raw=data)
    r.update(shape=[3, 1024, 512, 4], dtype="uint8", size=len(frame), rawsize=len(data))


@case("zstd-not-a-frame", "the compressed bytes are not a zstd frame")
def _(rec: Rec) -> None:
    zstd_ref(rec, frame=b"this is not zstd")


@case("zstd-overlap", "two compressed arrays share one frame's bytes (a field and an option)")
def _(rec: Rec) -> None:
    ep(rec, 1)["options"] = dict(zstd_ref(rec))


@case(
    "zstd-overlap-bomb",
    "a per-step list of 2001 compressed references to one 37-byte frame of 1 MiB: decompressing "
    "each would take 2 GiB from a 100 KB file",
)
def _(rec: Rec) -> None:
    r = zstd_ref(rec, raw=bytes(1 << 20), shape=[1 << 18], dtype="float32", rawsize=1 << 20)
    e = ep(rec)
    e["observations"] = [dict(r) for _ in range(2001)]
    e["actions"] = [0] * 2000
    e["rewards"] = [0.0] * 2000


@case("zstd-past-end", "a compressed array runs past the end of the blob")
def _(rec: Rec) -> None:
    r = zstd_ref(rec)
    r["size"] += 64


# --------------------------------------------------------------------------------------------


def build_all(root: Path = HERE) -> None:
    """Rewrite every case directory, ``_outside`` and ``README.md`` under ``root``."""
    for child in root.iterdir():
        if child.is_dir() and not child.name.startswith("__"):
            shutil.rmtree(child)
    base().write(root / "_outside")
    lines = [
        "# Hostile recordings",
        "",
        "Each folder is a recording that a reader MUST refuse with `TraceFormatError` (FORMAT.md",
        "§1, §6, §8): `gym_recording.load()` when reading every episode, `scan_recorded_traces`,",
        "and `gym-recording verify` (exit 1). `tests/test_hostile.py` checks all three.",
        "They are made by `make_cases.py` from one small valid recording (`_outside`, which",
        "several cases try to reach from inside their own folder). More cases that git cannot",
        "hold (a FIFO, sparse files of hundreds of megabytes) are made at test time.",
        "",
    ]
    for name, (what, build) in CASES.items():
        build().write(root / name)
        lines.append(f"- `{name}`: {what}")
    (root / "README.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    build_all(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
    print(f"wrote {len(CASES)} cases to {HERE}")
