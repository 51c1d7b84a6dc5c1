"""The batch encoder's fast path writes the same documents as its general path."""

from __future__ import annotations

import json
import time
import types
from typing import Any

import numpy as np
import pytest

from gym_recording import _format, recording
from tests.conftest import requires_c


def _record(**kw):
    base = dict(
        observations=np.arange(12, dtype=np.float32).reshape(3, 4),
        actions=np.array([1, 0], dtype=np.int64),
        rewards=np.array([0.5, -1.25]),
        terminated=True,
        truncated=False,
        seed=7,
        started_at=1700000000.123456,
        ended_at=1700000001.5,
    )
    base.update(kw)
    return _format.EpisodeRecord(**base)


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"seed": None, "started_at": None, "ended_at": None},
        {"part": 2, "continues": True, "terminated": False},
        {"actions": np.zeros((2, 3), dtype=np.float16), "truncated": True},
        {"observations": np.zeros((3, 2, 2, 3), dtype=np.uint8)},
        {"rewards": np.array([1, 2], dtype=np.int64)},
        {
            "observations": np.zeros((1, 4), np.float32),
            "actions": np.zeros((0,), np.int64),
            "rewards": np.zeros((0,)),
        },
    ],
)
def test_fast_path_equals_general_path(kw):
    """Episode JSON and blob bytes from the fast path equal the dict-and-json.dumps path."""
    eps = [_record(**kw), _record(**kw)]
    fast_json, fast_chunks, fast_size = _format.encode_batch(eps, "x.bin")
    blob = _format.BlobBuilder("x.bin")
    general = {"episodes": [_format._episode_obj(ep, blob) for ep in eps]}
    assert json.loads(fast_json) == json.loads(_format.dumps(general))
    assert fast_size == blob.size
    assert b"".join(bytes(c) for c in fast_chunks) == b"".join(bytes(c) for c in blob.chunks)


def test_general_path_is_used_for_options_infos_and_structures():
    """Options, infos and dict fields take the general path and still encode exactly."""
    ep = _record(
        options={"difficulty": 3, "nan": float("nan")},
        infos=[{"a": np.int32(1)}, {}, {"b": (1, 2)}],
        observations=_format.FieldDict(
            {"pos": np.zeros((3, 2), np.float32), "id": np.arange(3, dtype=np.int64)}
        ),
    )
    data, _, _ = _format.encode_batch([ep], "y.bin")
    obj = json.loads(data)["episodes"][0]
    assert obj["options"]["nan"] == {"__type": "float", "value": "nan"}
    assert obj["observations"]["__type"] == "dict"
    assert len(obj["infos"]) == 3


def _decode_all(data: bytes, chunks: list, bin_name: str) -> list[dict]:
    blob = memoryview(b"".join(bytes(c) for c in chunks))
    ctx = _format.DecodeContext("batch.json", lambda name: blob)
    objs = json.loads(data)["episodes"]
    return [_format.decode_episode(o, ctx, f"episodes[{i}]") for i, o in enumerate(objs)]


def _spans(lengths, **kw):
    """Back-to-back episodes of ``lengths`` steps, as the recording lays them out."""
    spans, o, a = [], 0, 0
    for i, n in enumerate(lengths):
        base = dict(
            terminated=i % 2 == 0,
            truncated=i % 2 == 1,
            seed=None if i == 1 else 100 + i,
            options=None,
            infos=None,
            started_at=1700000000.25 + i,
            ended_at=None if i == 2 else 1700000000.75 + i,
        )
        base.update(kw)
        spans.append(_format.EpisodeSpan(o, o + n + 1, a, a + n, **base))
        o, a = o + n + 1, a + n
    return spans, o, a


