"""The C batch path (``_speedups.decode_plain``) gives exactly what the Python batch path gives.

C takes the batches laid out as the writer lays them out, every episode object plain, and
returns ``None`` for every other batch, which the Python path (``decode_batch_plain_py``) then
decodes. Each test here gives both the same batch and checks that whatever C returns, Python
returns too, to the array's dtype, shape, strides, flags, bytes and base, and to the identity
of every other value; the hostile cases aim at the C checks' own edges (ints beyond int64,
products that wrap, bools and floats where ints are expected, objects that are not dicts).
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import numpy as np
import pytest

from gym_recording import _format
from gym_recording._storage import LocalStorage
from tests.test_reader_batch import (
    LAYOUTS,
    _consecutive,
    _mutate,
    _negative_dims,
    batch_bin,
    columnar,
    episodes_of,
    stored,
)
from tests.test_reader_batch import (
    _set as _ref_edit,
)

#: The C function, as the module found it at import (None without the extension).
DECODE_PLAIN_C = _format._decode_plain_c

pytestmark = pytest.mark.skipif(
    DECODE_PLAIN_C is None,
    reason="gym_recording._speedups is not built (or GYM_RECORDING_PURE_PYTHON is set)",
)


def c_and_python(
    objs: Any, storage: LocalStorage, last_continues: bool = False
) -> tuple[Any, _format.PlainBatch | None]:
    """The C batch path's result and the Python batch path's, each with a context of its own.

    Whatever C returns, Python returns too: the same episodes (arrays of the same dtype,
    shape, strides, flags, bytes and base; the same other values), all of them decoded.
    """
    ctx = _format.DecodeContext("p.json", storage.map)
    got = DECODE_PLAIN_C(
        objs, _format._LE_DTYPE_SIZES, ctx._opened, ctx._open_plain, last_continues
    )
    want = _format.decode_batch_plain_py(
        objs, _format.DecodeContext("p.json", storage.map), last_continues
    )
    if got is None:
        return None, want
    episodes, steps = got
    assert want is not None and want.complete and steps == want.steps
    assert type(episodes) is list and len(episodes) == len(want.episodes)
    for e, w in zip(episodes, want.episodes, strict=True):
        assert type(e) is tuple and w is not None and len(e) == len(w) == 9
        for x, y in zip(e[:3], w[:3], strict=True):
            assert type(x) is np.ndarray and x.dtype == y.dtype and x.shape == y.shape
            assert x.strides == y.strides and x.flags == y.flags
            assert x.tobytes() == y.tobytes()
            assert type(x.base) is type(y.base) and x.flags.owndata == y.flags.owndata
            if x.base is not None:  # the view the column slices: one view of the blob
                assert x.base.shape == y.base.shape and x.base.flags == y.base.flags
                assert type(x.base.base) is type(y.base.base)
        for x, y in zip(e[3:], w[3:], strict=True):
            assert x is y  # the parsed values themselves
    return got, want


def test_c_takes_the_writers_layout(tmp_path):
    """Batches as the writer lays them out: decoded in C, to what Python decodes."""
    storage = LocalStorage(str(tmp_path), create=False)
    for name in (
        "columnar-equal",
        "columnar-varying",
        "columnar-one",
        "columnar-3d-obs",
        "columnar-scalar-obs",
        "zero-step-inside",
        "zero-step-only",
        "zero-step-first-and-last",
        "no-times",
    ):
        objs, blob = LAYOUTS[name]()[0]
        (tmp_path / batch_bin(0)).write_bytes(blob)
        for parsed in (objs, json.loads(json.dumps(objs))):  # (the json module's objects)
            got, _ = c_and_python(parsed, storage)
            assert got is not None, name
        # A writable blob (another storage): views as read-only, based alike.
        for make in (bytes, bytearray):
            buf = memoryview(make(blob))
            ctx = _format.DecodeContext("p.json", lambda n, buf=buf: buf)
            taken = _format._decode_plain_c(
                objs, _format._LE_DTYPE_SIZES, ctx._opened, ctx._open_plain, False
            )
            assert taken is not None, make  # (C takes it: not Python compared with Python)
            out = _format.decode_batch_plain(objs, ctx, False)
            want = _format.decode_batch_plain_py(
                objs, _format.DecodeContext("p.json", lambda n, buf=buf: buf), False
            )
            assert out is not None and want is not None
            for e, w in zip(out.episodes, want.episodes, strict=True):
                assert e is not None and w is not None
                for x, y in zip(e[:3], w[:3], strict=True):
                    assert x.flags == y.flags and not x.flags.writeable
                    assert (x.base is None) == (y.base is None)
                    if x.base is not None:
                        assert x.base.flags == y.base.flags and not x.base.flags.writeable
                        assert type(x.base.base) is memoryview


def test_c_declines_what_it_does_not_take(tmp_path):
    """The layouts Python takes episode by episode, or partly, are left to Python."""
    storage = LocalStorage(str(tmp_path), create=False)
    for name in ("by-episode", "by-episode-odd-rows", "zero-step-by-episode"):
        objs, blob = LAYOUTS[name]()[0]
        (tmp_path / batch_bin(0)).write_bytes(blob)
        got, _ = c_and_python(objs, storage)
        assert got is None, name
    objs, blob = columnar(batch_bin(0), episodes_of([2, 3]))
    (tmp_path / batch_bin(0)).write_bytes(blob)
    assert c_and_python(objs, storage)[0] is not None
    assert c_and_python(objs, storage, last_continues=True)[0] is None
    assert c_and_python([], storage)[0] is None
    assert c_and_python(tuple(objs), storage)[0] is None


class _Dict(dict):  # type: ignore[type-arg]
    """A dict subclass: neither parser makes one, so C leaves it to Python."""


def _obj_edit(i: int = 1, **changes: Any) -> Any:
    def edit(objs: list[Any]) -> None:
        objs[i].update(changes)

    return edit


def _replace_ref(key: str, make: Any) -> Any:
    def edit(objs: list[Any]) -> None:
        objs[1][key] = make(objs[1][key])

    return edit


def _replace_obj(make: Any) -> Any:
    def edit(objs: list[Any]) -> None:
        objs[1] = make(objs[1])

    return edit


def _shift_all(key: str, start: int) -> Any:
    """``key``'s arrays consecutive from ``start`` (which may be far outside the blob)."""

    def edit(objs: list[Any]) -> None:
        _consecutive(objs, key, start)

    return edit


