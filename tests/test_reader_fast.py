"""The reader's fast paths decode exactly what the general path decodes, and refuse the same.

``DecodeContext._fast_array`` takes well-formed ndarray references, ``decode_episode`` plain
episode objects and ``Episode._of`` builds single-part episodes; everything they decline goes
to the general path. Each test here compares against that general path (the fast path switched
off) or against the bytes written, on recordings built by hand so that every field is known.
"""

from __future__ import annotations

import dataclasses
import json
import mmap
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import gym_recording
from gym_recording import RecordingClosedError, TraceFormatError, _format
from gym_recording._reader import Episode
from gym_recording._verify import verify

sys.path.insert(0, str(Path(__file__).resolve().parent / "hostile"))
from make_cases import (  # arrays at 8-aligned offsets, as the writer lays them out
    Blob,
    write_batches,
)
from make_cases import edit_ref as _set

PREFIX = "openaigym.trace.0.7.fastpath"
MANIFEST = _format.manifest_name(PREFIX)


def batch_json(first: int) -> str:
    return _format.batch_names(PREFIX, first)[0]


def batch_bin(first: int) -> str:
    return _format.batch_names(PREFIX, first)[1]


def episode_obj(
    blob: Blob, obs: np.ndarray, acts: np.ndarray, rew: np.ndarray, **extra: Any
) -> dict[str, Any]:
    """An episode object laid out as the writer does: actions, observations, rewards."""
    a = blob.add(acts)
    o = blob.add(obs)
    r = blob.add(rew)
    obj = {"actions": a, "observations": o, "rewards": r, "terminated": True, "truncated": False}
    obj.update(extra)
    return obj


def write_recording(
    directory: Path,
    batches: list[tuple[list[dict[str, Any]], Blob]],
    continues: tuple[int, ...] = (),
) -> None:
    """Write ``batches`` (episode objects and their blob) and a manifest listing them."""
    named = [(objs, blob.name, bytes(blob.data), None) for objs, blob in batches]
    write_batches(directory, PREFIX, named, env_id="Fast-v0", continues=continues)


def one_batch(directory: Path, objs_of: Any) -> Path:
    """Write one batch whose episode objects ``objs_of(blob)`` returns; its JSON's path."""
    blob = Blob(batch_bin(0))
    objs = objs_of(blob)
    write_recording(directory, [(objs, blob)])
    return directory / batch_json(0)


def edit_batch(path: Path, edit: Any) -> None:
    doc = json.loads(path.read_bytes())
    edit(doc["episodes"])
    data = json.dumps(doc).encode()
    path.write_bytes(data)
    # Keep the manifest's byte count right, so that only the edit is at fault.
    manifest_path = path.parent / MANIFEST
    manifest = json.loads(manifest_path.read_bytes())
    for entry in manifest["batches"]:
        if entry["fn"] == path.name:
            entry["bytes"] = len(data) + (path.parent / entry["bin"]).stat().st_size
    manifest_path.write_text(json.dumps(manifest))


def read_all(directory: Path) -> list[Episode]:
    with gym_recording.load(directory) as rec:
        return list(rec)


