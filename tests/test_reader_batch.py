"""The reader's batch-level path decodes what the general path decodes, and refuses the same.

When a batch is loaded, ``_format.decode_batch_plain`` checks all its plain episode objects at
once (ndarray references per key sharing dtype, blob and trailing dimensions; plain flags,
seed, times) and makes their views by slicing one view of the blob; every object it declines,
and every batch it cannot take as a whole, goes to the per-episode path. Each test compares
with that per-episode path (both fast paths switched off), on batches laid out as the writer
lays them out (all actions, then all observations, then all rewards) and otherwise.

Every test runs twice (the ``batch_impl`` fixture): with the C batch path
(``_speedups.decode_plain``, which takes the writer's layout and leaves every other batch to
Python, and ``_speedups.plain_episode``), then with Python alone; test_reader_batch_c.py
compares the two directly, on hostile batches aimed at the C checks.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import mmap
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import gym_recording
from gym_recording import TraceFormatError, _format, _reader
from gym_recording._reader import Episode
from gym_recording._storage import LocalStorage
from gym_recording._verify import verify

sys.path.insert(0, str(Path(__file__).resolve().parent / "hostile"))
from make_cases import Blob, write_batches
from make_cases import edit_ref as _set
from make_cases import ndarray_ref as ref

PREFIX = "openaigym.trace.0.7.batchpath"


@pytest.fixture(autouse=True, params=["c", "python"])
def batch_impl(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run each test with the C batch path, then with the pure-Python one."""
    if request.param == "c":
        if _format._decode_plain_c is None or _reader._plain_episode is _reader._plain_episode_py:
            pytest.skip("gym_recording._speedups is not built (or GYM_RECORDING_PURE_PYTHON)")
    else:
        monkeypatch.setattr(_format, "_decode_plain_c", None)
        monkeypatch.setattr(_reader, "_plain_episode", _reader._plain_episode_py)
    return str(request.param)


MANIFEST = _format.manifest_name(PREFIX)


def batch_json(first: int) -> str:
    return _format.batch_names(PREFIX, first)[0]


def batch_bin(first: int) -> str:
    return _format.batch_names(PREFIX, first)[1]


def columnar(
    fn: str, episodes: list[tuple[np.ndarray, np.ndarray, np.ndarray]], **extra: Any
) -> tuple[list[dict[str, Any]], bytes]:
    """Episode objects and their blob laid out as the writer's columnar batches."""
    blob = bytearray()
    refs: dict[str, list[dict[str, Any]]] = {"actions": [], "observations": [], "rewards": []}
    for key, k in (("actions", 1), ("observations", 0), ("rewards", 2)):
        for ep in episodes:
            refs[key].append(ref(fn, ep[k], len(blob)))
            blob += np.ascontiguousarray(ep[k]).tobytes()
        blob += b"\0" * (-len(blob) % 8)
    objs = []
    for i in range(len(episodes)):
        obj: dict[str, Any] = {
            "actions": refs["actions"][i],
            "observations": refs["observations"][i],
            "rewards": refs["rewards"][i],
            "terminated": i % 2 == 0,
            "truncated": i % 2 == 1,
            "seed": None if i % 3 else i,
            "options": None,
            "started_at": 1.7e9 + i,
            "ended_at": 1.7e9 + i + 0.5,
        }
        obj.update(extra)
        objs.append(obj)
    return objs, bytes(blob)


def by_episode(
    fn: str, episodes: list[tuple[np.ndarray, np.ndarray, np.ndarray]], **extra: Any
) -> tuple[list[dict[str, Any]], bytes]:
    """Episode objects and their blob laid out episode by episode (8-aligned arrays)."""
    blob = Blob(fn)
    objs = []
    for i, (obs, acts, rew) in enumerate(episodes):
        obj: dict[str, Any] = {
            "actions": blob.add(acts),
            "observations": blob.add(obs),
            "rewards": blob.add(rew),
            "terminated": True,
            "truncated": False,
            "seed": i,
            "options": None,
        }
        obj.update(extra)
        objs.append(obj)
    return objs, bytes(blob.data)


def _without_times(
    batch: tuple[list[dict[str, Any]], bytes],
) -> tuple[list[dict[str, Any]], bytes]:
    """A batch as :func:`columnar` lays it out, its episode objects without times."""
    for obj in batch[0]:
        del obj["started_at"], obj["ended_at"]
    return batch