def _wide_tail(objs: list[Any]) -> None:
    # A row of 2**62 float32 (2**64 bytes: wraps to 0 in int64), placed consecutively.
    for obj in objs:
        n = obj["observations"]["shape"][0]
        obj["observations"].update(shape=[n, 2**62], size=0)
    _consecutive(objs, "observations", objs[0]["observations"]["npyoff"])


def _rows_wrap(objs: list[Any]) -> None:
    # rows * row_bytes wraps around 2**64 to the size given.
    objs[1]["actions"].update(shape=[2**61 + 3], size=24)
    objs[1]["rewards"].update(shape=[2**61 + 3], size=24)
    objs[1]["observations"].update(shape=[2**61 + 4, 4], size=64)


def _first_only(edit: Any) -> Any:
    """``edit`` on a batch of its first episode object alone."""

    def one(objs: list[Any]) -> None:
        del objs[1:]
        edit(objs)

    return one


def _relaid(key: str, i: int = 1, **changes: Any) -> Any:
    """Change object ``i``'s reference of ``key``, then lay the key's arrays out again."""

    def edit(objs: list[Any]) -> None:
        objs[i][key].update(changes)
        _consecutive(objs, key, objs[0][key]["npyoff"])

    return edit


def _every(key: str, make: Any) -> Any:
    """Every reference of ``key`` changed by ``make(ref)`` (a dict of changes), laid out again."""

    def edit(objs: list[Any]) -> None:
        for obj in objs:
            obj[key].update(make(obj[key]))
        _consecutive(objs, key, objs[0][key]["npyoff"])

    return edit


def _overlapping_columns(objs: list[Any]) -> None:
    # The rewards laid over the actions (both 8-byte items, as many).
    _consecutive(objs, "rewards", objs[0]["actions"]["npyoff"])


def _end_wrap(objs: list[Any]) -> None:
    # off + size beyond 2**63: the next offset would wrap.
    objs[-1]["rewards"]["npyoff"] = 2**63 - 8