@pytest.fixture
def fast_calls(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Records, per call of the array fast path, whether it returned an array."""
    calls: list[bool] = []
    real = _format.DecodeContext._fast_array

    def spy(self: _format.DecodeContext, ref: Any) -> Any:
        out = real(self, ref)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(_format.DecodeContext, "_fast_array", spy)
    return calls


def assert_same_array(a: np.ndarray, b: np.ndarray) -> None:
    assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
    assert a.dtype == b.dtype and a.dtype.byteorder in "=<|"
    assert a.shape == b.shape
    assert a.tobytes() == b.tobytes()
    assert not a.flags.writeable


# ---------------------------------------------------------------------------- round trips

DTYPES = sorted(_format.ALLOWED_DTYPES)  # every dtype the format allows
SHAPES = [(), (3,), (2, 3), (1, 2, 3, 1)]


def _values(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    raw = rng.integers(0, 256, size=int(np.prod(shape)) * np.dtype(dtype).itemsize, dtype=np.uint8)
    arr = raw.view(dtype).reshape(shape)
    if np.dtype(dtype).kind == "b":
        arr = raw.astype(bool).reshape(shape)
    return arr


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("obs_shape", SHAPES)
def test_fast_path_round_trips_bytes_and_dtype(tmp_path, dtype, obs_shape, fast_calls):
    """Every allowed dtype and several shapes come back byte for byte, through the fast path."""
    rng = np.random.default_rng(hash((dtype, obs_shape)) % 2**32)
    written = []

    def objs(blob: Blob) -> list[dict[str, Any]]:
        out = []
        for n in (1, 4, 7):
            obs = _values(rng, (n + 1, *obs_shape), dtype)
            acts = _values(rng, (n, 2), dtype)
            rew = rng.standard_normal(n)
            written.append((obs, acts, rew))
            out.append(episode_obj(blob, obs, acts, rew, seed=n))
        return out

    one_batch(tmp_path, objs)
    episodes = read_all(tmp_path)
    assert len(episodes) == 3
    for ep, (obs, acts, rew) in zip(episodes, written, strict=True):
        assert_same_array(ep.observations, obs)
        assert_same_array(ep.actions, acts)
        assert_same_array(ep.rewards, rew)
    # The blob is opened by the batch's byte check: every array took the fast path.
    assert fast_calls and all(fast_calls)


def test_fast_and_general_paths_decode_the_same(tmp_path, general_only):
    """Episodes (every field) and verify's counts are the same with the fast path off."""
    rng = np.random.default_rng(5)
    batches = []
    first = 0
    for k in range(3):
        blob = Blob(batch_bin(first))
        objs = []
        for n in (0, 1, 5):  # a zero-step episode has zero dims: the general path takes it
            obs = rng.standard_normal((n + 1, 4)).astype(np.float32)
            acts = rng.integers(0, 3, n)
            objs.append(
                episode_obj(
                    blob,
                    obs,
                    acts,
                    rng.standard_normal(n),
                    seed=k * 10 + n,
                    options={"level": n},
                    started_at=1.5e9 + n,
                    ended_at=1.5e9 + n + 1,
                    terminated=n % 2 == 0,
                    truncated=n % 2 == 1,
                )
            )
        batches.append((objs, blob))
        first += len(objs)
    write_recording(tmp_path, batches)

    fast = read_all(tmp_path)
    fast_report = verify(tmp_path)
    with gym_recording.load(tmp_path) as rec:
        fast_random = [rec[i] for i in reversed(range(len(rec)))][::-1]
    with general_only:
        general = read_all(tmp_path)
        general_report = verify(tmp_path)
    assert fast_report.ok and general_report.ok
    assert fast_report.arrays == general_report.arrays == 3 * 9
    assert len(fast) == len(general) == len(fast_random) == 9
    for a, b, c in zip(fast, general, fast_random, strict=True):
        assert list(vars(a)) == list(vars(b)) == [f.name for f in dataclasses.fields(Episode)]
        for name in vars(b):
            x, y, z = getattr(a, name), getattr(b, name), getattr(c, name)
            if isinstance(y, np.ndarray):
                assert_same_array(x, y)
                assert_same_array(z, y)
            else:
                assert x == y == z, name
                assert type(x) is type(y), name


def test_arrays_are_read_only_for_mapped_and_bytes_blobs(tmp_path):
    """Views are read-only whether the blob is mapped, bytes, or (for safety) a bytearray."""

    def objs(blob: Blob) -> list[dict[str, Any]]:
        return [episode_obj(blob, np.zeros((3, 2), np.float32), np.arange(2), np.ones(2))]

    path = one_batch(tmp_path, objs)
    ep = read_all(tmp_path)[0]
    for arr in (ep.observations, ep.actions, ep.rewards):
        assert not arr.flags.writeable
        base = arr
        while isinstance(base, np.ndarray):
            base = base.base
        assert isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap)
        with pytest.raises(ValueError):
            arr[...] = 0

    obj = json.loads(path.read_bytes())["episodes"][0]
    data = (tmp_path / batch_bin(0)).read_bytes()
    for make in (bytes, bytearray):
        blob = memoryview(make(data))
        ctx = _format.DecodeContext(str(path), lambda name, blob=blob: blob)
        ctx.blob(batch_bin(0))  # opened: the fast path may take it
        out = _format.decode_episode(obj, ctx, "episodes[0]")
        for key in ("observations", "actions", "rewards"):
            arr = out[key]
            assert not arr.flags.writeable, (make, key)
            with pytest.raises(ValueError):
                arr[...] = 0
        assert ctx.arrays == 3
    assert bytes(blob) == data  # nothing wrote through to the bytearray