def episodes_of(
    lengths: list[int], obs_shape: tuple[int, ...] = (4,), seed: int = 0
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [
        (
            rng.standard_normal((n + 1, *obs_shape)).astype(np.float32),
            rng.integers(0, 5, n),
            rng.standard_normal(n),
        )
        for n in lengths
    ]


def write(
    directory: Path,
    batches: list[tuple[list[dict[str, Any]], bytes]],
    continues: tuple[int, ...] = (),
    raw: dict[int, bytes] | None = None,
) -> None:
    """Write the batches (episode objects, blob) and a manifest listing them."""
    named = [(objs, None, blob, (raw or {}).get(i)) for i, (objs, blob) in enumerate(batches)]
    write_batches(directory, PREFIX, named, env_id="Batch-v0", continues=continues)


def stored(directory: Path, laid: tuple[list[dict[str, Any]], bytes]) -> Any:
    """A batch laid out for batch 0 (episode objects, blob): its blob written to
    ``directory``; the objects and a storage to read the blob from."""
    objs, blob = laid
    (directory / batch_bin(0)).write_bytes(blob)
    return objs, LocalStorage(str(directory), create=False)


def one(directory: Path, objs: list[dict[str, Any]], blob: bytes) -> Path:
    write(directory, [(objs, blob)])
    return directory / batch_json(0)


@pytest.fixture
def plain_counts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Per batch decoded by the batch path: how many of its objects it took."""
    counts: list[int] = []
    real = _format.decode_batch_plain

    def spy(*args: Any) -> Any:
        out = real(*args)
        counts.append(0 if out is None else sum(e is not None for e in out.episodes))
        return out

    monkeypatch.setattr(_format, "decode_batch_plain", spy)
    return counts


def read(directory: Path) -> tuple[list[Episode], list[Episode]]:
    """Every episode, by iteration and (in reverse order) by random access."""
    with gym_recording.load(directory) as rec:
        iterated = list(rec)
        accessed = [rec[i] for i in reversed(range(len(rec)))][::-1]
    return iterated, accessed


def iterate(directory: Path) -> tuple[list[Episode], TraceFormatError]:
    """The episodes iteration yields before it raises, and what it raises."""
    eps: list[Episode] = []
    with pytest.raises(TraceFormatError) as info, gym_recording.load(directory) as rec:
        eps.extend(rec)
    return eps, info.value


def assert_same_episode(a: Episode, b: Episode) -> None:
    assert list(vars(a)) == list(vars(b)) == [f.name for f in dataclasses.fields(Episode)]
    for name in vars(b):
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(y, np.ndarray):
            assert isinstance(x, np.ndarray), name
            assert x.dtype == y.dtype and x.shape == y.shape, name
            assert x.strides == y.strides and x.flags.c_contiguous, name
            assert x.tobytes() == y.tobytes(), name
            assert not x.flags.writeable and not y.flags.writeable, name
        else:
            assert x == y or (x != x and y != y), name
            assert type(x) is type(y), name


def assert_reads_as_general(directory: Path, general_only: Any) -> list[Episode]:
    fast, fast_random = read(directory)
    with general_only:
        general, general_random = read(directory)
    assert len(fast) == len(general) == len(fast_random) == len(general_random)
    for a, b, c in zip(fast, general, fast_random, strict=True):
        assert_same_episode(a, b)
        assert_same_episode(c, b)
    return fast


def general_error(directory: Path, general_only: Any) -> str:
    """The message with which the general path refuses to read ``directory`` through."""
    with general_only, pytest.raises(TraceFormatError) as general:
        list(gym_recording.load(directory))
    return str(general.value)


# ---------------------------------------------------------------------------- same episodes

LAYOUTS = {
    "columnar-equal": lambda: [columnar(batch_bin(0), episodes_of([5] * 6))],
    "columnar-varying": lambda: [columnar(batch_bin(0), episodes_of([3, 1, 8, 2, 5]))],
    "columnar-one": lambda: [columnar(batch_bin(0), episodes_of([4]))],
    "columnar-3d-obs": lambda: [columnar(batch_bin(0), episodes_of([2, 3, 1], (2, 3)))],
    "columnar-scalar-obs": lambda: [columnar(batch_bin(0), episodes_of([2, 3, 1], ()))],
    "columnar-two-batches": lambda: [
        columnar(batch_bin(0), episodes_of([2, 3])),
        columnar(batch_bin(2), episodes_of([4, 1, 1], seed=1)),
    ],
    "by-episode": lambda: [by_episode(batch_bin(0), episodes_of([3, 1, 4, 2]))],
    # float32 rows of 12 bytes at 8-aligned offsets: not congruent, so partly per episode
    "by-episode-odd-rows": lambda: [by_episode(batch_bin(0), episodes_of([3, 2, 4], (3,)))],
    "zero-step-inside": lambda: [columnar(batch_bin(0), episodes_of([2, 0, 3]))],
    "zero-step-only": lambda: [columnar(batch_bin(0), episodes_of([0, 0, 0]))],
    "zero-step-first-and-last": lambda: [columnar(batch_bin(0), episodes_of([0, 2, 0]))],
    "zero-step-by-episode": lambda: [by_episode(batch_bin(0), episodes_of([0, 2, 0, 1]))],
    "no-times": lambda: [_without_times(columnar(batch_bin(0), episodes_of([2, 3])))],
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_batch_path_reads_what_the_general_path_reads(tmp_path, layout, general_only):
    write(tmp_path, LAYOUTS[layout]())
    eps = assert_reads_as_general(tmp_path, general_only)
    assert eps and all(ep.writer == "0.7.batchpath" and ep.env_id == "Batch-v0" for ep in eps)


def test_columnar_batches_take_the_batch_path_whole(tmp_path, plain_counts, general_only):
    """The writer's layout, equal or varying lengths: every object decoded with the batch."""
    data = episodes_of([5, 5, 5, 2, 7, 1])
    write(tmp_path, [columnar(batch_bin(0), data[:3]), columnar(batch_bin(3), data[3:])])
    eps = assert_reads_as_general(tmp_path, general_only)
    assert plain_counts[:2] == [3, 3]
    for ep, (obs, acts, rew) in zip(eps, data, strict=True):
        assert ep.observations.tobytes() == obs.tobytes()
        assert ep.actions.tobytes() == acts.tobytes() and ep.actions.dtype == np.int64
        assert ep.rewards.tobytes() == rew.tobytes()


def test_episode_by_episode_batches_take_the_batch_path(tmp_path, plain_counts, general_only):
    """Arrays not consecutive but congruent to the rows: checked one by one, vectorised."""
    write(tmp_path, [by_episode(batch_bin(0), episodes_of([3, 1, 4, 2], (2,)))])
    assert_reads_as_general(tmp_path, general_only)
    assert plain_counts[0] == 4


def test_views_are_zero_copy_and_read_only(tmp_path, plain_counts):
    objs, blob = columnar(batch_bin(0), episodes_of([3, 3, 2]))
    one(tmp_path, objs, blob)
    with gym_recording.load(tmp_path) as rec:
        eps = list(rec)
    assert plain_counts == [3]
    for ep in eps:
        for arr in (ep.observations, ep.actions, ep.rewards):
            assert not arr.flags.writeable and not arr.flags.owndata
            with pytest.raises(ValueError):
                arr[...] = 0
            base = arr
            while isinstance(base, np.ndarray):
                base = base.base
            assert isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap)
    # The arrays outlive the recording, and hold exactly the bytes of their references.
    for ep, obj in zip(eps, objs, strict=True):
        for key in ("observations", "actions", "rewards"):
            r = obj[key]
            assert getattr(ep, key).tobytes() == blob[r["npyoff"] : r["npyoff"] + r["size"]]