C_EDGES: dict[str, Any] = {
    "off-2**63": _ref_edit("rewards", npyoff=2**63),
    "off-2**64-1": _ref_edit("rewards", npyoff=2**64 - 1),
    "off--2**63-1": _ref_edit("rewards", npyoff=-(2**63) - 1),
    "off-negative-first": _shift_all("actions", -16),
    "off-far": _shift_all("actions", 2**62),
    "off-bool": _ref_edit("actions", i=0, npyoff=False),
    "off-float": _ref_edit("actions", npyoff=1600.0),
    "off-end-wraps": _end_wrap,
    "size-2**63": _ref_edit("rewards", size=2**63),
    "size-2**64+24": _ref_edit("rewards", size=2**64 + 24),
    "size-negative": _ref_edit("rewards", size=-24),
    "size-bool": _ref_edit("rewards", size=True),
    "rows-wrap": _rows_wrap,
    "rows-negative": _ref_edit("actions", shape=[-3]),
    "rows-bool": _ref_edit("actions", shape=[True], size=8),
    "rows-float": _ref_edit("actions", shape=[3.0]),
    "rows-2**64": _ref_edit("actions", shape=[2**64]),
    "tail-bool": _ref_edit("observations", shape=[4, True]),
    "tail-float": _ref_edit("observations", shape=[4, 4.0]),
    "tail-zero": _ref_edit("observations", shape=[4, 0], size=0),
    "tail-negative": _ref_edit("observations", shape=[4, -4]),
    "tail-2**63": _ref_edit("observations", shape=[4, 2**63]),
    "tail-wide": _wide_tail,
    "tail-other": _ref_edit("observations", shape=[8, 2]),
    "ndim-0": _ref_edit("observations", shape=[], size=4),
    "ndim-33": _ref_edit("observations", shape=[4] + [1] * 32),
    "shape-tuple-like": _ref_edit("observations", shape={"0": 4}),
    "shape-str": _ref_edit("actions", shape="3"),
    "dtype-list": _ref_edit("actions", dtype=["int64"]),
    "dtype-none": _ref_edit("actions", i=0, dtype=None),
    "dtype-other": _ref_edit("actions", dtype="int32"),
    "dtype-big-endian": _ref_edit("actions", i=0, dtype=">i8"),
    "dtype-complex-rewards": _ref_edit("rewards", i=0, dtype="complex128"),
    "npyfile-list": _ref_edit("rewards", npyfile=[batch_bin(0)]),
    "npyfile-first-int": _ref_edit("rewards", i=0, npyfile=7),
    "npyfile-other": _ref_edit("rewards", npyfile="x.bin"),
    "npyfile-dotdot": _ref_edit("rewards", i=0, npyfile="../" + batch_bin(0)),
    "type-other": _ref_edit("rewards", __type="array"),
    "type-not-str": _ref_edit("rewards", __type=None),
    "order-F": _ref_edit("observations", order="F"),
    "order-missing": lambda objs: objs[1]["observations"].pop("order"),
    "ref-list": _replace_ref("actions", lambda r: list(r.items())),
    "ref-none": _replace_ref("rewards", lambda r: None),
    "ref-subclass": _replace_ref("rewards", _Dict),
    "obj-subclass": _replace_obj(_Dict),
    "obj-list": _replace_obj(lambda o: list(o)),
    "obj-extra-key": _obj_edit(note=1),
    "obj-part": _obj_edit(part=0),
    "obj-continues": _obj_edit(continues=False),
    "obj-infos": _obj_edit(infos=None),
    "obj-missing-seed": lambda objs: objs[1].pop("seed"),
    "obj-missing-rewards": lambda objs: objs[1].pop("rewards"),
    "terminated-int": _obj_edit(terminated=1),
    "truncated-none": _obj_edit(truncated=None),
    "seed-bool": _obj_edit(seed=True),
    "seed-float": _obj_edit(seed=1.0),
    "options-dict": _obj_edit(options={}),
    "options-false": _obj_edit(options=False),
    "time-int": _obj_edit(started_at=1700000000),
    "time-2**63": _obj_edit(ended_at=2.0**63),
    "time--2**63": _obj_edit(started_at=-(2.0**63)),
    "time-inf": _obj_edit(ended_at=float("inf")),
    "time-str": _obj_edit(ended_at="soon"),
    "overlap": lambda objs: objs[0]["rewards"].update(npyoff=objs[0]["actions"]["npyoff"]),
    "overlap-columns": _overlapping_columns,
    "too-few-actions": _ref_edit("actions", shape=[1], size=8),
    "too-few-actions-relaid": _relaid("actions", shape=[2], size=16),
    "too-few-observations-relaid": _relaid("observations", shape=[3, 4], size=48),
    "size-short-last": _ref_edit("rewards", i=2, size=8),
    "rows-negative-relaid": _negative_dims,
    "end-wraps-alone": _first_only(_ref_edit("rewards", i=0, npyoff=2**63 - 8)),
    "tail-zero-first": _ref_edit("observations", i=0, shape=[3, 0], size=0),
    "tail-negative-first": _ref_edit("observations", i=0, shape=[3, -4], size=-48),
    "rewards-complex64": _every("rewards", lambda r: {"dtype": "complex64"}),
    "rewards-2d": _every("rewards", lambda r: {"shape": [*r["shape"], 1]}),
    "ndim-33-all": _every("observations", lambda r: {"shape": [*r["shape"], *[1] * 31]}),
    "ndim-33-alone": _first_only(
        _every("observations", lambda r: {"shape": [*r["shape"], *[1] * 31]})
    ),
}