def test_fast_path_declines_without_touching_state():
    """A declined reference leaves the spans and the array count as they were."""
    blob = memoryview(bytes(64))
    ctx = _format.DecodeContext("p.json", lambda name: blob)
    ctx.blob("b.bin")
    good = {
        "__type": "ndarray",
        "shape": [2, 2],
        "order": "C",
        "dtype": "int32",
        "npyfile": "b.bin",
        "npyoff": 16,
        "size": 16,
    }
    free = dict(good, npyoff=40)  # bytes 40..56: free, so only the change is at fault
    assert ctx._fast_array(dict(free)) is not None  # (claims 40..56, then forgotten below)
    ctx.begin_episode()
    assert ctx._fast_array(good) is not None
    spans = {k: list(v) for k, v in ctx.spans.items()}
    count = ctx.arrays
    for bad in (
        dict(good, npyoff=20),  # overlaps, after
        dict(good, npyoff=8),  # overlaps, before
        dict(free, npyoff=40.0),
        dict(free, npyoff=True),
        dict(free, npyoff=-8),
        dict(free, npyoff=56),  # runs past the end
        dict(free, size=17),
        dict(free, size=16.0),
        dict(free, shape=[2, 0], size=0),
        dict(free, shape=[], size=4),
        dict(free, shape=[True, 2], size=8),
        dict(free, shape=[2, 2.0], size=16),
        dict(free, shape=[1] * 33, size=4),
        dict(free, shape=(2, 2)),
        dict(free, dtype=">i4"),
        dict(free, dtype=["int32"]),
        dict(free, npyfile="other.bin"),
        dict(free, npyfile=["b.bin"]),
        dict(free, order="F"),
        {k: v for k, v in free.items() if k != "order"},
        dict(free, __type="jsonarray"),
        [free],
        None,
        "ndarray",
    ):
        assert ctx._fast_array(bad) is None, bad
        assert ctx.spans == spans and ctx.arrays == count
    # Without "order" the general path reads it (C is the default).
    ref = {k: v for k, v in good.items() if k != "order"}
    ref["npyoff"] = 32
    assert ctx.array(ref, "x").tolist() == [[0, 0], [0, 0]]
    assert ctx.arrays == count + 1


# ---------------------------------------------------------------------------- refusals


def _plain(blob: Blob) -> list[dict[str, Any]]:
    return [
        episode_obj(blob, np.arange(12, dtype=np.float32).reshape(3, 4), np.arange(2), np.ones(2)),
        episode_obj(blob, np.arange(8, dtype=np.float32).reshape(2, 4), np.arange(1), np.ones(1)),
    ]


def _same_offset(eps: list[dict[str, Any]]) -> None:
    # The rewards start inside the observations (which are claimed before them).
    eps[1]["rewards"]["npyoff"] = eps[1]["observations"]["npyoff"] + 8


def _before_overlap(eps: list[dict[str, Any]]) -> None:
    # The actions (claimed after the observations) end inside them, from below.
    eps[1]["actions"]["npyoff"] = eps[1]["observations"]["npyoff"] - 4