def test_writable_blobs_give_read_only_views(tmp_path):
    """A blob given as bytes or a bytearray (other storages): views are still read-only."""
    objs, blob = columnar(batch_bin(0), episodes_of([2, 4]))
    for make in (bytes, bytearray):
        buf = memoryview(make(blob))
        ctx = _format.DecodeContext("p.json", lambda name, buf=buf: buf)
        out = _format.decode_batch_plain(objs, ctx, False)
        assert out is not None and out.complete
        for entry in out.episodes:
            assert entry is not None
            for arr in entry[:3]:
                assert not arr.flags.writeable
                with pytest.raises(ValueError):
                    arr[...] = 0
    assert bytes(buf) == blob


def test_views_keep_their_blob_alive_and_unresizable(tmp_path):
    """The views hold an export of the blob's memory, as np.frombuffer's do: the memoryview
    handed to the decoder may be released, but the bytes stay, and a bytearray under it
    cannot be resized (its memory would move)."""
    objs, blob = columnar(batch_bin(0), episodes_of([2, 4]))
    raw = bytearray(blob)
    buf = memoryview(raw)
    out = _format.decode_batch_plain(objs, _format.DecodeContext("p.json", lambda n: buf), False)
    assert out is not None and out.complete
    buf.release()
    with pytest.raises(BufferError):
        raw.extend(b"x" * 4096)
    for entry, obj in zip(out.episodes, objs, strict=True):
        assert entry is not None
        for arr, key in zip(entry[:3], ("observations", "actions", "rewards"), strict=True):
            r = obj[key]
            assert arr.tobytes() == blob[r["npyoff"] : r["npyoff"] + r["size"]]
    del out, entry, arr
    raw.extend(b"x" * 4096)  # the views are gone: nothing holds the bytes any more