#: Edits that leave the batch as plain as it was: C takes them as Python does.
C_TAKES = {
    "ref-extra-key": _ref_edit("observations", note="kept"),
    "seed-huge": _obj_edit(seed=2**80),
    "seed-negative": _obj_edit(seed=-(2**63)),
    "time-none": _obj_edit(started_at=None),
    "time-absent": lambda objs: objs[1].pop("ended_at"),
    "time-nan": _obj_edit(ended_at=float("nan")),
}


@pytest.mark.parametrize("case", sorted(C_EDGES))
def test_c_declines_hostile_batches(tmp_path, case):
    """Numbers beyond int64, wrapping products, wrong types, odd keys: C leaves them to Python."""
    objs, storage = stored(tmp_path, columnar(batch_bin(0), episodes_of([2, 3, 2])))
    C_EDGES[case](objs)
    got, _ = c_and_python(objs, storage)
    assert got is None


@pytest.mark.parametrize("case", sorted(C_TAKES))
def test_c_takes_what_python_takes_whole(tmp_path, case):
    objs, storage = stored(tmp_path, columnar(batch_bin(0), episodes_of([2, 3, 2])))
    C_TAKES[case](objs)
    got, want = c_and_python(objs, storage)
    assert got is not None and want is not None


def test_c_opens_no_blob_python_would_not(tmp_path):
    """A batch declined before its blob is needed leaves the blob unopened."""
    objs, blob = columnar(batch_bin(0), episodes_of([2, 3]))
    (tmp_path / batch_bin(0)).write_bytes(blob)
    objs[1]["rewards"]["dtype"] = None
    opened: list[str] = []

    def get_blob(name: str) -> memoryview:
        opened.append(name)
        return memoryview(blob)

    ctx = _format.DecodeContext("p.json", get_blob)
    assert (
        DECODE_PLAIN_C(objs, _format._LE_DTYPE_SIZES, ctx._opened, ctx._open_plain, False) is None
    )
    assert opened == []
    # A blob that cannot be opened: declined, for Python to report.
    objs[1]["rewards"]["dtype"] = "float64"
    for r in (o[k] for o in objs for k in ("observations", "actions", "rewards")):
        r["npyfile"] = "missing.bin"
    ctx = _format.DecodeContext("p.json", LocalStorage(str(tmp_path), create=False).map)
    assert (
        DECODE_PLAIN_C(objs, _format._LE_DTYPE_SIZES, ctx._opened, ctx._open_plain, False) is None
    )


@pytest.mark.parametrize("seed", range(40))
def test_c_batch_path_gives_what_the_python_batch_path_gives(tmp_path, seed):
    """Mutated batches: whatever C decodes, Python decodes whole, to the same episodes."""
    rng = random.Random(1000 + seed)
    episodes = episodes_of([2, 3, 1, 2, 4], (2,), seed=seed)
    base, storage = stored(tmp_path, columnar(batch_bin(0), episodes))
    taken = 0
    for k in range(25):
        objs = copy.deepcopy(base)
        if k:
            _mutate(rng, objs)
        got, _ = c_and_python(objs, storage, rng.random() < 0.1)
        taken += got is not None
    assert taken  # (the unmutated batch, at least)


def test_c_declines_rows_wider_than_the_blob(tmp_path):
    """Zero-step episodes whose action rows would each be wider than the blob."""
    objs, storage = stored(tmp_path, columnar(batch_bin(0), episodes_of([0, 0, 0])))
    for obj in objs:
        obj["actions"].update(shape=[0, 2**40], size=0)
    got, _ = c_and_python(objs, storage)
    assert got is None