REFUSED = {
    "zero-dim-with-bytes": (_set("observations", shape=[3, 0]), "does not equal prod(shape"),
    "wrong-size": (_set("observations", size=36), "does not equal prod(shape"),
    "size-float": (_set("rewards", size=8.0), "expected size to be a non-negative int"),
    "offset-past-end": (_set("rewards", npyoff=10**6), "run past the end"),
    "offset-float": (_set("actions", npyoff=8.0), "expected npyoff to be a non-negative int"),
    "offset-true": (_set("actions", npyoff=True), "expected npyoff to be a non-negative int"),
    "offset-negative": (_set("actions", npyoff=-8), "expected npyoff to be a non-negative int"),
    "shape-bool": (_set("actions", shape=[True]), "expected shape to be a list"),
    "shape-float": (_set("actions", shape=[1.0]), "expected shape to be a list"),
    "shape-too-deep": (
        _set("observations", shape=[1] * 33, size=4),
        "expected shape to be a list",
    ),
    "field-0d": (_set("observations", shape=[], size=4), "got a 0-d array"),
    "zero-dim-empty": (_set("actions", shape=[0], size=0), "expected N+1 observations"),
    "dtype-big-endian": (_set("observations", dtype=">f4"), "expected dtype to be one of"),
    "dtype-list": (_set("observations", dtype=["float32"]), "expected dtype to be one of"),
    "order-F": (_set("observations", order="F"), "expected order 'C'"),
    "npyfile-dotdot": (_set("rewards", npyfile="../x.bin"), "plain file name"),
    "npyfile-list": (_set("rewards", npyfile=["x.bin"]), "plain file name"),
    "overlap-after": (_same_offset, "overlap another array of the same episode"),
    "overlap-before": (_before_overlap, "overlap another array of the same episode"),
    "rewards-2d": (_set("rewards", shape=[1, 1]), "expected rewards to be a 1-D numeric array"),
    "rewards-complex": (
        _set("rewards", dtype="complex64"),
        "expected rewards to be a 1-D numeric array",
    ),
    "too-few-actions": (
        _set("actions", shape=[2], size=16, npyoff=0),
        "expected N+1 observations and N actions",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_as_by_the_general_path(tmp_path, case, general_only):
    """A bad reference is refused with TraceFormatError naming the batch; same message as the
    general path gives, and a valid episode before it still reads."""
    edit, fragment = REFUSED[case]
    path = one_batch(tmp_path, _plain)
    edit_batch(path, edit)
    with gym_recording.load(tmp_path) as rec:
        assert rec[0].length == 2
        with pytest.raises(TraceFormatError) as info:
            rec[1]
    assert info.value.path == str(path)
    assert str(path) in str(info.value)
    assert "episodes[1]" in str(info.value)
    assert fragment in str(info.value)
    with pytest.raises(TraceFormatError) as iterated:
        read_all(tmp_path)
    assert str(iterated.value) == str(info.value)
    with general_only, pytest.raises(TraceFormatError) as general:
        read_all(tmp_path)
    assert str(general.value) == str(info.value)
    assert not verify(tmp_path).ok


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("terminated", 1, "expected 'terminated' to be true or false"),
        ("truncated", None, "expected 'truncated' to be true or false"),
        ("continues", "yes", "expected 'continues' to be true or false"),
        ("part", -1, "expected 'part' to be a non-negative int"),
        ("part", 1.0, "expected 'part' to be a non-negative int"),
        ("part", False, "expected 'part' to be a non-negative int"),
        ("seed", 1.5, "expected 'seed' to be an int or null"),
        ("seed", True, "expected 'seed' to be an int or null"),
        ("infos", [{}], "expected 'infos' to be a list of N+1"),
        ("options", {"__type": "nope"}, "unknown value type"),
    ],
)
def test_episode_keys_still_checked(tmp_path, key, value, fragment, general_only):
    """The plain-episode path keeps every check of the episode object's other keys."""
    path = one_batch(tmp_path, _plain)

    def edit(eps: list[dict[str, Any]]) -> None:
        eps[1][key] = value

    edit_batch(path, edit)
    with pytest.raises(TraceFormatError) as info:
        read_all(tmp_path)
    assert info.value.path == str(path)
    assert "episodes[1]" in str(info.value) and fragment in str(info.value)
    with general_only, pytest.raises(TraceFormatError) as general:
        read_all(tmp_path)
    assert str(general.value) == str(info.value)


def test_zero_dim_arrays_take_the_general_path(tmp_path, fast_calls):
    """An observation space of zero size ([N+1, 0]) is valid: read as empty arrays."""

    def objs(blob: Blob) -> list[dict[str, Any]]:
        return [episode_obj(blob, np.zeros((4, 0), np.float32), np.arange(3), np.ones(3))]

    one_batch(tmp_path, objs)
    ep = read_all(tmp_path)[0]
    assert ep.observations.shape == (4, 0) and ep.observations.dtype == np.float32
    assert not ep.observations.flags.writeable
    assert ep.actions.tolist() == [0, 1, 2]
    assert fast_calls.count(False) >= 1


def test_unix_times(tmp_path):
    """started_at/ended_at: floats as they are, ints as floats, anything else None."""
    path = one_batch(tmp_path, _plain)

    def edit(eps: list[dict[str, Any]]) -> None:
        eps[0].update(started_at=1700000000, ended_at="soon")
        eps[1].update(started_at=1.25, ended_at=True)

    edit_batch(path, edit)
    a, b = read_all(tmp_path)
    assert (a.started_at, a.ended_at) == (1.7e9, None) and type(a.started_at) is float
    assert (b.started_at, b.ended_at) == (1.25, None)

    def huge(eps: list[dict[str, Any]]) -> None:
        eps[1]["ended_at"] = 10**400

    edit_batch(path, huge)
    with pytest.raises(TraceFormatError, match="expected 'ended_at' to be a unix time"):
        read_all(tmp_path)


# ---------------------------------------------------------------------------- episodes