@pytest.mark.parametrize(
    ("obs_row", "act_row"),
    [
        ((4,), ()),  # float32[4] obs (16 bytes), int64 actions
        ((17,), (6,)),  # float64[17], float32[6] actions (24 bytes)
        ((6, 8, 3), ()),  # uint8 frames
        ((), (2,)),  # 0-d float64 obs
    ],
)
def test_columnar_batch_decodes_like_per_episode_batch(obs_row, act_row):
    """encode_columns lays out three arrays; every episode decodes as the general path's."""
    lengths = [3, 0, 5, 1]
    spans, n_obs, n_act = _spans(lengths, part=0)
    spans[-1].continues = True
    rng = np.random.default_rng(1)
    o_dt = np.uint8 if len(obs_row) == 3 else (np.float32 if obs_row == (4,) else np.float64)
    a_dt = np.float32 if act_row else np.int64
    obs = (rng.random((n_obs, *obs_row)) * 200).astype(o_dt)
    act = (rng.random((n_act, *act_row)) * 9).astype(a_dt)
    rew = rng.normal(size=n_act)
    col = _format.encode_columns(obs, act, rew, spans, "c.bin")
    assert col is not None, "the columnar path should take this batch"
    data, chunks, size = col
    assert len(chunks) == 3 and size == obs.nbytes + act.nbytes + rew.nbytes
    records = _format.episode_records(obs, act, rew, spans)  # the per-episode path
    g_data, g_chunks, _ = _format.encode_batch(records, "c.bin")
    col_eps, gen_eps = _decode_all(data, chunks, "c.bin"), _decode_all(g_data, g_chunks, "c.bin")
    assert len(col_eps) == len(lengths)
    for c, g in zip(col_eps, gen_eps, strict=True):
        for key in ("observations", "actions", "rewards"):
            assert c[key].dtype == g[key].dtype and c[key].shape == g[key].shape
            assert c[key].tobytes() == g[key].tobytes()
        arrays = ("observations", "actions", "rewards")
        assert {k: v for k, v in c.items() if k not in arrays} == {
            k: v for k, v in g.items() if k not in arrays
        }
    for obj in json.loads(data)["episodes"]:
        for key in ("observations", "actions", "rewards"):
            assert obj[key]["npyoff"] % 8 == 0


def _encode_both_ways(monkeypatch, *args):
    """encode_columns with its per-episode loop in C, then in Python."""
    if _format._speedups is None:
        pytest.skip("gym_recording._speedups is not built (no C compiler at install?)")
    c = _format.encode_columns(*args)
    with monkeypatch.context() as mp:
        mp.setattr(_format, "_speedups", None)
        py = _format.encode_columns(*args)
    assert c is not None and py is not None
    return c, py


@pytest.mark.parametrize(
    "span_kw",
    [
        {},
        {"seed": 2**70},  # beyond 64 bits: written as the exact decimal
        {"seed": -(2**63)},  # the most negative 64-bit int
        {"seed": np.int64(-5)},  # int() of a numpy int, as the Python path does
        {"seed": None, "started_at": None, "ended_at": None},
        {"started_at": 0.1, "ended_at": 1e22},  # shortest repr, exponent form
        {"started_at": 5.0, "ended_at": -0.0},
        {"started_at": np.float64(1796043172.4935718)},
        {"part": 3, "continues": True},
        {"terminated": 1, "truncated": np.bool_(True)},  # truthiness, as the Python path
    ],
)
@pytest.mark.parametrize("name", ["c.bin", 'we"ird %s %% \u00e9\\.bin'])
def test_columnar_json_in_c_is_the_python_templates_bytes(monkeypatch, span_kw, name):
    """The per-episode loop in C (``_speedups.encode_spans``) writes the template's bytes."""
    spans, n_obs, n_act = _spans([3, 0, 5, 1, 2], **span_kw)
    obs = np.zeros((n_obs, 2, 3), np.float64)
    act = np.zeros((n_act, 2), np.float32)
    rew = np.zeros(n_act)
    (c_data, c_chunks, c_size), (p_data, p_chunks, p_size) = _encode_both_ways(
        monkeypatch, obs, act, rew, spans, name
    )
    assert c_data == p_data
    assert c_size == p_size and [bytes(x) for x in c_chunks] == [bytes(x) for x in p_chunks]
    json.loads(c_data)  # and it is JSON