def test_random_access_loads_one_batch(tmp_path, monkeypatch):
    data = episodes_of([2, 3, 1, 4, 2, 2])
    write(tmp_path, [columnar(batch_bin(k), data[k : k + 2]) for k in (0, 2, 4)])
    rec = gym_recording.load(tmp_path)
    reads: list[str] = []
    maps: list[str] = []
    real_read, real_map = LocalStorage.read_bytes, LocalStorage.map

    def counting_read(self: Any, name: str, max_size: int) -> bytes:
        reads.append(name)
        return real_read(self, name, max_size)

    def counting_map(self: Any, name: str) -> memoryview:
        maps.append(name)
        return real_map(self, name)

    monkeypatch.setattr(LocalStorage, "read_bytes", counting_read)
    monkeypatch.setattr(LocalStorage, "map", counting_map)
    ep = rec[3]
    assert ep.actions.tobytes() == data[3][1].tobytes() and ep.index == 3
    assert reads == [batch_json(2)] and maps == [batch_bin(2)]
    assert rec[2].length == 1 and reads == [batch_json(2)]  # cached


def test_random_access_decodes_one_episode_and_iteration_the_batch(tmp_path, plain_counts):
    """rec[i] on a batch not loaded decodes just that episode; iterating decodes the batch at
    once, reusing a cached batch, and gives the same episodes."""
    data = episodes_of([2, 3, 1, 4])
    objs, blob = columnar(batch_bin(0), data)
    objs[2]["seed"] = 2**70  # (exact either way)
    one(tmp_path, objs, blob)
    with gym_recording.load(tmp_path) as rec:
        accessed = [rec[i] for i in range(4)]
        assert plain_counts == []
        iterated = list(rec)
        assert plain_counts == [4]
        assert rec._cache[(0, 0)].objs is None  # every object decoded: the JSON is dropped
        again = [rec[i] for i in range(4)]
        assert list(rec) and plain_counts == [4]  # decoded once
    assert accessed[2].seed == 2**70
    for a, b, c in zip(accessed, iterated, again, strict=True):
        assert_same_episode(b, a)
        assert_same_episode(c, a)


def test_options_infos_and_other_keys_go_to_the_general_path(tmp_path, plain_counts, general_only):
    objs, blob = columnar(batch_bin(0), episodes_of([2, 3, 1, 2, 2, 3]))
    objs[0]["options"] = {"level": 2}
    objs[1]["infos"] = [{"a": 1}] * 4
    objs[2]["part"] = 0
    objs[3]["continues"] = False
    objs[4]["note"] = "an unknown key"
    objs[5]["started_at"] = None
    one(tmp_path, objs, blob)
    eps = assert_reads_as_general(tmp_path, general_only)
    assert plain_counts[0] == 1  # (object 5: a null time is plain; an unknown key is not)
    assert eps[0].options == {"level": 2} and eps[1].infos == [{"a": 1}] * 4
    assert eps[5].started_at is None


def test_times_other_than_floats(tmp_path, general_only):
    objs, blob = columnar(batch_bin(0), episodes_of([2, 3, 1]))
    objs[0]["started_at"] = 1700000000
    objs[1]["ended_at"] = "soon"
    del objs[2]["started_at"]
    one(tmp_path, objs, blob)
    eps = assert_reads_as_general(tmp_path, general_only)
    assert eps[0].started_at == 1.7e9 and type(eps[0].started_at) is float
    assert eps[1].ended_at is None and eps[2].started_at is None