def test_multi_part_episode_still_joins(tmp_path):
    """An episode split over three batches joins (dropping repeated observations)."""
    obs = np.arange(10 * 2, dtype=np.float32).reshape(10, 2)
    acts = np.arange(9) * 3
    rew = np.arange(9) / 2.0
    # Parts: steps 0..3, 3..6, 6..9 (each part repeats its predecessor's last observation).
    cuts = [(0, 3), (3, 6), (6, 9)]
    batches = []
    first = 0
    for p, (a, b) in enumerate(cuts):
        blob = Blob(batch_bin(first))
        part = episode_obj(
            blob,
            obs[a : b + 1],
            acts[a:b],
            rew[a:b],
            part=p,
            continues=p < 2,
            terminated=p == 2,
            seed=11 if p == 0 else None,
            started_at=100.0 + p,
            ended_at=200.0 + p,
        )
        objs = [part]
        if p == 2:  # a single-part episode after the split one, in the same batch
            objs.append(episode_obj(blob, obs[:2], acts[:1], rew[:1], seed=5))
        batches.append((objs, blob))
        first += len(objs)
    write_recording(tmp_path, batches, continues=(0, 1))

    with gym_recording.load(tmp_path) as rec:
        assert len(rec) == 2
        eps = list(rec)
        again = [rec[0], rec[1]]
    for ep in (eps[0], again[0]):
        assert_same_array(ep.observations, obs)
        assert_same_array(ep.actions, acts)
        assert_same_array(ep.rewards, rew)
        assert ep.terminated and not ep.truncated
        assert (ep.seed, ep.started_at, ep.ended_at, ep.index) == (11, 100.0, 202.0, 0)
    for ep in (eps[1], again[1]):
        assert_same_array(ep.observations, obs[:2])
        assert (ep.seed, ep.index, ep.length) == (5, 1, 1)
    assert verify(tmp_path).ok


def test_part_checks_remain(tmp_path):
    """A part that does not continue where the manifest says, or starts at part 1, is refused."""

    def objs(blob: Blob) -> list[dict[str, Any]]:
        return [
            episode_obj(blob, np.zeros((2, 1)), np.arange(1), np.ones(1)),
            episode_obj(blob, np.zeros((2, 1)), np.arange(1), np.ones(1), part=1),
        ]

    path = one_batch(tmp_path, objs)
    with pytest.raises(TraceFormatError, match="is part 1 of an episode") as info:
        read_all(tmp_path)
    assert info.value.path == str(path)

    def continues_mid(eps: list[dict[str, Any]]) -> None:
        eps[0]["continues"] = True
        eps[1].pop("part")

    edit_batch(path, continues_mid)
    with pytest.raises(TraceFormatError, match="only a batch's last episode may continue"):
        read_all(tmp_path)

    def continues_unlisted(eps: list[dict[str, Any]]) -> None:
        eps[0]["continues"] = False
        eps[1]["continues"] = True

    edit_batch(path, continues_unlisted)
    with pytest.raises(TraceFormatError, match="manifest does not list this batch"):
        read_all(tmp_path)


def test_single_part_episode_is_a_normal_frozen_episode(tmp_path):
    """The reader's episodes equal Episode(**fields): same fields, frozen, properties work."""

    def objs(blob: Blob) -> list[dict[str, Any]]:
        return [
            episode_obj(
                blob, np.zeros((3, 2)), np.arange(2), np.array([1.0, 0.5]), seed=3, options=[1]
            )
        ]

    one_batch(tmp_path, objs)
    ep = read_all(tmp_path)[0]
    fields = {f.name: getattr(ep, f.name) for f in dataclasses.fields(Episode)}
    built = Episode(**fields)
    assert vars(ep) == vars(built) and list(vars(ep)) == list(vars(built))
    assert (ep.writer, ep.env_id, ep.seed, ep.options, ep.infos) == (
        "0.7.fastpath",
        "Fast-v0",
        3,
        [1],
        None,
    )
    assert ep.length == 2 and ep.total_reward == 1.5
    assert "length=2" in repr(ep)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ep.seed = 4  # type: ignore[misc]
    assert dataclasses.replace(ep, seed=4).seed == 4


def test_iteration_checks_closed_per_episode(tmp_path):
    """Closing the recording mid-iteration stops it, even inside a batch already loaded."""

    def objs(blob: Blob) -> list[dict[str, Any]]:
        return [episode_obj(blob, np.zeros((2, 1)), np.arange(1), np.ones(1)) for _ in range(3)]

    one_batch(tmp_path, objs)
    rec = gym_recording.load(tmp_path)
    it = iter(rec)
    first = next(it)
    rec.close()
    with pytest.raises(RecordingClosedError):
        next(it)
    assert first.observations.shape == (2, 1)  # still valid after close
    assert os.path.isdir(tmp_path)