class _DoubledSeed(_format.EpisodeSpan):
    """A span whose ``seed`` is a property over the slot: C must not read the slot."""

    __slots__ = ()

    _slot = _format.EpisodeSpan.seed  # the base class's slot (a member descriptor)

    @property  # type: ignore[misc]
    def seed(self) -> Any:
        return 2 * type(self)._slot.__get__(self)  # type: ignore[attr-defined]

    @seed.setter
    def seed(self, value: Any) -> None:
        type(self)._slot.__set__(self, value)  # type: ignore[attr-defined]


@pytest.mark.parametrize("first", ["span", "other"])
def test_spans_of_another_type_are_read_by_getattr(monkeypatch, first):
    """C reads an EpisodeSpan's slots directly; spans of other types mixed in (a subclass with
    a property, a plain object), first or not, give the same bytes through getattr."""
    spans, n_obs, n_act = _spans([2, 0, 3, 1])
    fields = _format.EpisodeSpan.__slots__
    plain = types.SimpleNamespace(**{f: getattr(spans[1], f) for f in fields})
    doubled = _DoubledSeed(*(getattr(spans[2], f) for f in fields))
    mixed = [spans[0], plain, doubled, spans[3]] if first == "span" else [plain, doubled]
    if first == "other":
        plain.obs_start, plain.act_start = 0, 0
        plain.obs_stop, plain.act_stop = 1, 0
        doubled.obs_start, doubled.obs_stop, doubled.act_start, doubled.act_stop = 1, 5, 0, 3
    args = (np.zeros((n_obs, 4), np.float32), np.zeros(n_act, np.int64), np.zeros(n_act))
    c, py = _encode_both_ways(monkeypatch, *args, mixed, "m.bin")
    assert c[0] == py[0]
    seeds = [e["seed"] for e in json.loads(c[0])["episodes"]]
    assert seeds == ([100, None, 204, 103] if first == "span" else [None, 204])


@requires_c
def test_a_span_missing_an_attribute_is_refused_both_ways(monkeypatch):
    """An unset slot is an AttributeError in C, as in Python (never a crash)."""
    spans, n_obs, n_act = _spans([2, 3])
    del spans[1].ended_at
    args = (np.zeros((n_obs, 4), np.float32), np.zeros(n_act, np.int64), np.zeros(n_act))
    with pytest.raises(AttributeError, match="ended_at"):
        _format.encode_columns(*args, spans, "a.bin")
    monkeypatch.setattr(_format, "_speedups", None)
    with pytest.raises(AttributeError, match="ended_at"):
        _format.encode_columns(*args, spans, "a.bin")


def test_microsecond_times_are_written_as_repr_writes_them(monkeypatch):
    """The recording's times are whole microseconds, which C writes without the shortest-digits
    search (from 1e-4 to 2**32); the text is still exactly repr's, at and beyond the edges."""
    rng = np.random.default_rng(11)
    us = np.concatenate(
        [
            rng.integers(100, 2**32 * 10**6, 3000),
            rng.integers(1_700_000_000 * 10**6, 1_900_000_000 * 10**6, 3000),
            rng.integers(100, 10**8, 3000),
        ]
    )
    times = [int(u) / 1e6 for u in us]
    times += [1e-4, 0.5, 5.0, 1.0, 123.456, 0.000101, 1700000000.25, 4294967295.999999]
    times += [9.9e-5, 1e-5, 0.0, -0.0, -1.5, 2.0**32, 4294967296.5, 1e22, 0.1 + 0.2]
    times += [1796043172.4935718, float(np.nextafter(0.5, 1.0))]  # not whole microseconds
    spans, n_obs, n_act = _spans([1] * len(times))
    for sp, t in zip(spans, times, strict=True):
        sp.started_at, sp.ended_at = t, -t
    obs = np.zeros((n_obs, 4), np.float32)
    act = np.zeros(n_act, np.int64)
    c, py = _encode_both_ways(monkeypatch, obs, act, np.zeros(n_act), spans, "t.bin")
    assert c[0] == py[0]
    decoded = [(e["started_at"], e["ended_at"]) for e in json.loads(c[0])["episodes"]]
    assert decoded == [(t, -t) for t in times]  # and they read back as the same floats