def test_integers_beyond_64_bits_are_read_exactly(tmp_path, general_only):
    """orjson reads them as floats: such batches are parsed again, exactly, for the general path."""
    objs, blob = columnar(batch_bin(0), episodes_of([2, 3]))
    objs[0]["seed"] = 2**80 + 1
    one(tmp_path, objs, blob)
    eps = assert_reads_as_general(tmp_path, general_only)
    assert eps[0].seed == 2**80 + 1
    # A time written as such an integer, alone in an otherwise plain batch:
    objs, blob = columnar(batch_bin(0), episodes_of([2, 3]))
    objs[1]["started_at"] = 123456789012345678901234  # (orjson rounds it to another float)
    one(tmp_path, objs, blob)
    eps = assert_reads_as_general(tmp_path, general_only)
    assert eps[1].started_at == float(123456789012345678901234)


def test_split_episodes_join(tmp_path, plain_counts, general_only):
    """An episode continuing into the next batch: its parts take the general path and join."""
    obs = np.arange(10 * 4, dtype=np.float32).reshape(10, 4)
    acts, rew = np.arange(9), np.arange(9) / 4.0
    before = episodes_of([2, 3], seed=3)
    after = episodes_of([1, 2], seed=4)
    objs0, blob0 = columnar(batch_bin(0), [*before, (obs[:5], acts[:4], rew[:4])])
    objs0[-1]["continues"] = True
    objs1, blob1 = columnar(batch_bin(3), [(obs[4:], acts[4:], rew[4:]), *after])
    objs1[0]["part"] = 1
    write(tmp_path, [(objs0, blob0), (objs1, blob1)], continues=(0,))
    eps = assert_reads_as_general(tmp_path, general_only)
    assert plain_counts[:2] == [2, 2]
    assert len(eps) == 5
    assert eps[2].observations.tobytes() == obs.tobytes()
    assert eps[2].actions.tobytes() == acts.tobytes() and eps[2].length == 9
    assert verify(tmp_path).ok


def test_unfinished_split_episode_stays_hidden(tmp_path, general_only):
    objs, blob = columnar(batch_bin(0), episodes_of([2, 3, 4]))
    objs[-1]["continues"] = True
    write(tmp_path, [(objs, blob)], continues=(0,))
    eps = assert_reads_as_general(tmp_path, general_only)
    assert len(eps) == 2


def test_refs_into_another_blob(tmp_path, plain_counts, general_only):
    """References may name another blob of the directory: the same one for a whole key."""
    data = episodes_of([2, 3, 1])
    objs, blob = columnar("other.bin", data)
    write(tmp_path, [(objs, b"")])
    (tmp_path / "other.bin").write_bytes(blob)
    assert_reads_as_general(tmp_path, general_only)
    assert plain_counts[0] == 3
    # One reference into another blob: the batch goes episode by episode.
    objs, blob = columnar(batch_bin(0), data)
    objs[1]["rewards"]["npyfile"] = "other.bin"
    write(tmp_path, [(objs, blob)])
    assert_reads_as_general(tmp_path, general_only)


def test_misaligned_and_shared_references_read_as_the_general_path_reads(tmp_path, general_only):
    """Nothing in the format asks for aligned offsets, or forbids episodes sharing bytes."""
    objs, blob = columnar(batch_bin(0), episodes_of([2, 3, 3]))
    objs[1]["rewards"]["npyoff"] += 4  # misaligned, reads into the next episode's rewards
    objs[2]["actions"] = dict(objs[1]["actions"])  # the same bytes as episode 1's actions
    objs[2]["observations"]["npyoff"] += 1
    one(tmp_path, objs, blob)
    eps = assert_reads_as_general(tmp_path, general_only)
    assert eps[2].actions.tobytes() == eps[1].actions.tobytes()


# ---------------------------------------------------------------------------- same refusals


def _overlap(a: str, b: str, into: int) -> Any:
    def edit(eps: list[dict[str, Any]]) -> None:
        eps[1][a]["npyoff"] = eps[1][b]["npyoff"] + into

    return edit


def _top(key: str, value: Any) -> Any:
    def edit(eps: list[dict[str, Any]]) -> None:
        eps[1][key] = value

    return edit


def _drop(key: str) -> Any:
    def edit(eps: list[dict[str, Any]]) -> None:
        del eps[1][key]

    return edit


def _wrapping_shapes(eps: list[dict[str, Any]]) -> None:
    # Sizes that int64 products of the shapes give after wrapping around 2**64.
    n = 2**61 + 2
    eps[1]["observations"].update(shape=[n + 1, 4], size=48)
    eps[1]["actions"].update(shape=[n], size=16)
    eps[1]["rewards"].update(shape=[n], size=16)


def _options_ref_into_obs(eps: list[dict[str, Any]]) -> None:
    eps[1]["options"] = {"a": dict(eps[1]["observations"], shape=[2], dtype="float32", size=8)}


