"""Tests of gym_recording.format.spaces: the FORMAT.md §7 JSON form of spaces."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

import gym_recording.format.spaces
from gym_recording import UnknownSpace
from gym_recording._errors import TraceFormatError
from gym_recording.format.spaces import MAX_SPACE_DEPTH, space_from_json, space_to_json

FLOAT_DTYPES = ["float16", "float32", "float64"]
INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
BOX_DTYPES = [*FLOAT_DTYPES, *INT_DTYPES, "bool"]
SHAPES = [(), (3,), (2, 3), (2, 1, 3), (1, 2, 2, 3)]


def strict_json(d: Any) -> Any:
    """Serialise ``d`` as strict JSON text and parse it back, as a manifest round trip does."""
    return json.loads(json.dumps(d, allow_nan=False))


def roundtrip(space: Any) -> Any:
    """Write ``space`` to strict JSON text and read it back."""
    return space_from_json(strict_json(space_to_json(space)))


def make_box(dtype_name: str, shape: tuple[int, ...], seed: int = 0) -> spaces.Box:
    """A Box whose bounds mix finite, extreme and (for floats) infinite values."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype_name)
    if dtype.kind == "f":
        low = rng.uniform(-100, 0, size=shape).astype(dtype)
        high = rng.uniform(0, 100, size=shape).astype(dtype)
        low[rng.random(shape) < 0.4] = -np.inf
        high[rng.random(shape) < 0.4] = np.inf
        if low.size:
            low.flat[0] = -np.inf  # at least one of each, whatever the draw
            high.flat[-1] = np.inf
            high.flat[0] = np.finfo(dtype).max
    elif dtype.kind == "b":
        low = rng.random(shape) < 0.3
        high = low | (rng.random(shape) < 0.7)
    else:
        info = np.iinfo(dtype)
        low = rng.integers(info.min, info.max // 2, size=shape, dtype=dtype, endpoint=True)
        high = np.maximum(low, rng.integers(info.min, info.max, size=shape, dtype=dtype))
        if low.size:
            low.flat[0] = info.min
            high.flat[-1] = info.max
    return spaces.Box(low=np.asarray(low), high=np.asarray(high), shape=shape, dtype=dtype)


def assert_same_box(got: Any, want: spaces.Box) -> None:
    """Box equality is approximate (np.allclose); require exact bounds, shape and dtype too."""
    assert isinstance(got, spaces.Box)
    assert got == want
    assert got.shape == want.shape
    assert got.dtype == want.dtype
    assert got.low.dtype == want.low.dtype and got.high.dtype == want.high.dtype
    assert np.array_equal(got.low, want.low) and np.array_equal(got.high, want.high)


def nested_tuple_json(depth: int) -> dict[str, Any]:
    """A Tuple nested ``depth`` levels deep (its innermost space at depth ``depth``)."""
    d: dict[str, Any] = {"type": "Discrete", "n": 2, "start": 0}
    for _ in range(depth):
        d = {"type": "Tuple", "spaces": [d]}
    return d


def nested_tuple_space(depth: int) -> spaces.Space[Any]:
    """A gymnasium Tuple nested ``depth`` levels deep around a Discrete."""
    space: spaces.Space[Any] = spaces.Discrete(2)
    for _ in range(depth):
        space = spaces.Tuple([space])
    return space


# --- Box -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", BOX_DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"rank{len(s)}")
def test_box_roundtrip(dtype: str, shape: tuple[int, ...]) -> None:
    """A Box of every dtype and rank 0..4 reads back exactly equal through strict JSON."""
    box = make_box(dtype, shape)
    d = space_to_json(box)
    assert d is not None
    assert d["type"] == "Box" and d["dtype"] == dtype and d["shape"] == list(shape)
    assert_same_box(roundtrip(box), box)


def test_box_json_layout() -> None:
    """A Box is written with the exact keys and nested-list bounds of §7."""
    box = spaces.Box(
        low=np.array([[-np.inf, 0.5], [-1.0, -2.0]], np.float32),
        high=np.array([[1.0, np.inf], [np.inf, 3.25]], np.float32),
        dtype=np.float32,
    )
    assert space_to_json(box) == {
        "type": "Box",
        "shape": [2, 2],
        "dtype": "float32",
        "low": [["-inf", 0.5], [-1.0, -2.0]],
        "high": [[1.0, "inf"], ["inf", 3.25]],
    }


def test_box_rank0_bounds_are_scalars() -> None:
    """A rank-0 Box has scalar bounds, the depth-0 case of a nested list."""
    d = space_to_json(spaces.Box(low=-np.inf, high=2.0, shape=(), dtype=np.float64))
    assert d == {"type": "Box", "shape": [], "dtype": "float64", "low": "-inf", "high": 2.0}


def test_box_int_and_bool_bounds_are_json_ints_and_bools() -> None:
    """Integer bounds are JSON integers (uint64 max included) and bool bounds JSON booleans."""
    low, high = np.array([0, 1], np.uint64), np.array([2**64 - 2, 2**64 - 1], np.uint64)
    d = space_to_json(spaces.Box(low=low, high=high, dtype=np.uint64))
    assert d is not None and d["low"] == [0, 1] and d["high"] == [2**64 - 2, 2**64 - 1]
    assert all(type(v) is int for v in d["low"] + d["high"])
    b = space_to_json(
        spaces.Box(low=np.zeros(2, bool), high=np.array([False, True]), dtype=np.bool_)
    )
    assert b is not None and b["low"] is False and b["high"] == [False, True]


def test_box_uniform_bounds_are_one_scalar() -> None:
    """Uniform bounds (an image's 0..255) are written as one scalar and read back in full."""
    box = spaces.Box(0, 255, (210, 160, 3), np.uint8)
    d = space_to_json(box)
    assert d is not None and d["low"] == 0 and d["high"] == 255
    assert len(json.dumps(d)) < 200
    assert_same_box(roundtrip(box), box)
    inf = spaces.Box(-np.inf, np.inf, (3,), np.float32)
    d = space_to_json(inf)
    assert d is not None and d["low"] == "-inf" and d["high"] == "inf"
    assert_same_box(roundtrip(inf), inf)


@pytest.mark.parametrize("low", [[-0.0, 0.0], [0.0, -0.0], [-0.0, -0.0]])
def test_box_bounds_keep_the_sign_of_zero(low: list[float]) -> None:
    """Bounds equal in value but not in bytes (-0.0 == 0.0) are not written as one scalar."""
    box = spaces.Box(np.array(low, np.float32), np.ones(2, np.float32), dtype=np.float32)
    got = roundtrip(box)
    assert_same_box(got, box)
    assert got.low.tobytes() == box.low.tobytes()


def test_box_zero_size_roundtrip() -> None:
    """A Box with a zero-length axis writes empty lists and reads back."""
    box = spaces.Box(low=0.0, high=1.0, shape=(2, 0, 3), dtype=np.float32)
    d = space_to_json(box)
    assert d is not None and d["low"] == [[], []]
    assert_same_box(roundtrip(box), box)


@settings(deadline=None, max_examples=60)
@given(
    st.lists(
        st.floats(allow_nan=False, width=32) | st.sampled_from([np.inf, -np.inf]),
        min_size=1,
        max_size=8,
    )
)
def test_box_float32_bounds_property(values: list[float]) -> None:
    """Any float32 bounds, extremes and infinities included, survive strict JSON exactly."""
    low = np.array(values, np.float32)
    high = np.full_like(low, np.inf)
    box = spaces.Box(low=np.minimum(low, np.float32(np.finfo(np.float32).max)), high=high)
    assert_same_box(roundtrip(box), box)


# --- Discrete, MultiDiscrete, MultiBinary, Text -----------------------------------------------


@pytest.mark.parametrize("start", [0, 1, -5, 2**40])
def test_discrete_roundtrip(start: int) -> None:
    """A Discrete with any start is written as n/start and reads back equal."""
    space = spaces.Discrete(7, start=start)
    assert space_to_json(space) == {"type": "Discrete", "n": 7, "start": start}
    assert roundtrip(space) == space


def test_discrete_non_default_dtype_roundtrip() -> None:
    """A Discrete of a non-int64 dtype carries its dtype and reads back equal."""
    space = spaces.Discrete(4, start=2, dtype=np.int16)
    assert space_to_json(space) == {"type": "Discrete", "n": 4, "start": 2, "dtype": "int16"}
    got = roundtrip(space)
    assert got == space and got.dtype == np.int16


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_multi_discrete_roundtrip(dtype: str) -> None:
    """A 2-D MultiDiscrete with a start reads back equal for every integer dtype."""
    start = [[0, 1, 2], [3, 0, 1]] if dtype.startswith("u") else [[0, -1, 2], [3, 0, -4]]
    space = spaces.MultiDiscrete(np.array([[2, 3, 4], [5, 6, 7]]), dtype=dtype, start=start)
    d = space_to_json(space)
    assert d == {
        "type": "MultiDiscrete",
        "nvec": [[2, 3, 4], [5, 6, 7]],
        "start": start,
        "dtype": dtype,
    }
    got = roundtrip(space)
    assert got == space and got.dtype == np.dtype(dtype)


def test_multi_discrete_1d_and_rank0_roundtrip() -> None:
    """A flat MultiDiscrete and a rank-0 one read back equal."""
    for space in (spaces.MultiDiscrete([3, 4, 5]), spaces.MultiDiscrete(np.array(3))):
        assert roundtrip(space) == space


@pytest.mark.parametrize("n", [1, 5, [2, 3], [1, 2, 3]])
def test_multi_binary_roundtrip(n: Any) -> None:
    """A MultiBinary of an int or a shape is written with n as given and reads back equal."""
    space = spaces.MultiBinary(n)
    assert space_to_json(space) == {"type": "MultiBinary", "n": n}
    assert roundtrip(space) == space


@pytest.mark.parametrize(
    "space",
    [
        spaces.Text(5),
        spaces.Text(10, min_length=0, charset="cab"),
        spaces.Text(3, min_length=3, charset='héλ🙂 \n"\\'),
    ],
    ids=["default", "min0", "unicode"],
)
def test_text_roundtrip(space: spaces.Text) -> None:
    """A Text space is written with its sorted characters and reads back equal."""
    d = space_to_json(space)
    assert d is not None and d["charset"] == "".join(sorted(space.character_set))
    assert roundtrip(space) == space


def test_text_json_layout() -> None:
    """A Text space has min_length, max_length and the charset as one string."""
    assert space_to_json(spaces.Text(8, min_length=2, charset="ba")) == {
        "type": "Text",
        "min_length": 2,
        "max_length": 8,
        "charset": "ab",
    }


# --- Tuple and Dict -----------------------------------------------------------------------------


def test_nested_tuple_dict_roundtrip_keeps_key_order() -> None:
    """Nested Tuple/Dict spaces read back equal with the Dict key order preserved."""
    inner = spaces.Dict(
        OrderedDict([("zeta", spaces.Discrete(3)), ("alpha", spaces.Box(-1, 1, (2,), np.float16))])
    )
    space = spaces.Dict(  # (an OrderedDict keeps its order: gymnasium sorts a dict's keys)
        OrderedDict(
            [
                ("obs", make_box("float32", (2, 3))),
                ("aux", spaces.Tuple([inner, spaces.MultiBinary([2, 2]), spaces.Text(4)])),
                ("b", spaces.Tuple([])),
                ("a", spaces.Dict({})),
            ]
        )
    )
    d = space_to_json(space)
    assert d is not None and list(d["spaces"]) == ["obs", "aux", "b", "a"]
    got = roundtrip(space)
    assert got == space
    assert list(got.spaces) == ["obs", "aux", "b", "a"]
    assert list(got["aux"][0].spaces) == ["zeta", "alpha"]
    assert_same_box(got["obs"], space["obs"])


def test_tuple_json_layout() -> None:
    """A Tuple is a list of its spaces' JSON."""
    space = spaces.Tuple([spaces.Discrete(2), spaces.MultiBinary(3)])
    assert space_to_json(space) == {
        "type": "Tuple",
        "spaces": [
            {"type": "Discrete", "n": 2, "start": 0},
            {"type": "MultiBinary", "n": 3},
        ],
    }


def test_nesting_at_the_limit_roundtrips() -> None:
    """Spaces nested exactly MAX_SPACE_DEPTH levels deep are written and read back."""
    space = nested_tuple_space(MAX_SPACE_DEPTH)
    d = space_to_json(space)
    assert d == nested_tuple_json(MAX_SPACE_DEPTH)
    assert roundtrip(space) == space


def test_too_deep_space_is_written_partly_unknown() -> None:
    """A space nested past the limit is written (inner part Unknown) and reads back with its
    known levels, the innermost an UnknownSpace."""
    d = space_to_json(nested_tuple_space(MAX_SPACE_DEPTH + 6))
    json.dumps(d, allow_nan=False)
    inner = d
    for _ in range(MAX_SPACE_DEPTH):
        assert inner is not None and inner["type"] == "Tuple"
        inner = inner["spaces"][0]
    assert inner is not None and inner["type"] == "Unknown"
    back = space_from_json(strict_json(d))
    for _ in range(MAX_SPACE_DEPTH):
        assert isinstance(back, spaces.Tuple)
        back = back.spaces[0]
    assert isinstance(back, UnknownSpace)


# --- Unknown and None ---------------------------------------------------------------------------


def test_none_maps_to_none() -> None:
    """None is written as None and read back as None."""
    assert space_to_json(None) is None
    assert space_from_json(None) is None


@pytest.mark.parametrize(
    "obj",
    [
        spaces.Graph(node_space=spaces.Discrete(3), edge_space=None),
        spaces.Sequence(spaces.Discrete(3)),
        spaces.OneOf([spaces.Discrete(2), spaces.Discrete(3)]),
        object(),
        42,
        "Box",
        {"type": "Box"},
    ],
    ids=["Graph", "Sequence", "OneOf", "object", "int", "str", "dict"],
)
def test_unknown_objects_are_written_as_unknown(obj: object) -> None:
    """Anything outside the seven types is written as Unknown with its repr and read as None."""
    d = space_to_json(obj)
    assert d == {"type": "Unknown", "repr": repr(obj)}
    assert space_from_json(strict_json(d)) is None


def test_unreprable_object_does_not_raise() -> None:
    """An object whose repr raises still gets an Unknown entry."""

    class Nasty:
        def __repr__(self) -> str:
            raise RuntimeError("no repr for you")

    d = space_to_json(Nasty())
    assert d is not None and d["type"] == "Unknown" and "Nasty" in d["repr"]


def test_broken_legacy_lookalike_does_not_raise() -> None:
    """A gym-named class without the expected attributes becomes Unknown, not an error."""
    broken = type("Box", (), {"__module__": "gym.spaces.box"})()
    d = space_to_json(broken)
    assert d is not None and d["type"] == "Unknown"


def test_container_with_unknown_keeps_its_known_parts() -> None:
    """A Tuple or Dict holding an Unknown space reads back with its known parts, the unknown
    one an UnknownSpace that accepts any value and says what it was."""
    graph = spaces.Graph(node_space=spaces.Discrete(3), edge_space=None)
    t = space_from_json(strict_json(space_to_json(spaces.Tuple([spaces.Discrete(2), graph]))))
    assert isinstance(t, spaces.Tuple) and t.spaces[0] == spaces.Discrete(2)
    assert isinstance(t.spaces[1], UnknownSpace) and "Graph" in t.spaces[1].description
    assert t.spaces[1].contains(object())
    with pytest.raises(NotImplementedError, match="cannot sample"):
        t.spaces[1].sample()
    d = space_from_json(
        strict_json(
            space_to_json(spaces.Dict({"a": spaces.Discrete(2), "g": spaces.Tuple([graph])}))
        )
    )
    assert isinstance(d, spaces.Dict) and list(d.spaces) == ["a", "g"]
    assert isinstance(d["g"], spaces.Tuple) and isinstance(d["g"].spaces[0], UnknownSpace)
    assert d == space_from_json(strict_json(space_to_json(d)))  # (UnknownSpace compares equal)


def test_minigrid_observation_space_keeps_its_known_parts() -> None:
    """MiniGrid's Dict of an image, a direction and a custom MissionSpace: the image and the
    direction come back as they were."""
    minigrid = pytest.importorskip("minigrid")
    env = gymnasium.make("MiniGrid-Empty-5x5-v0")
    space = env.observation_space
    back = space_from_json(strict_json(space_to_json(space)))
    assert isinstance(back, spaces.Dict) and list(back.spaces) == list(space.spaces)
    assert back["image"] == space["image"] and back["direction"] == space["direction"]
    assert isinstance(back["mission"], UnknownSpace)
    assert "MissionSpace" in back["mission"].description
    env.close()
    del minigrid


def test_a_large_text_charset_is_written_as_ranges() -> None:
    """A Text space of every code point but the surrogates is a few ranges, not a string of
    a million characters (which UTF-8 could not even hold with the surrogates)."""
    chars = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    space = spaces.Text(4, charset=chars)
    d = space_to_json(space)
    assert d is not None and "charset" not in d
    assert d["charset_ranges"] == [[0, 0xD7FF], [0xE000, 0x10FFFF]]
    assert len(json.dumps(d)) < 200
    assert space_from_json(strict_json(d)) == space
    with_surrogates = spaces.Text(2, charset="ab\ud800")
    d = space_to_json(with_surrogates)
    assert d is not None and d["charset_ranges"] == [[0x61, 0x62], [0xD800, 0xD800]]
    assert space_from_json(strict_json(d)) == with_surrogates


@pytest.mark.parametrize(
    "ranges",
    [[], [[5, 4]], [[0, 3], [2, 5]], [[0, 0x110000]], [[-1, 2]], [[0, True]], "ab", [[1]]],
)
def test_bad_charset_ranges_are_refused(ranges: Any) -> None:
    d = {"type": "Text", "min_length": 0, "max_length": 3, "charset_ranges": ranges}
    with pytest.raises(TraceFormatError, match="charset_ranges"):
        space_from_json(d)


@pytest.mark.parametrize("shape", [[16384, 16384], [2**31, 2**31], [2**62, 2**62, 2**62]])
def test_a_space_too_large_to_rebuild_is_refused(shape: list[int]) -> None:
    """A Box written compactly (scalar bounds) but whose bounds would take gigabytes is
    refused, naming the space, before any array is made."""
    d = {"type": "Box", "shape": shape, "dtype": "float32", "low": 0, "high": 1}
    with pytest.raises(TraceFormatError, match="MiB of memory to rebuild"):
        space_from_json(d, where="observation_space")
    inside = {"type": "Dict", "spaces": {"a": d}}
    with pytest.raises(TraceFormatError, match=r"observation_space.spaces\['a'\]"):
        space_from_json(inside, where="observation_space")


def test_dict_with_non_string_keys_is_unknown() -> None:
    """A Dict space with a non-string key is Unknown rather than silently re-keyed."""
    space = spaces.Dict({1: spaces.Discrete(2)})
    d = space_to_json(space)
    assert d is not None and d["type"] == "Unknown"


def test_subclass_of_gymnasium_space_is_written_as_base_type() -> None:
    """A user subclass of a gymnasium space is written as its §7 base type."""

    class MyBox(spaces.Box):
        pass

    box = MyBox(low=0.0, high=1.0, shape=(2,), dtype=np.float32)
    d = space_to_json(box)
    assert d is not None and d["type"] == "Box"
    assert roundtrip(box) == box


def test_gym_is_not_imported() -> None:
    """Importing the module and writing spaces never imports the legacy gym package."""
    code = (
        "import sys, gymnasium\n"
        "from gym_recording.format.spaces import space_to_json\n"
        "space_to_json(gymnasium.spaces.Discrete(2)); space_to_json(object())\n"
        "assert 'gym' not in sys.modules, 'gym was imported'\n"
    )
    root = str(Path(gym_recording.format.spaces.__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


# --- legacy gym ---------------------------------------------------------------------------------


def legacy_pairs() -> list[tuple[Any, spaces.Space[Any]]]:
    """Pairs of equivalent (legacy gym, gymnasium) spaces."""
    gym = pytest.importorskip("gym")
    gs = gym.spaces
    inf = np.inf
    return [
        (
            gs.Box(-inf, inf, (2, 3), np.float32),
            spaces.Box(-inf, inf, (2, 3), np.float32),
        ),
        (
            gs.Box(np.array([-1.0, -inf]), np.array([inf, 2.5]), dtype=np.float64),
            spaces.Box(np.array([-1.0, -inf]), np.array([inf, 2.5]), dtype=np.float64),
        ),
        (gs.Box(0, 255, (4, 4, 3), np.uint8), spaces.Box(0, 255, (4, 4, 3), np.uint8)),
        (gs.Box(-3, 7, (), np.int64), spaces.Box(-3, 7, (), np.int64)),
        (gs.Discrete(5), spaces.Discrete(5)),
        (gs.Discrete(5, start=-2), spaces.Discrete(5, start=-2)),
        (gs.MultiDiscrete([[2, 3], [4, 5]]), spaces.MultiDiscrete([[2, 3], [4, 5]])),
        (
            gs.MultiDiscrete([2, 3], dtype=np.int32),
            spaces.MultiDiscrete([2, 3], dtype=np.int32),
        ),
        (gs.MultiBinary(4), spaces.MultiBinary(4)),
        (gs.MultiBinary([2, 3]), spaces.MultiBinary([2, 3])),
        (gs.Text(6, min_length=2, charset="xyz"), spaces.Text(6, min_length=2, charset="xyz")),
        (gs.Text(6), spaces.Text(6)),
        (
            gs.Tuple([gs.Discrete(2), gs.Box(0.0, 1.0, (2,), np.float32)]),
            spaces.Tuple([spaces.Discrete(2), spaces.Box(0.0, 1.0, (2,), np.float32)]),
        ),
        (
            gs.Dict({"b": gs.Discrete(2), "a": gs.Tuple([gs.MultiBinary(2)])}),
            spaces.Dict({"b": spaces.Discrete(2), "a": spaces.Tuple([spaces.MultiBinary(2)])}),
        ),
        (
            gs.Dict(OrderedDict([("z", gs.Discrete(2)), ("y", gs.Discrete(3))])),
            spaces.Dict(OrderedDict([("z", spaces.Discrete(2)), ("y", spaces.Discrete(3))])),
        ),
    ]


def test_legacy_gym_spaces_match_gymnasium() -> None:
    """Legacy gym.spaces serialise to the same JSON as their gymnasium counterparts."""
    pairs = legacy_pairs()
    for legacy, modern in pairs:
        d = space_to_json(legacy)
        assert d == space_to_json(modern), type(legacy).__name__
        json.dumps(d, allow_nan=False)
        got = space_from_json(strict_json(d))
        assert got == modern
        if isinstance(modern, spaces.Dict):
            assert list(got.spaces) == list(modern.spaces)


def test_legacy_gym_unknown_space() -> None:
    """A legacy gym space outside the seven types (Graph) is Unknown."""
    gym = pytest.importorskip("gym")
    graph = gym.spaces.Graph(node_space=gym.spaces.Discrete(3), edge_space=None)
    d = space_to_json(graph)
    assert d is not None and d["type"] == "Unknown"


def test_a_box_of_nan_bounds_is_unknown_written_and_read() -> None:
    """Legacy gym allows NaN bounds, which Gymnasium refuses (FORMAT.md §7): the writer
    stores such a Box as Unknown, and a reader reads one (another writer's) as Unknown,
    rather than refusing the recording."""
    gym = pytest.importorskip("gym")
    nan_box = gym.spaces.Box(np.array([0.0, np.nan], np.float32), np.array([1.0, 2.0], np.float32))
    d = space_to_json(nan_box)
    assert d is not None and d["type"] == "Unknown" and "nan" in d["repr"]
    assert space_from_json(strict_json(box(low=["nan", 0.0]))) is None
    got = space_from_json({"type": "Dict", "spaces": {"a": box(high=[1.0, "nan"])}})
    assert isinstance(got, spaces.Dict) and isinstance(got["a"], UnknownSpace)
    assert "NaN bounds" in got["a"].description


def test_legacy_gym_subclass_detected_by_mro() -> None:
    """A user subclass of a legacy gym space is recognised through its MRO."""
    gym = pytest.importorskip("gym")

    class MyDiscrete(gym.spaces.Discrete):
        pass

    assert space_to_json(MyDiscrete(3)) == {"type": "Discrete", "n": 3, "start": 0}


# --- invalid input ------------------------------------------------------------------------------


BOX_OK: dict[str, Any] = {
    "type": "Box",
    "shape": [2],
    "dtype": "float32",
    "low": [0.0, "-inf"],
    "high": [1.0, "inf"],
}


def test_a_space_type_this_reader_does_not_know_reads_as_unknown() -> None:
    """A later minor version may add a space type (§7): it read as a damaged file, and
    ``rec.observation_space`` raised; it is ``Unknown``, and the known parts are kept."""
    assert space_from_json({"type": "Graph", "node_space": {}}) is None
    d = {
        "type": "Dict",
        "spaces": {"g": {"type": "Graph"}, "n": {"type": "Discrete", "n": 3, "start": 0}},
    }
    back = space_from_json(d)
    assert isinstance(back, spaces.Dict) and back["n"] == spaces.Discrete(3)
    assert isinstance(back["g"], UnknownSpace) and "Graph" in back["g"].description


def box(**changes: Any) -> dict[str, Any]:
    """BOX_OK with some keys replaced (a value of ... removes the key)."""
    d = {**BOX_OK, **changes}
    return {k: v for k, v in d.items() if v is not ...}


INVALID: list[tuple[str, Any, str]] = [
    # (id, input, a fragment the message must contain)
    ("list", [1, 2], "got list"),
    ("str", "Box", "got str"),
    ("int", 3, "got int"),
    ("no-type", {"n": 3}, "missing key 'type'"),
    ("type-not-str", {"type": 3}, "space.type: expected a string, got int"),
    ("box-no-low", box(low=...), "missing key 'low'"),
    ("box-no-shape", box(shape=...), "missing key 'shape'"),
    ("box-shape-str", box(shape="2"), "space.shape: expected a list"),
    ("box-shape-neg", box(shape=[-2], low=[], high=[]), "non-negative"),
    ("box-shape-float", box(shape=[2.0]), "non-negative integers"),
    ("box-shape-bool", box(shape=[True, True]), "non-negative integers"),
    ("box-dtype-complex", box(dtype="complex64"), "space.dtype: expected one of"),
    ("box-dtype-int", box(dtype=5), "space.dtype: expected a dtype name"),
    ("box-dtype-bogus", box(dtype="float33"), "'float33'"),
    ("box-low-short", box(low=[0.0]), "space.low: expected a list of 2 items"),
    ("box-low-scalar-bad", box(low="x"), "space.low: expected a number"),
    ("box-low-deep", box(low=[[0.0], [1.0]]), "space.low[0]: expected a number"),
    ("box-low-bad-str", box(low=[0.0, "Infinity"]), "space.low[1]"),
    ("box-low-bool", box(low=[0.0, False]), "space.low[1]: expected a number"),
    ("box-low-null", box(low=[None, 0.0]), "got NoneType"),
    ("box-low-gt-high", box(low=[2.0, 0.0]), "Gymnasium refuses"),
    ("box-f16-range", box(dtype="float16", low=[0.0, 1e6]), "float16 range"),
    (
        "box-int8-range",
        box(dtype="int8", low=[0, -129], high=[1, 1]),
        "space.low[1]: expected an integer in [-128, 127]",
    ),
    ("box-int-float", box(dtype="int32", low=[0, 0.5], high=[1, 1]), "expected an integer"),
    ("box-int-inf", box(dtype="int64", low=[0, "-inf"], high=[1, 1]), "expected an integer"),
    ("box-uint-neg", box(dtype="uint64", low=[0, -1], high=[1, 1]), "expected an integer"),
    ("box-bool-int", box(dtype="bool", low=[0, 0], high=[1, 1]), "expected true or false"),
    ("discrete-no-n", {"type": "Discrete", "start": 0}, "missing key 'n'"),
    ("discrete-no-start", {"type": "Discrete", "n": 3}, "missing key 'start'"),
    ("discrete-n0", {"type": "Discrete", "n": 0, "start": 0}, "space.n: expected an integer >= 1"),
    ("discrete-n-str", {"type": "Discrete", "n": "3", "start": 0}, "got str '3'"),
    ("discrete-n-bool", {"type": "Discrete", "n": True, "start": 0}, "got bool"),
    ("discrete-start-float", {"type": "Discrete", "n": 3, "start": 0.5}, "space.start"),
    (
        "discrete-dtype",
        {"type": "Discrete", "n": 3, "start": 0, "dtype": "float32"},
        "space.dtype: expected one of int8",
    ),
    (
        "md-ragged",
        {"type": "MultiDiscrete", "nvec": [[2, 3], [4]], "start": [[0, 0], [0]], "dtype": "int64"},
        "space.nvec[1]: expected a list of 2 items",
    ),
    (
        "md-zero",
        {"type": "MultiDiscrete", "nvec": [2, 0], "start": [0, 0], "dtype": "int64"},
        "space.nvec: expected positive integers",
    ),
    (
        "md-start-shape",
        {"type": "MultiDiscrete", "nvec": [2, 3], "start": [0], "dtype": "int64"},
        "space.start: expected a list of 2 items",
    ),
    (
        "md-no-start",
        {"type": "MultiDiscrete", "nvec": [2, 3], "dtype": "int64"},
        "missing key 'start'",
    ),
    (
        "md-dtype",
        {"type": "MultiDiscrete", "nvec": [2, 3], "start": [0, 0], "dtype": "float64"},
        "space.dtype",
    ),
    ("mb-zero", {"type": "MultiBinary", "n": 0}, "space.n: expected a positive integer"),
    ("mb-list-str", {"type": "MultiBinary", "n": [2, "x"]}, "space.n"),
    ("mb-float", {"type": "MultiBinary", "n": 2.0}, "got float"),
    ("mb-missing", {"type": "MultiBinary"}, "missing key 'n'"),
    (
        "text-min-gt-max",
        {"type": "Text", "min_length": 5, "max_length": 3, "charset": "ab"},
        "space.max_length: expected an integer >= 5",
    ),
    (
        "text-charset-list",
        {"type": "Text", "min_length": 1, "max_length": 3, "charset": ["a", "b"]},
        "space.charset: expected a string",
    ),
    ("tuple-not-list", {"type": "Tuple", "spaces": {"a": 1}}, "space.spaces: expected a list"),
    (
        "tuple-bad-child",
        {"type": "Tuple", "spaces": [{"type": "Discrete", "n": 2, "start": 0}, 7]},
        "space.spaces[1]: expected a space object",
    ),
    ("dict-not-dict", {"type": "Dict", "spaces": []}, "space.spaces: expected an object"),
    (
        "dict-bad-child",
        {"type": "Dict", "spaces": {"pos": box(low=[0.0, "x"])}},
        "space.spaces['pos'].low[1]",
    ),
    ("dict-int-key", {"type": "Dict", "spaces": {1: {"type": "Unknown", "repr": ""}}}, "keys"),
    ("unknown-no-repr", {"type": "Unknown"}, "missing key 'repr'"),
    ("unknown-repr-int", {"type": "Unknown", "repr": 5}, "space.repr: expected a string"),
]


@pytest.mark.parametrize(("d", "fragment"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_json_raises_trace_format_error(d: Any, fragment: str) -> None:
    """Malformed space JSON raises TraceFormatError saying what was expected and what arrived."""
    with pytest.raises(TraceFormatError) as info:
        space_from_json(d)
    assert fragment in str(info.value)


def test_error_names_the_caller_location() -> None:
    """The where argument prefixes the path in the error message."""
    with pytest.raises(TraceFormatError, match=r"^observation_space\.low\[1\]: expected"):
        space_from_json(box(low=[0.0, "x"]), where="observation_space")


def test_unknown_keys_are_ignored() -> None:
    """Keys a space type does not define are ignored (forward compatibility)."""
    got = space_from_json({"type": "Discrete", "n": 3, "start": 0, "future": [1, 2]})
    assert got == spaces.Discrete(3)


def test_nesting_one_past_the_limit_is_refused() -> None:
    """Spaces nested one level deeper than MAX_SPACE_DEPTH are refused."""
    with pytest.raises(TraceFormatError, match="nested deeper than 64"):
        space_from_json(nested_tuple_json(MAX_SPACE_DEPTH + 1))


def test_very_deep_nesting_is_refused_without_recursion_error() -> None:
    """A hugely deep Tuple/Dict chain raises TraceFormatError, never RecursionError."""
    d: dict[str, Any] = {"type": "Unknown", "repr": "x"}
    for i in range(100_000):
        d = {"type": "Tuple", "spaces": [d]} if i % 2 else {"type": "Dict", "spaces": {"k": d}}
    with pytest.raises(TraceFormatError, match="nested deeper"):
        space_from_json(d)


def test_deep_nested_bounds_are_refused() -> None:
    """Box bounds nested deeper than the shape, or a too-long shape, are refused cleanly."""
    deep: Any = 0.0
    for _ in range(10_000):
        deep = [deep]
    with pytest.raises(TraceFormatError):
        space_from_json(box(low=deep))
    with pytest.raises(TraceFormatError, match="at most 32"):
        space_from_json(box(shape=[1] * 65))
    with pytest.raises(TraceFormatError, match="deeper than 32"):
        space_from_json({"type": "MultiDiscrete", "nvec": deep, "start": deep, "dtype": "int64"})