def test_recorded_times_are_whole_microseconds():
    for _ in range(100):
        t = recording._now()
        assert round(t * 1e6) / 1e6 == t and abs(t - time.time()) < 1


def test_columnar_json_in_c_random_batches(monkeypatch):
    """Random batches (lengths, flags, seeds, times, parts): the same bytes both ways."""
    rng = np.random.default_rng(7)
    for _ in range(50):
        lengths = rng.integers(0, 40, size=int(rng.integers(1, 30))).tolist()
        spans, n_obs, n_act = _spans(lengths)
        for sp in spans:
            sp.terminated, sp.truncated = bool(rng.random() < 0.5), bool(rng.random() < 0.5)
            sp.seed = [None, int(rng.integers(-(2**62), 2**62))][int(rng.integers(2))]
            sp.started_at = None if rng.random() < 0.2 else float(rng.random() * 2e9)
            sp.ended_at = None if rng.random() < 0.2 else float(rng.normal() * 1e-300)
            sp.part = int(rng.integers(0, 3))
        spans[-1].continues = bool(rng.random() < 0.5)
        obs = np.zeros((n_obs, 4), np.float32)
        act = np.zeros(n_act, np.int64)
        rew = np.zeros(n_act)
        c, py = _encode_both_ways(monkeypatch, obs, act, rew, spans, "r.bin")
        assert c[0] == py[0]


@pytest.mark.parametrize(
    "case",
    ["odd_rows", "options", "infos", "dict_field", "int_rewards"],
)
def test_columnar_path_declines_what_it_cannot_lay_out(case):
    spans, n_obs, n_act = _spans([2, 2])
    obs = np.zeros((n_obs, 4), np.float32)
    act = np.zeros(n_act, np.int64)
    rew = np.zeros(n_act)
    if case == "odd_rows":
        obs = np.zeros((n_obs, 3), np.uint8)  # 3-byte rows: offsets would not be aligned
    elif case == "options":
        spans[1].options = {"level": 2}
    elif case == "infos":
        spans[0].infos = [{}, {}, {}]
    elif case == "dict_field":
        obs = _format.FieldDict({"a": obs})
    elif case == "int_rewards":
        rew = np.zeros(n_act, np.int64)
    assert _format.encode_columns(obs, act, rew, spans, "c.bin") is None


PARSE_CASES = [
    b'{"a": 1, "a": 2}',
    b"[18446744073709551615, 18446744073709551616, -9223372036854775809]",
    b"1180591620717411303428",
    b"[0.12345678901234567890123, 1e-400, -0.0, 1E5]",
    b'"\\ud800"',
    b'"a\x01b"',
    b"[NaN]",
    b"[Infinity]",
    b"\xef\xbb\xbf[1]",
    b"[" * 3000 + b"]" * 3000,
    b'{"x": "\xff"}',
    b"[1,]",
    b'{"episodes": [{"seed": 12345678901234567890123}]}',
]


@pytest.mark.parametrize("data", PARSE_CASES, ids=range(len(PARSE_CASES)))
@pytest.mark.parametrize("strict", [True, False])
def test_parse_json_is_the_same_with_or_without_orjson(data, strict, monkeypatch):
    """The optional orjson fast path changes nothing: same values, same refusals."""

    def outcome():
        try:
            v = _format.parse_json(data, "f.json", strict=strict)
        except _format.TraceFormatError as exc:
            return ("refused", str(exc))
        return ("parsed", repr(v))

    with_fast = outcome()
    monkeypatch.setattr(_format, "_orjson", None)
    assert outcome() == with_fast