BLOB_END = 10**6

REFUSED = {
    "overlap-rewards-in-obs": (_overlap("rewards", "observations", 8), "overlap another array"),
    "overlap-obs-in-actions": (_overlap("observations", "actions", 0), "overlap another array"),
    "overlap-actions-in-rewards": (_overlap("actions", "rewards", 8), "overlap another array"),
    "offset-past-end": (_set("rewards", npyoff=BLOB_END), "run past the end"),
    "offset-negative": (_set("actions", npyoff=-8), "expected npyoff to be a non-negative int"),
    "offset-float": (_set("actions", npyoff=8.0), "expected npyoff to be a non-negative int"),
    "offset-true": (_set("actions", npyoff=True), "expected npyoff to be a non-negative int"),
    "offset-huge": (_set("rewards", npyoff=10**20), "bytes 100000000000000000000..+24 run past"),
    "offset-2**63": (_set("rewards", npyoff=2**63), "run past the end"),
    "size-wrong": (_set("observations", size=8), "does not equal prod(shape"),
    "size-float": (_set("rewards", size=24.0), "expected size to be a non-negative int"),
    "size-huge": (_set("rewards", size=2**70), "does not equal prod(shape"),
    "shape-zero-dim-with-bytes": (_set("observations", shape=[4, 0]), "does not equal prod"),
    "shape-float": (_set("actions", shape=[3.0]), "expected shape to be a list"),
    "shape-bool-tail": (_set("observations", shape=[4, True]), "expected shape to be a list"),
    "shape-tail-other": (_set("observations", shape=[8, 2]), "expected N+1 observations"),
    "shape-huge": (_set("observations", shape=[2**62, 4]), "overflows"),
    "shape-wrapping": (_wrapping_shapes, "overflows: more than 2**63 bytes"),
    "shape-0d": (_set("observations", shape=[], size=4), "got a 0-d array"),
    "shape-33d": (_set("observations", shape=[1] * 33, size=4), "expected shape to be a list"),
    "shape-not-list": (_set("actions", shape="3"), "expected shape to be a list"),
    "dtype-big-endian": (_set("observations", dtype=">f4"), "expected dtype to be one of"),
    "dtype-object": (_set("observations", dtype="object"), "expected dtype to be one of"),
    "dtype-list": (_set("actions", dtype=["int64"]), "expected dtype to be one of"),
    "dtype-other-size": (_set("actions", dtype="int32"), "does not equal prod(shape"),
    "order-F": (_set("observations", order="F"), "expected order 'C'"),
    "type-other": (_set("rewards", __type="array"), "expected an ndarray reference"),
    "npyfile-missing": (_set("rewards", npyfile="missing.bin"), "does not exist"),
    "npyfile-dotdot": (_set("rewards", npyfile="../x.bin"), "plain file name"),
    "npyfile-list": (_set("rewards", npyfile=["x.bin"]), "plain file name"),
    "ref-not-object": (_top("actions", [1, 2]), "expected N+1 observations"),
    "ref-missing": (_drop("rewards"), "expected key 'rewards'"),
    "rewards-2d": (_set("rewards", shape=[3, 1]), "expected rewards to be a 1-D numeric array"),
    "rewards-complex": (_set("rewards", dtype="complex64"), "expected rewards to be a 1-D"),
    "too-few-actions": (_set("actions", shape=[2], size=16), "expected N+1 observations"),
    "terminated-int": (_top("terminated", 1), "expected 'terminated' to be true or false"),
    "seed-float": (_top("seed", 1.5), "expected 'seed' to be an int or null"),
    "part-negative": (_top("part", -1), "expected 'part' to be a non-negative int"),
    "part-one": (_top("part", 1), "is part 1 of an episode"),
    "continues-mid-batch": (_top("continues", True), "only a batch's last episode may continue"),
    "infos-short": (_top("infos", [{}]), "expected 'infos' to be a list of N+1"),
    "options-overlap": (_options_ref_into_obs, "overlap another array"),
    "ended-at-huge": (_top("ended_at", 10**400), "expected 'ended_at' to be a unix time"),
    "episode-not-object": (_top("observations", None), "expected an ndarray reference"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
@pytest.mark.parametrize("lay", ["columnar", "by-episode"])
def test_refused_as_by_the_general_path(tmp_path, case, lay, general_only):
    """A bad episode object is refused with the general path's message; the others still read."""
    edit, fragment = REFUSED[case]
    layout = columnar if lay == "columnar" else by_episode
    objs, blob = layout(batch_bin(0), episodes_of([2, 3, 2]))
    edit(objs)
    path = one(tmp_path, objs, blob)
    with gym_recording.load(tmp_path) as rec:
        assert rec[0].length == 2 and rec[2].length == 2
        with pytest.raises(TraceFormatError) as info:
            rec[1]
    # (A missing blob is named as the file at fault; anything else, the batch.)
    assert info.value.path in (str(path), str(tmp_path / "missing.bin"))
    assert "episodes[1]" in str(info.value) or case == "npyfile-missing"
    assert fragment in str(info.value)
    eps, error = iterate(tmp_path)
    assert [ep.index for ep in eps] == [0] and str(error) == str(info.value)
    assert general_error(tmp_path, general_only) == str(info.value)
    assert not verify(tmp_path).ok


def test_truncated_blob(tmp_path, general_only):
    """The last array of a consecutive run ends past the blob: that episode is refused."""
    objs, blob = columnar(batch_bin(0), episodes_of([2, 3, 2]))
    path = one(tmp_path, objs, blob[:-8])
    with gym_recording.load(tmp_path) as rec:
        assert rec[0].length == 2 and rec[1].length == 3
        with pytest.raises(TraceFormatError, match="run past the end") as info:
            rec[2]
    assert info.value.path == str(path) and "episodes[2]" in str(info.value)
    eps, error = iterate(tmp_path)
    assert [ep.length for ep in eps] == [2, 3] and str(error) == str(info.value)
    assert general_error(tmp_path, general_only) == str(info.value)


def _consecutive(objs: list[dict[str, Any]], key: str, start: int) -> None:
    """Place ``key``'s arrays one after the other from ``start``, whatever their sizes."""
    for obj in objs:
        obj[key]["npyoff"] = start
        start += obj[key]["size"]


def _negative_first(objs: list[dict[str, Any]]) -> None:
    _consecutive(objs, "actions", -8)


def _negative_dims(objs: list[dict[str, Any]]) -> None:
    obj = objs[1]
    obj["actions"].update(shape=[-1], size=-8)
    obj["rewards"].update(shape=[-1], size=-8)
    obj["observations"].update(shape=[0, 4], size=0)
    for key in ("actions", "rewards", "observations"):
        _consecutive(objs, key, objs[0][key]["npyoff"])


def _last_past_end(objs: list[dict[str, Any]]) -> None:
    objs[-1]["rewards"].update(shape=[40], size=320)
    objs[-1]["actions"].update(shape=[40], size=320)
    objs[-1]["observations"].update(shape=[41, 4], size=656)
    for key in ("actions", "observations"):
        _consecutive(objs, key, objs[0][key]["npyoff"])


CONSECUTIVE = {
    "negative-first-offset": (_negative_first, 0, "expected npyoff to be a non-negative int"),
    "negative-dims": (_negative_dims, 1, "expected shape to be a list"),
    "last-past-end": (_last_past_end, 2, "run past the end"),
}


@pytest.mark.parametrize("case", sorted(CONSECUTIVE))
def test_consecutive_but_refused(tmp_path, case, general_only):
    """References one after the other, as the writer places them, with bad numbers."""
    edit, bad, fragment = CONSECUTIVE[case]
    objs, blob = columnar(batch_bin(0), episodes_of([2, 3, 2]))
    edit(objs)
    one(tmp_path, objs, blob)
    with gym_recording.load(tmp_path) as rec:
        for i in range(3):
            if i != bad:
                assert rec[i].index == i
        with pytest.raises(TraceFormatError, match=fragment) as info:
            rec[bad]
    eps, error = iterate(tmp_path)
    assert [ep.index for ep in eps] == list(range(bad)) and str(error) == str(info.value)
    assert general_error(tmp_path, general_only) == str(info.value)


def test_manifest_continues_but_the_last_object_does_not(tmp_path, general_only):
    objs0, blob0 = columnar(batch_bin(0), episodes_of([2, 3]))
    objs1, blob1 = columnar(batch_bin(2), episodes_of([1, 2], seed=2))
    objs1[0]["part"] = 1
    write(tmp_path, [(objs0, blob0), (objs1, blob1)], continues=(0,))
    with pytest.raises(TraceFormatError, match="does not continue, but the manifest") as info:
        list(gym_recording.load(tmp_path))
    assert general_error(tmp_path, general_only) == str(info.value)


def test_a_continued_batch_whose_first_object_is_plain(tmp_path, general_only):
    """The part expected after a continuing object is missing: refused, as before."""
    objs0, blob0 = columnar(batch_bin(0), episodes_of([2, 3]))
    objs0[-1]["continues"] = True
    objs1, blob1 = columnar(batch_bin(2), episodes_of([1, 2], seed=2))
    write(tmp_path, [(objs0, blob0), (objs1, blob1)], continues=(0,))
    with pytest.raises(TraceFormatError, match="expected part 1") as info:
        list(gym_recording.load(tmp_path))
    with gym_recording.load(tmp_path) as rec, pytest.raises(TraceFormatError) as accessed:
        rec[1]
    assert general_error(tmp_path, general_only) == str(info.value) == str(accessed.value)


def test_manifest_steps_still_checked(tmp_path):
    objs, blob = columnar(batch_bin(0), episodes_of([2, 3]))
    one(tmp_path, objs, blob)
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    manifest["batches"][0]["steps"] = 6
    (tmp_path / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(TraceFormatError, match="lists 6 steps for this batch, but it holds 5"):
        list(gym_recording.load(tmp_path))


# ---------------------------------------------------------------------------- never more


def _random_value(rng: random.Random, like: Any) -> Any:
    choices: list[Any] = [
        None,
        True,
        False,
        0,
        -1,
        8,
        2**63,
        2**64 + 8,
        1.5,
        8.0,
        "C",
        "F",
        "float32",
        "int64",
        "ndarray",
        batch_bin(0),
        "x.bin",
        [],
        [0],
        [1],
        [3, 4],
        [True],
        [2.0],
        {},
    ]
    if isinstance(like, int) and not isinstance(like, bool):
        choices += [like + d for d in (-16, -8, -4, -1, 1, 4, 8, 16)]
    if isinstance(like, list):
        choices += [[d + 1 for d in like], [*like, 1], like[:1], [d * 2 for d in like]]
    return rng.choice(choices)


def _mutate(rng: random.Random, objs: list[dict[str, Any]]) -> None:
    for _ in range(rng.randint(1, 3)):
        obj = rng.choice(objs)
        key = rng.choice([*obj, "part", "continues", "infos"])
        if key in ("observations", "actions", "rewards") and isinstance(obj[key], dict):
            r = obj[key]
            sub = rng.choice([*r, "extra"])
            if rng.random() < 0.1:
                r.pop(sub, None)
            else:
                r[sub] = _random_value(rng, r.get(sub))
        elif rng.random() < 0.1:
            obj.pop(key, None)
        else:
            obj[key] = _random_value(rng, obj.get(key))


@pytest.mark.parametrize("seed", range(40))
def test_batch_path_never_accepts_more_than_the_general_path(tmp_path, seed):
    """Mutated batches: every object the batch path decodes, the general path decodes the same.

    Each object the batch path takes must be one that ``decode_episode`` reads without error,
    to the same arrays (bytes, dtype, shape) and values; it never raises, whatever it is given.
    """
    rng = random.Random(seed)
    lay = columnar if seed % 2 else by_episode
    episodes = episodes_of([2, 3, 1, 2, 4], (2,), seed=seed)
    base, storage = stored(tmp_path, lay(batch_bin(0), episodes))
    taken = 0
    for _ in range(25):
        objs = copy.deepcopy(base)
        _mutate(rng, objs)
        ctx = _format.DecodeContext("p.json", storage.map)
        out = _format.decode_batch_plain(objs, ctx, rng.random() < 0.2)
        if out is None:
            continue
        entries, complete = out.episodes, out.complete
        assert complete == all(e is not None for e in entries)
        if complete and out.steps is not None:
            assert out.steps == _format._batch_steps(objs)
        for j, entry in enumerate(entries):
            if entry is None:
                continue
            taken += 1
            general_ctx = _format.DecodeContext("p.json", storage.map)
            general = _format.decode_episode(objs[j], general_ctx, "x")
            fast = _format.plain_decoded(entry)
            assert list(fast) == list(general)
            for key, value in general.items():
                if isinstance(value, np.ndarray):
                    got = fast[key]
                    assert got.dtype == value.dtype and got.shape == value.shape, key
                    assert got.tobytes() == value.tobytes(), key
                    assert not got.flags.writeable
                else:
                    assert fast[key] == value and type(fast[key]) is type(value), key
    assert taken  # (some mutations leave objects plain)
