"""gym_recording.tools.export on every kind of space: each export read back by its target library.

Parquet through pyarrow, npz through numpy, Minari through ``minari.load_dataset``, and
``import_minari`` back into a recording, with values, dtypes and shapes compared exactly.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import tracemalloc
import warnings
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
from conftest import ACTION_SPACES, OBSERVATION_SPACES, SpaceEnv, run_episodes

import gym_recording
from gym_recording import RecordingError
from gym_recording.tools.export import (
    ExportError,
    LossyExportWarning,
    OutputExistsError,
    export,
    import_minari,
)
from gym_recording.wrappers import TraceRecordingWrapper

SPACES = sorted(OBSERVATION_SPACES)


def record_space(directory: Path, obs: str, act: str = "discrete", episodes: int = 3) -> Path:
    env = SpaceEnv(OBSERVATION_SPACES[obs], ACTION_SPACES[act], min_len=1, max_len=5)
    with TraceRecordingWrapper(env, directory) as w:
        run_episodes(w, episodes, seed=10)
    return directory


def leaves(f: Any, name: str) -> dict[str, Any]:
    if isinstance(f, dict):
        return {k: v for key, x in f.items() for k, v in leaves(x, f"{name}.{key}").items()}
    if isinstance(f, tuple):
        return {k: v for i, x in enumerate(f) for k, v in leaves(x, f"{name}.{i}").items()}
    return {name: f}


def cut(f: Any, start: int, stop: int | None) -> Any:
    if isinstance(f, dict):
        return {k: cut(v, start, stop) for k, v in f.items()}
    if isinstance(f, tuple):
        return tuple(cut(v, start, stop) for v in f)
    return f[start:stop]


def joined(episodes: list[Any], field: str, start: int = 0, stop: int | None = None) -> dict:
    """The leaves of a field, concatenated over episodes (lists for non-array leaves)."""
    out: dict[str, Any] = {}
    for ep in episodes:
        f = getattr(ep, field)
        if field == "observations":
            f = cut(f, start, ep.length if stop == -1 else stop)
        for k, v in leaves(f, "x").items():
            out.setdefault(k, []).append(v)
    return {
        k: np.concatenate(v) if isinstance(v[0], np.ndarray) else [x for p in v for x in p]
        for k, v in out.items()
    }


def assert_same(got: Any, want: Any, where: str) -> None:
    if isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want), where
        for k in want:
            assert_same(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_same(g, w, f"{where}.{i}")
    elif isinstance(want, np.ndarray):
        got = np.asarray(got)
        assert got.dtype == want.dtype, f"{where}: {got.dtype} != {want.dtype}"
        assert got.shape == want.shape, f"{where}: {got.shape} != {want.shape}"
        np.testing.assert_array_equal(got, want, err_msg=where)
    else:
        assert list(got) == list(want), where


# --------------------------------------------------------------------------------------------
# Parquet
# --------------------------------------------------------------------------------------------


def arrow_leaves(pa: Any, arr: Any, name: str, shapes: dict[str, Any]) -> dict[str, Any]:
    if pa.types.is_struct(arr.type):
        out: dict[str, Any] = {}
        for i in range(arr.type.num_fields):
            sub = arr.type.field(i).name
            out.update(arrow_leaves(pa, arr.field(i), f"{name}.{sub}", shapes))
        return out
    shape = shapes[name]
    if shape == "json":
        return {name: [json.loads(x) for x in arr.to_pylist()]}
    if shape == "value":
        return {name: arr.to_pylist()}
    if pa.types.is_fixed_size_list(arr.type):
        values = arr.flatten().to_numpy(zero_copy_only=False)
        return {name: values.reshape(len(arr), *shape)}
    return {name: arr.to_numpy(zero_copy_only=False)}


@pytest.mark.parametrize("space", SPACES)
def test_parquet_every_observation_space(tmp_path: Path, space: str) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    d = record_space(tmp_path / "rec", space)
    out = export(d, to="parquet", out=tmp_path / "x.parquet")
    table = pq.read_table(out)
    shapes = json.loads(table.schema.metadata[b"gym_recording"])["shapes"]
    eps = list(gym_recording.load(d))
    assert table.num_rows == sum(ep.length for ep in eps)
    for column, start, stop in (("obs", 0, -1), ("next_obs", 1, None)):
        got = arrow_leaves(pa, table.column(column).combine_chunks(), column, shapes)
        want = joined(eps, "observations", start, stop)
        assert [k.partition(".")[2] for k in got] == [k.partition(".")[2] for k in want]
        for (gk, g), w in zip(got.items(), want.values(), strict=True):
            assert_same(g, w, gk)
    np.testing.assert_array_equal(
        table.column("reward").to_numpy(), np.concatenate([ep.rewards for ep in eps])
    )


@pytest.mark.parametrize("action", sorted(ACTION_SPACES))
def test_parquet_every_action_space(tmp_path: Path, action: str) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    d = record_space(tmp_path / "rec", "box_rank1_f32", action)
    table = pq.read_table(export(d, to="parquet", out=tmp_path / "x.parquet"))
    shapes = json.loads(table.schema.metadata[b"gym_recording"])["shapes"]
    eps = list(gym_recording.load(d))
    got = arrow_leaves(pa, table.column("action").combine_chunks(), "action", shapes)
    want = joined(eps, "actions")
    for g, w in zip(got.values(), want.values(), strict=True):
        assert_same(g, w, action)


def test_parquet_skips_zero_step_episodes(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    with gym_recording.TraceRecording(tmp_path / "r") as w:
        w.add_reset(np.zeros(2, np.float32))  # zero steps
        w.add_reset(np.zeros(2, np.float32))
        w.add_step(1, np.ones(2, np.float32), 2.0, terminated=True)
    table = pq.read_table(export(tmp_path / "r", to="parquet", out=tmp_path / "x.parquet"))
    assert table.column("episode").to_pylist() == [1]
    assert table.column("terminated").to_pylist() == [True]


def test_parquet_and_npz_carry_seeds_and_name_what_they_leave_out(tmp_path: Path) -> None:
    """Each row of parquet has its episode's seed (null for none). Neither format holds
    reset options or infos: a LossyExportWarning names each, with how many episodes."""
    pq = pytest.importorskip("pyarrow.parquet")
    with gym_recording.TraceRecording(tmp_path / "r", record_infos=True) as w:
        w.add_reset(np.zeros(2), seed=7, options={"level": 3}, info={"lives": 3})
        w.add_step(0, np.ones(2), 1.0, info={"lives": 2})
        w.add_step(1, np.ones(2), 1.0, info={"lives": 2}, terminated=True)
        w.add_reset(np.zeros(2), info={})
        w.add_step(0, np.ones(2), 1.0, info={}, truncated=True)
    with pytest.warns(LossyExportWarning) as caught:
        table = pq.read_table(export(tmp_path / "r", to="parquet", out=tmp_path / "x.parquet"))
    assert table.column("seed").to_pylist() == [7, 7, None]
    (said,) = [str(c.message) for c in caught]
    assert said == (
        "parquet leaves out the infos of 1 episode and the reset options of 1 episode "
        "(`export --to minari` keeps what Minari can)"
    )
    with pytest.warns(LossyExportWarning, match="npz leaves out the infos of 1 episode and"):
        data = np.load(export(tmp_path / "r", to="npz", out=tmp_path / "x.npz"))
    assert data["seeds"].tolist() == [7, -1]
    with gym_recording.TraceRecording(tmp_path / "plain") as w:  # (nothing left out: silent)
        w.add_reset(np.zeros(2), seed=1)
        w.add_step(0, np.ones(2), 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LossyExportWarning)
        export(tmp_path / "plain", to="npz", out=tmp_path / "p.npz")
        export(tmp_path / "plain", to="parquet", out=tmp_path / "p.parquet")


def test_exports_take_odd_infos_seeds_and_options(tmp_path: Path) -> None:
    """An info that is an array, not a dict; a seed past int64 (Gymnasium takes any int of 0
    or more: it is left out, and said); options ``{}`` (nothing left out)."""
    pytest.importorskip("pyarrow")
    with gym_recording.TraceRecording(tmp_path / "r", record_infos=True) as w:
        w.add_reset(np.zeros(2), seed=2**70, options={}, info={})
        w.add_step(0, np.ones(2), 1.0, info=np.array([1.0, 2.0]))
    for to in ("npz", "parquet"):
        with pytest.warns(LossyExportWarning) as caught:
            export(tmp_path / "r", to=to, out=tmp_path / f"x.{to}")
        (said,) = [str(c.message) for c in caught]
        assert said == (
            f"{to} leaves out the infos of 1 episode and the seeds of 1 episode "
            "(`export --to minari` keeps what Minari can)"
        )
    assert np.load(tmp_path / "x.npz")["seeds"].tolist() == [-1]


@pytest.mark.parametrize("options", [np.array([1.5, 2.0]), np.array(["a", "b"]), np.array([7])])
def test_exports_name_array_options_they_leave_out(tmp_path: Path, options: Any) -> None:
    """Reset options that are an array (the writer takes any value) are left out and said."""
    pytest.importorskip("pyarrow")
    with gym_recording.TraceRecording(tmp_path / "r") as w:
        w.add_reset(np.zeros(2), options=options)
        w.add_step(0, np.ones(2), 1.0, terminated=True)
    for to in ("npz", "parquet"):
        with pytest.warns(LossyExportWarning) as caught:
            export(tmp_path / "r", to=to, out=tmp_path / f"x.{to}")
        (said,) = [str(c.message) for c in caught]
        assert (
            said == f"{to} leaves out the reset options of 1 episode "
            "(`export --to minari` keeps what Minari can)"
        )


def test_parquet_of_an_empty_recording(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    gym_recording.TraceRecording(tmp_path / "r").close()
    table = pq.read_table(export(tmp_path / "r", to="parquet", out=tmp_path / "x.parquet"))
    assert table.num_rows == 0 and "reward" in table.column_names


def test_parquet_many_row_groups_read_by_pandas(tmp_path: Path, monkeypatch: Any) -> None:
    pd = pytest.importorskip("pandas")
    pq = pytest.importorskip("pyarrow.parquet")
    from gym_recording.tools import export as _export

    monkeypatch.setattr(_export, "_ROW_GROUP_ROWS", 10)
    d = record_space(tmp_path / "rec", "box_rank1_f32", episodes=12)
    out = export(d, to="parquet", out=tmp_path / "x.parquet")
    assert pq.ParquetFile(out).num_row_groups > 1
    df = pd.read_parquet(out)
    eps = list(gym_recording.load(d))
    assert df["episode"].tolist() == [ep.index for ep in eps for _ in range(ep.length)]
    assert df["step"].tolist() == [t for ep in eps for t in range(ep.length)]


# --------------------------------------------------------------------------------------------
# npz
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("space", SPACES)
def test_npz_every_observation_space(tmp_path: Path, space: str) -> None:
    d = record_space(tmp_path / "rec", space, "dict")
    out = export(d, to="npz", out=tmp_path / "x.data")
    assert out == str(tmp_path / "x.data")  # no suffix added
    data = np.load(out)  # allow_pickle=False: no object arrays
    eps = list(gym_recording.load(d))
    for prefix, field in (("observations", "observations"), ("actions", "actions")):
        for key, want in joined(eps, field).items():
            name = prefix + key[1:]
            got = data[name]
            if isinstance(want, list):  # text: JSON strings
                assert [json.loads(s) for s in got] == want
            else:
                assert_same(got, want, name)
    np.testing.assert_array_equal(data["rewards"], np.concatenate([ep.rewards for ep in eps]))
    assert data["episode_lengths"].tolist() == [ep.length for ep in eps]
    assert data["seeds"].tolist() == [10, 11, 12]
    meta = json.loads(str(data["metadata"]))
    assert (
        meta["observation_space"]["type"]
        == gym_recording.load(d).writers[0].observation_space["type"]
    )


def test_npz_holds_about_one_episode_in_memory_not_the_recording(tmp_path: Path) -> None:
    """The npz export writes each array's rows as the episodes come (through a temporary
    file beside it), not every episode's arrays and then their concatenation: that took twice
    a recording's raw size (3.98 GB for 2.0 GB of zstd-compressed Pong frames). Counted by
    tracemalloc, which sees NumPy's buffers; the npz equals the episodes."""
    src = tmp_path / "z"
    frame = np.zeros((64, 64, 3), np.uint8)
    with gym_recording.TraceRecording(src, compression="zstd", batch_bytes=1) as rec:
        for e in range(24):  # (a batch each: 258 KB raw; the reader caches a few)
            rec.add_reset(frame, seed=e)
            for t in range(20):
                frame[t % 64] = t + e
                rec.add_step(t % 3, frame, 0.5, terminated=t == 19)
    raw = 24 * 21 * frame.nbytes
    tracemalloc.start()
    try:
        export(src, to="npz", out=tmp_path / "x.npz")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < raw / 2, f"{peak} bytes at the peak, exporting {raw} bytes of observations"
    with np.load(tmp_path / "x.npz") as z, gym_recording.load(src) as r:
        for key, field in (("observations", "observations"), ("actions", "actions")):
            np.testing.assert_array_equal(z[key], np.concatenate([getattr(e, field) for e in r]))
        assert z["observations"].dtype == np.uint8 and z["seeds"].tolist() == list(range(24))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.npz", "z"]  # (no file left)


def test_npz_seeds_and_empty(tmp_path: Path) -> None:
    with gym_recording.TraceRecording(tmp_path / "r") as w:
        w.add_reset(np.zeros(2))
        w.add_step(0, np.ones(2), 1.0)
        w.add_reset(np.zeros(2), seed=4)
    data = np.load(export(tmp_path / "r", to="npz", out=tmp_path / "x.npz"))
    assert data["seeds"].tolist() == [-1, 4]
    assert data["episode_lengths"].tolist() == [1, 0]
    assert data["observation_starts"].tolist() == [0, 2]
    assert data["observations"].shape == (3, 2)
    gym_recording.TraceRecording(tmp_path / "e").close()
    empty = np.load(export(tmp_path / "e", to="npz", out=tmp_path / "e.npz"))
    assert empty["episode_lengths"].shape == (0,) and empty["rewards"].shape == (0,)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc, which takes no file")
@pytest.mark.parametrize("to", ["npz", "parquet"])
def test_an_output_that_cannot_be_written_is_named(tmp_path: Path, to: str) -> None:
    """An export to a place that takes no file names the output, not its temporary file."""
    if to == "parquet":
        pytest.importorskip("pyarrow")
    with gym_recording.TraceRecording(tmp_path / "r") as w:
        w.add_reset(np.zeros(2))
    with pytest.raises(RecordingError, match=r"cannot write /proc/x\.\w+: ") as caught:
        export(tmp_path / "r", to=to, out=f"/proc/x.{to}")
    assert ".gymrec-tmp" not in str(caught.value)


# --------------------------------------------------------------------------------------------
# Minari
# --------------------------------------------------------------------------------------------


@pytest.fixture
def minari_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    minari = pytest.importorskip("minari")
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "datasets"))
    return minari


@pytest.mark.parametrize("space", SPACES)
def test_minari_every_observation_space(tmp_path: Path, minari_path: Any, space: str) -> None:
    d = record_space(tmp_path / "rec", space, "box_f32")
    dataset_id = f"tests/{space.replace('_', '-')}-v0"
    where = export(d, to="minari", out=dataset_id)
    assert where == os.path.join(tmp_path / "datasets", dataset_id)
    dataset = minari_path.load_dataset(dataset_id)
    eps = list(gym_recording.load(d))
    assert dataset.total_episodes == len(eps)
    for ep, got in zip(eps, dataset.iterate_episodes(), strict=True):
        assert_same(got.observations, ep.observations, f"{space} observations")
        assert_same(got.actions, ep.actions, "actions")
        np.testing.assert_array_equal(got.rewards, ep.rewards)
        assert bool(got.terminations[-1]) is ep.terminated
        assert bool(got.truncations[-1]) is ep.truncated

    # ... and back: import_minari gives the same episodes.
    back = import_minari(dataset_id, tmp_path / "back")
    again = list(gym_recording.load(back))
    for ep, other in zip(eps, again, strict=True):
        assert_same(other.observations, ep.observations, f"{space} re-imported observations")
        assert_same(other.actions, ep.actions, "re-imported actions")
        np.testing.assert_array_equal(other.rewards, ep.rewards)
        assert (other.terminated, other.truncated, other.seed) == (
            ep.terminated,
            ep.truncated,
            ep.seed,
        )


def test_minari_round_trip_tells_infos_of_no_keys_from_none(
    tmp_path: Path, minari_path: Any
) -> None:
    """Minari holds infos of no keys ({}, CartPole's) as no infos; the export says infos were
    recorded, so that they come back as {} (and a recording without infos, without)."""
    for record_infos in (True, False):
        d = tmp_path / f"r{record_infos}"
        with TraceRecordingWrapper(
            gymnasium.make("CartPole-v1"), d, record_infos=record_infos
        ) as w:
            w.reset(seed=1)
            for _ in range(3):
                w.step(0)
        export(d, to="minari", out=f"tests/infos-{record_infos}-v0")
        back = import_minari(f"tests/infos-{record_infos}-v0", tmp_path / f"back{record_infos}")
        (want,), (got,) = gym_recording.load(d), gym_recording.load(back)
        assert got.infos == want.infos == ([{}] * 4 if record_infos else None)


def _typed(value: Any) -> Any:
    """``value`` with the type of each part spelled out, to compare types as well."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_typed(v) for v in value])
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, value.tobytes())
    return (type(value).__name__, getattr(value, "dtype", None), repr(value))


@pytest.mark.parametrize("storage", ["arrow", "hdf5"])
def test_minari_round_trip_keeps_the_types_of_infos_and_options(
    tmp_path: Path, minari_path: Any, storage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Numpy scalars of every dtype, Python numbers among them, strings, nested dicts, 0-d
    arrays and array options come back of their recorded types (Minari gives int64/float64
    columns and JSON lists; HDF5 bytes and arrays); an info whose values change type between
    steps is stored as one, and said."""
    if storage == "hdf5":  # (chosen where pyarrow is missing)
        find_spec = importlib.util.find_spec
        monkeypatch.setattr(
            importlib.util, "find_spec", lambda n, *a: None if n == "pyarrow" else find_spec(n, *a)
        )
    info = {
        "f32": np.float32(0.1),
        "u8": np.uint8(3),
        "i": 5,
        "x": 1.5,
        "ok": True,
        "name": "a",
        "nested": {"f64": np.float64(2.5), "i16": np.int16(-7)},
        "zero_d": np.array(1.25, np.float32),
        "vec": np.arange(3, dtype=np.int32),
    }
    options = {
        "arr": np.arange(2, dtype=np.int32),
        "pair": (1, np.float32(0.5)),
        "n": 4,
        "grid": [[1, 2], [3, 4]],
        "pairs": ((1, 2), (3, 4)),
        "e": [],
    }
    d = tmp_path / "r"
    with gym_recording.TraceRecording(d, record_infos=True) as w:
        w.add_reset(np.zeros(2, np.float32), seed=1, options=options, info={**info, "m": 1})
        for t in range(3):
            step_info = {**info, "f32": np.float32(t + 0.1), "i": t, "m": 1.5}
            w.add_step(0, np.ones(2, np.float32), 1.0, info=step_info, terminated=t == 2)
        w.add_reset(np.zeros(2, np.float32), info={**info, "m": 2})
        w.add_step(0, np.ones(2, np.float32), 1.0, info={**info, "m": 2.5}, truncated=True)
    with pytest.warns(LossyExportWarning) as caught:
        path = export(d, to="minari", out="tests/typed-v0")
    assert os.path.exists(os.path.join(path, "data", "main_data.hdf5")) == (storage == "hdf5")
    (said,) = [str(c.message) for c in caught]
    assert said.endswith("the types of info 'm', which change between steps (in 2 episodes)")
    back = import_minari("tests/typed-v0", tmp_path / "back")
    for want, got in zip(gym_recording.load(d), gym_recording.load(back), strict=True):
        assert [float(i.pop("m")) for i in got.infos] == [float(i.pop("m")) for i in want.infos]
        assert _typed(got.infos) == _typed(want.infos)
        assert _typed(got.options) == _typed(want.options)


@pytest.mark.parametrize("second", [None, {"a": np.arange(2.0)}, {"a": np.arange(3)}, {"b": 1}])
def test_minari_infos_of_two_layouts_are_left_out_in_arrow(
    tmp_path: Path, minari_path: Any, second: Any
) -> None:
    """Minari's arrow storage holds one layout of infos: a recording whose episodes' infos
    differ (keys, an array's shape or type, none at all) exports with no infos, said, and
    Minari reads the dataset back (it could not: it filled missing infos with NaN arrays it
    then failed to shape, or refused to merge the types)."""
    pytest.importorskip("pyarrow")
    d = tmp_path / "r"
    with gym_recording.TraceRecording(d, record_infos=True) as w:
        w.add_reset(np.zeros(2), info={"a": np.arange(3.0)})
        w.add_step(0, np.ones(2), 1.0, info={"a": np.arange(3.0)}, terminated=True)
        w.add_reset(np.zeros(2), info=second)
        w.add_step(0, np.ones(2), 1.0, info={**(second or {}), "c": 1}, terminated=True)
    with pytest.warns(LossyExportWarning, match="the infos .their keys or types differ") as w:
        export(d, to="minari", out="tests/layouts-v0")
    assert "info keys missing" not in str(w[0].message)  # (all are left out: said once)
    dataset = minari_path.load_dataset("tests/layouts-v0")
    assert [len(ep.rewards) for ep in dataset.iterate_episodes()] == [1, 1]
    back = gym_recording.load(import_minari("tests/layouts-v0", tmp_path / "back"))
    assert [ep.infos for ep in back] == [None, None]


def test_minari_hdf5_leaves_out_options_it_cannot_hold(
    tmp_path: Path, minari_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without pyarrow (HDF5 storage), options holding None, a list of dicts or an int past
    int64 are left out, said, and the export goes on (it failed, whole)."""
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "pyarrow" else find_spec(n, *a)
    )
    d = tmp_path / "r"
    with gym_recording.TraceRecording(d) as w:
        for options in ({"x": None}, {"l": [{"a": 1}]}, {"big": 2**70}, {"ok": [1, 2]}):
            w.add_reset(np.zeros(2), options=options)
            w.add_step(0, np.ones(2), 1.0, terminated=True)
    with pytest.warns(LossyExportWarning, match=r"reset options HDF5 cannot hold .* \(in 3"):
        export(d, to="minari", out="tests/h5opts-v0")
    back = gym_recording.load(import_minari("tests/h5opts-v0", tmp_path / "back"))
    assert [ep.options for ep in back] == [None, None, None, {"ok": [1, 2]}]


def test_minari_hdf5_says_which_empty_dicts_of_options_it_leaves_out(
    tmp_path: Path, minari_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Minari's HDF5 storage keeps no empty dict in reset options (one attribute per leaf):
    the dataset holds what Minari's own DataCollector stores for the same options, and the
    warning names each empty dict left out (they went silently)."""
    from minari import DataCollector

    all_options = [{"a": {}, "b": 1, "c": {"d": {}, "e": 2}}, {}, {"f": {"g": {}}}, {"h": 3}]
    env = DataCollector(gymnasium.make("CartPole-v1"), data_format="hdf5")
    d = tmp_path / "r"
    with gym_recording.TraceRecording(d) as w:
        for seed, options in enumerate(all_options):
            env.reset(seed=seed, options=options)
            env.step(0)
            w.add_reset(np.zeros(2), seed=seed, options=options)
            w.add_step(0, np.ones(2), 1.0, terminated=True)
    collected = env.create_dataset(dataset_id="tests/collected-v0")
    env.close()
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "pyarrow" else find_spec(n, *a)
    )
    with pytest.warns(LossyExportWarning) as caught:
        path = export(d, to="minari", out="tests/empty-v0")
    assert os.path.exists(os.path.join(path, "data", "main_data.hdf5"))
    (said,) = [str(c.message) for c in caught]
    assert "(options['a'], options['c']['d'])" in said, said
    assert "(options)" in said and "(options['f']['g'])" in said, said

    def options(dataset: Any) -> list[Any]:
        meta = dataset.storage.get_episode_metadata(range(len(all_options)))
        return [m.get("options") for m in meta]

    exported = options(minari_path.load_dataset("tests/empty-v0"))
    assert _typed(exported) == _typed(options(collected))
    assert exported == [{"b": 1, "c": {"e": 2}}, None, None, {"h": 3}]
    back = gym_recording.load(import_minari("tests/empty-v0", tmp_path / "back"))
    assert [ep.options for ep in back] == [{"b": 1, "c": {"e": 2}}, None, None, {"h": 3}]


def test_minari_infos_of_a_zero_step_episode_left_out_do_not_count(
    tmp_path: Path, minari_path: Any
) -> None:
    """A zero-step episode that arrow storage leaves out (array actions) does not take the
    other episodes' infos with it, though its reset info alone has another layout."""
    pytest.importorskip("pyarrow")
    d = tmp_path / "r"
    with gym_recording.TraceRecording(d, record_infos=True) as w:
        for k in range(3):
            w.add_reset(np.zeros(2), info={"score": 0})
            if k != 1:
                w.add_step(np.zeros(2), np.ones(2), 1.0, info={"score": 0.5}, terminated=True)
    with pytest.warns(LossyExportWarning) as caught:
        export(d, to="minari", out="tests/zero-v0")
    (said,) = [str(c.message) for c in caught]
    assert "zero-step episodes" in said and "the infos" not in said
    back = gym_recording.load(import_minari("tests/zero-v0", tmp_path / "back"))
    assert [[i["score"] for i in ep.infos] for ep in back] == [[0, 0.5]] * 2


def test_import_minari_takes_type_notes_it_cannot_read_as_none(
    tmp_path: Path, minari_path: Any
) -> None:
    """Type notes edited elsewhere (not JSON, nested past the parser, not fitting the value)
    leave the values as Minari gives them."""
    d = tmp_path / "r"
    with gym_recording.TraceRecording(d, record_infos=True) as w:
        w.add_reset(np.zeros(2), options={"pair": (1, 2)}, info={"f": np.float32(1)})
        w.add_step(0, np.ones(2), 1.0, info={"f": np.float32(2)}, terminated=True)
    export(d, to="minari", out="tests/notes-v0")
    dataset = minari_path.load_dataset("tests/notes-v0")
    for k, note in enumerate(["[" * 100_000, "not json", '{"infos": {"dict": {"f": 3}}}']):
        dataset.storage.update_episode_metadata([{"gym_recording_kinds": note}], [0])
        (ep,) = gym_recording.load(import_minari("tests/notes-v0", tmp_path / f"back{k}"))
        assert [float(i["f"]) for i in ep.infos] == [1.0, 2.0]


class _ProcessSpace(gymnasium.spaces.Space[Any]):
    """A space the format cannot describe, whose repr differs between processes (as
    MiniGrid's mission space, which shows a function's address)."""

    def __repr__(self) -> str:
        return f"ProcessSpace(at {id(self):#x})"


def test_minari_export_of_two_runs_whose_unknown_spaces_print_differently(
    tmp_path: Path, minari_path: Any
) -> None:
    """Writers of one env are one env, though an Unknown space's repr differs between them."""
    for run in range(2):
        space = _ProcessSpace((2,), np.float32)
        rec = gym_recording.TraceRecording(
            tmp_path / "r", env_id="Mine-v0", observation_space=space, action_space=space
        )
        with rec:
            rec.add_reset(np.zeros(2, np.float32))
            rec.add_step(np.ones(2, np.float32), np.ones(2, np.float32), float(run))
    writers = gym_recording.load(tmp_path / "r").writers
    assert writers[0].observation_space != writers[1].observation_space  # (the reprs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LossyExportWarning)
        export(tmp_path / "r", to="minari", out="tests/two-runs-v0")
    assert minari_path.load_dataset("tests/two-runs-v0").total_episodes == 2


def test_minari_images_are_lossless(tmp_path: Path, minari_path: Any) -> None:
    space = gymnasium.spaces.Box(0, 255, (32, 32, 3), np.uint8)  # Minari's "image" size
    env = SpaceEnv(space, min_len=3, max_len=3)
    with TraceRecordingWrapper(env, tmp_path / "r") as w:
        run_episodes(w, 2)
    lossless = (
        "jpeg_encoding" in inspect.signature(minari_path.create_dataset_from_buffers).parameters
    )
    if lossless:
        export(tmp_path / "r", to="minari", out="tests/images-v0")
    else:  # minari 0.5.3 always JPEG-encodes images: the export says so
        with pytest.warns(LossyExportWarning, match="JPEG"):
            export(tmp_path / "r", to="minari", out="tests/images-v0")
    dataset = minari_path.load_dataset("tests/images-v0")
    for ep, got in zip(gym_recording.load(tmp_path / "r"), dataset.iterate_episodes(), strict=True):
        assert got.observations.shape == ep.observations.shape
        if lossless:
            np.testing.assert_array_equal(got.observations, ep.observations)


def test_minari_refuses_a_space_of_empty_arrays(tmp_path: Path, minari_path: Any) -> None:
    """A zero-size Box (which Minari's storage divides by) is refused cleanly, not a crash of
    the process (SIGFPE in Minari); npz still takes it."""
    act = gymnasium.spaces.Box(0, 1, (0,), np.float32)
    env = SpaceEnv(gymnasium.spaces.Box(-1, 1, (), np.float32), act, min_len=1, max_len=2)
    with TraceRecordingWrapper(env, tmp_path / "r") as w:
        run_episodes(w, 2)
    with pytest.raises(ExportError, match=r"action space .* holds arrays of no elements"):
        export(tmp_path / "r", to="minari", out="tests/empty-v0")
    assert not (tmp_path / "datasets" / "tests" / "empty-v0").exists()
    export(tmp_path / "r", to="npz", out=tmp_path / "r.npz")


def test_minari_lossy_images_warn(tmp_path: Path, minari_path: Any, monkeypatch: Any) -> None:
    """With a Minari that cannot turn JPEG off (0.5.3), exporting images warns."""
    real = minari_path.create_dataset_from_buffers

    def without_jpeg_flag(dataset_id: str, buffer: Any, **kw: Any) -> Any:
        kw.pop("jpeg_encoding", None)
        return real(dataset_id, buffer, **kw)

    monkeypatch.setattr(minari_path, "create_dataset_from_buffers", without_jpeg_flag)
    space = gymnasium.spaces.Box(0, 255, (32, 32, 3), np.uint8)
    with TraceRecordingWrapper(SpaceEnv(space, min_len=1, max_len=2), tmp_path / "r") as w:
        run_episodes(w, 1)
    with pytest.warns(LossyExportWarning, match="lossy"):
        export(tmp_path / "r", to="minari", out="tests/lossy-v0")


def test_import_a_dataset_made_with_minari(tmp_path: Path, minari_path: Any) -> None:
    """A Minari user's own dataset (options, infos, a Dict space) moves over."""
    from minari.data_collector import EpisodeBuffer

    obs_space = gymnasium.spaces.Dict(
        {"pos": gymnasium.spaces.Box(-1, 1, (2,), np.float32), "n": gymnasium.spaces.Discrete(5)}
    )
    act_space = gymnasium.spaces.Box(-1, 1, (1,), np.float32)
    rng = np.random.default_rng(0)
    buffers = []
    for e, n in enumerate((3, 5)):
        buffers.append(
            EpisodeBuffer(
                id=e,
                seed=100 + e,
                options={"level": e},
                observations={  # gymnasium's Dict space sorts its keys
                    "n": rng.integers(0, 5, n + 1),
                    "pos": rng.uniform(-1, 1, (n + 1, 2)).astype(np.float32),
                },
                actions=rng.uniform(-1, 1, (n, 1)).astype(np.float32),
                rewards=list(rng.normal(size=n)),
                terminations=[False] * (n - 1) + [e == 0],
                truncations=[False] * (n - 1) + [e == 1],
                infos={"t": list(range(n + 1))},
            )
        )
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        minari_path.create_dataset_from_buffers(
            "users/own-v1",
            buffers,
            observation_space=obs_space,
            action_space=act_space,
            data_format="arrow",
        )
    directory = import_minari("users/own-v1", tmp_path / "moved")
    rec = gym_recording.load(directory)
    assert len(rec) == 2
    assert rec.observation_space == obs_space and rec.action_space == act_space
    assert rec.env_id is None and rec.metadata["source"] == "minari"
    for buf, ep in zip(buffers, rec, strict=True):
        assert_same(ep.observations, buf.observations, "observations")
        assert_same(ep.actions, buf.actions, "actions")
        np.testing.assert_array_equal(ep.rewards, np.asarray(buf.rewards))
        assert ep.terminated is buf.terminations[-1]
        assert ep.truncated is buf.truncations[-1]
        assert ep.seed == buf.seed and ep.options == buf.options


def test_minari_without_recorded_spaces_infers_them(tmp_path: Path, minari_path: Any) -> None:
    with gym_recording.TraceRecording(tmp_path / "r") as w:  # no spaces, no env id
        for e in range(2):
            w.add_reset(np.zeros(3, np.float32), seed=e)
            for t in range(4):
                w.add_step(t % 3, np.full(3, t, np.float32), 1.0, terminated=t == 3)
    export(tmp_path / "r", to="minari", out="tests/inferred-v0")
    dataset = minari_path.load_dataset("tests/inferred-v0")
    assert dataset.action_space == gymnasium.spaces.Discrete(3)
    assert dataset.observation_space.shape == (3,)
    assert dataset.total_steps == 8


def test_minari_infers_a_space_of_bool_arrays(tmp_path: Path, minari_path: Any) -> None:
    with gym_recording.TraceRecording(tmp_path / "r") as w:
        w.add_reset(np.array([True, False]))
        w.add_step(0, np.array([False, True]), 1.0, terminated=True)
    export(tmp_path / "r", to="minari", out="tests/inferred-bool-v0")
    dataset = minari_path.load_dataset("tests/inferred-bool-v0")
    assert dataset.observation_space == gymnasium.spaces.Box(0, 1, (2,), np.bool_)
    (ep,) = dataset.iterate_episodes()
    assert ep.observations.dtype == np.bool_
    assert ep.observations.tolist() == [[True, False], [False, True]]


def test_minari_infers_dict_observations_and_keeps_out_zero_step_episodes(
    tmp_path: Path, minari_path: Any
) -> None:
    """No spaces recorded: Dict observations are inferred key by key, and a zero-step
    episode (no action of its own to infer from) is no crash."""
    with gym_recording.TraceRecording(tmp_path / "r") as w:
        w.add_reset({"pos": np.zeros(2)})
        w.add_step(1, {"pos": np.ones(2)}, 1.0, terminated=True)
        w.add_reset({"pos": np.zeros(2)})
        w.end_episode()
    export(tmp_path / "r", to="minari", out="tests/inferred-dict-v0")
    dataset = minari_path.load_dataset("tests/inferred-dict-v0")
    assert isinstance(dataset.observation_space, gymnasium.spaces.Dict)
    assert dataset.observation_space["pos"].shape == (2,)
    assert dataset.total_steps == 1


@pytest.mark.parametrize("to", ["npz", "mp4"])
def test_exports_get_the_permissions_a_new_file_gets(tmp_path: Path, to: str) -> None:
    """Not the 0600 (0700) of a temporary file (directory): the umask decides."""
    if to == "mp4":
        pytest.importorskip("av")
    d = tmp_path / "r"
    with gym_recording.TraceRecording(d) as w:
        w.add_reset(np.zeros((64, 64, 3), np.uint8))
        w.add_step(0, np.ones((64, 64, 3), np.uint8), 1.0)
    old = os.umask(0o022)
    try:
        out = export(d, to=to, out=tmp_path / "x")
    finally:
        os.umask(old)
    assert os.stat(out).st_mode & 0o777 == (0o755 if to == "mp4" else 0o644)


def test_npz_keeps_action_dtypes_beside_an_original_writers_empty_episode(
    tmp_path: Path,
) -> None:
    """The original writer stored a zero-step episode's actions as a bare [] (float64 when
    read): its no rows must not turn the others' int64 actions into float64."""
    src = Path(__file__).parent / "data" / "compat" / "empty_episode"
    out = export(src, to="npz", out=tmp_path / "x.npz")
    with gym_recording.load(src) as rec:
        want = np.concatenate([ep.actions for ep in rec if ep.length])
    got = np.load(out)["actions"]
    assert got.dtype == want.dtype == np.int64 and got.tolist() == want.tolist()


def test_npz_refuses_episodes_of_arrays_and_of_per_step_values(tmp_path: Path) -> None:
    with gym_recording.TraceRecording(tmp_path / "r") as w:
        for e in range(2):
            w.add_reset(np.zeros(2))
            for k in range(2):
                w.add_step(0, np.zeros(2 if e == 0 else k + 1), 1.0)
    with pytest.raises(ExportError, match="per-step values stored as JSON strings, but the"):
        export(tmp_path / "r", to="npz", out=tmp_path / "x.npz")


def _changed_midway(directory: Path) -> Path:
    """One env's recording whose second episode's observations turn float64 (from float32)
    at its first step: the recorder stores them as per-step values from there on."""
    box = gymnasium.spaces.Box(-1, 1, (2,), np.float32)
    with gym_recording.TraceRecording(directory, observation_space=box) as w:
        for dtype in (np.float32, np.float64):
            w.add_reset(np.zeros(2, np.float32))
            for t in range(3):
                w.add_step(0, np.full(2, t, dtype), 1.0, terminated=t == 2)
    return directory


def test_exports_say_which_episode_holds_values_that_changed_type_midway(
    tmp_path: Path, minari_path: Any
) -> None:
    """Parquet named a column of numbers it did not have, and sent the user to npz, which
    refuses too; npz blamed two envs' recordings; Minari's arrow storage said only
    "Mismatching list value type". Each now names the episode and the field, and says why."""
    d = _changed_midway(tmp_path / "r")
    with pytest.raises(ExportError) as parquet:
        export(d, to="parquet", out=tmp_path / "x.parquet")
    assert str(parquet.value).startswith("episode 1: cannot export obs to parquet: the episodes ")
    assert "arrays of per-step shape (2,), and this one as per-step values" in str(parquet.value)
    with pytest.raises(ExportError, match="an env whose values changed type or shape partway"):
        export(d, to="npz", out=tmp_path / "x.npz")
    with pytest.raises(ExportError) as minari:
        export(d, to="minari", out="tests/changed-v0")
    assert str(minari.value).startswith(
        "episode 1: the observations are per-step values (float64[2] together) (an env that "
        "returns them so, or whose values changed type or shape partway"
    )
    assert not (tmp_path / "datasets" / "tests" / "changed-v0").exists()
    assert not list(tmp_path.glob("x.*"))


def test_minari_takes_observations_given_as_lists_that_fit_their_space(
    tmp_path: Path, minari_path: Any
) -> None:
    """An env that returns a Box's observations as lists: the recorder keeps them as per-step
    values, which Minari's arrow storage takes as one array where they make one of the
    space's dtype and shape (a review found them refused by a first version of the check
    above, with a false reason)."""
    box = gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float64)
    obs = [[0.0, 0.5], *([0.1 * t, 0.2] for t in range(3))]
    with gym_recording.TraceRecording(
        tmp_path / "r", observation_space=box, action_space=gymnasium.spaces.Discrete(2)
    ) as w:
        w.add_reset(obs[0])
        for t in range(3):
            w.add_step(1, obs[t + 1], 1.0, terminated=t == 2)
    export(tmp_path / "r", to="minari", out="tests/lists-v0")
    got = minari_path.load_dataset("tests/lists-v0")[0].observations
    assert got.dtype == np.float64 and np.array_equal(got, np.array(obs))


def _two_runs(directory: Path, first: tuple[Any, Any], second: tuple[Any, Any]) -> Path:
    """Two writers in one directory, each one episode of one step: (action, observation)."""
    for seed, (act, obs) in enumerate((first, second)):
        with gym_recording.TraceRecording(directory) as w:
            w.add_reset(np.zeros_like(obs), seed=seed)
            w.add_step(act, obs, 1.0, terminated=True)
    return directory


def test_npz_and_parquet_refuse_what_one_array_or_column_cannot_hold_exactly(
    tmp_path: Path,
) -> None:
    """Two runs in one directory whose values differ in type: numpy would make int64 and
    uint64 actions float64 (2**62 + 1 read back as 2**62), parquet would cast the second
    run's float64 observations to the first's float32 (1e-50 as 0, 1e300 as inf). Refused,
    naming both; float32 beside float64 goes to one float64 array exactly."""
    big = _two_runs(
        tmp_path / "big",
        (np.int64(2**62 + 1), np.ones(2, np.float32)),
        (np.uint64(2**62 + 3), np.ones(2, np.float32)),
    )
    with pytest.raises(ExportError, match=r"actions are uint64 arrays .* hold int64 arrays"):
        export(big, to="npz", out=tmp_path / "big.npz")
    floats = _two_runs(
        tmp_path / "floats", (0, np.ones(2, np.float32)), (0, np.array([1e-50, 1e300]))
    )
    pytest.importorskip("pyarrow")
    with pytest.raises(ExportError, match=r"obs: fixed_size_list<item: double>.*, not .*float"):
        export(floats, to="parquet", out=tmp_path / "floats.parquet")
    export(floats, to="npz", out=tmp_path / "floats.npz")
    with np.load(tmp_path / "floats.npz") as z:
        assert z["observations"].dtype == np.float64
        assert z["observations"][3].tolist() == [1e-50, 1e300]


def test_parquet_takes_episodes_whose_types_differ_without_changing_a_value(
    tmp_path: Path,
) -> None:
    """Per-step values all floats in one episode and all ints in the next; a Dict leaf None
    for a whole episode: one type per column holds them exactly, as before the check above."""
    pq = pytest.importorskip("pyarrow.parquet")
    p = np.zeros(2)
    episodes = [
        ("x", [0, 0.5, 1.5]),
        ("x", [0, 1, 2]),
        ("d", [{"p": p, "g": None}, {"p": p, "g": 1.5}]),
        ("d", [{"p": p, "g": None}, {"p": p, "g": None}]),
    ]
    for name, values in episodes:
        with gym_recording.TraceRecording(tmp_path / name) as w:
            w.add_reset(values[0])
            for v in values[1:]:
                w.add_step(0, v, 1.0)
    for name in ("x", "d"):
        export(tmp_path / name, to="parquet", out=tmp_path / f"{name}.parquet")
    x = pq.read_table(tmp_path / "x.parquet").to_pylist()
    assert [(r["obs"], r["next_obs"]) for r in x] == [(0, 0.5), (0.5, 1.5), (0, 1), (1, 2)]
    d = pq.read_table(tmp_path / "d.parquet").to_pylist()
    assert [r["next_obs"]["g"] for r in d] == [1.5, None]


def test_parquet_makes_a_column_of_ints_float64_where_floats_follow(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """One env whose values are ints in some episodes and floats in others (a per-step value,
    a Dict leaf's arrays): the column typed int64 by the first episode becomes float64, the
    rows written before (several row groups) written again with every value kept; it was
    refused as "two envs' recordings". Ints float64 does not hold exactly are refused,
    naming the column and both types, and leave no file behind."""
    pq = pytest.importorskip("pyarrow.parquet")
    from gym_recording.tools import export as _export

    monkeypatch.setattr(_export, "_ROW_GROUP_ROWS", 2)
    with gym_recording.TraceRecording(tmp_path / "x") as w:
        for values in ([0, 1, 2, 3, 2**53], [0.5, 1.5], [7, 8]):
            w.add_reset(values[0])
            for i, v in enumerate(values[1:]):
                w.add_step(0, v, 1.0, terminated=i == len(values) - 2)
    out = export(tmp_path / "x", to="parquet", out=tmp_path / "x.parquet")
    table = pq.read_table(out)
    assert str(table.schema.field("next_obs").type) == "double"
    rows = table.select(["episode", "obs", "next_obs"]).to_pylist()
    assert [tuple(r.values()) for r in rows] == [
        (0, 0, 1),
        (0, 1, 2),
        (0, 2, 3),
        (0, 3, 2**53),
        (1, 0.5, 1.5),
        (2, 7, 8),
    ]
    assert all(type(r["next_obs"]) is float for r in rows)

    for run, a in enumerate((np.array([1, 2]), np.array([1.5, 2**52]))):
        with gym_recording.TraceRecording(tmp_path / "d") as w:  # (a writer each)
            obs = {"a": a, "n": np.int64(run)}
            w.add_reset(obs)
            w.add_step(0, obs, 1.0, terminated=True)
    table = pq.read_table(export(tmp_path / "d", to="parquet", out=tmp_path / "d.parquet"))
    assert str(table.schema.field("obs").type.field("a").type.value_type) == "double"
    assert str(table.schema.field("obs").type.field("n").type) == "int64"
    assert [r["obs"] for r in table.to_pylist()] == [
        {"a": [1.0, 2.0], "n": 0},
        {"a": [1.5, 2.0**52], "n": 1},
    ]

    with gym_recording.TraceRecording(tmp_path / "big") as w:
        for values in ([0, 2**53 + 1], [0.5, 1.5]):
            w.add_reset(values[0])
            w.add_step(0, values[1], 1.0, terminated=True)
    before = set(tmp_path.iterdir())
    with pytest.raises(ExportError, match=r"ints in the episodes before episode 1 and floats") as e:
        export(tmp_path / "big", to="parquet", out=tmp_path / "big.parquet")
    assert "next_obs: int64, then double" in str(e.value)
    assert "two envs" not in str(e.value)
    assert set(tmp_path.iterdir()) == before  # (no export, no temporary file)


def test_parquet_types_a_column_of_per_step_values_once(tmp_path: Path) -> None:
    """Sequence values empty in a first episode, OneOf values of one kind in it: its column's
    type came from that episode alone, and the next episode's did not fit it (blamed on "two
    envs' recordings"). Such values are JSON text, whatever the first episode holds."""
    pq = pytest.importorskip("pyarrow.parquet")
    box = gymnasium.spaces.Box(0, 1, (2,), np.float32)
    cases = {
        "seq": (gymnasium.spaces.Sequence(box), [(), ()], [(np.zeros(2, np.float32),)] * 2),
        "oneof": (
            gymnasium.spaces.OneOf([gymnasium.spaces.Discrete(3), box]),
            [(0, np.int64(1)), (0, np.int64(2))],
            [(0, np.int64(2)), (1, np.zeros(2, np.float32))],
        ),
    }
    # (None alone in the first episode, Arrow's null type; an int past int64: JSON text too)
    cases["none"] = (None, [None, None], [None, 1.5])
    cases["big"] = (None, [1, 2**64], [3, 4])
    want = {
        "seq": [[], [[0.0, 0.0]]],
        "oneof": [[0, 2], [1, [0.0, 0.0]]],
        "none": [None, 1.5],
        "big": [2**64, 4],
    }
    for name, (space, *runs) in cases.items():
        with gym_recording.TraceRecording(tmp_path / name, observation_space=space) as w:
            for first, second in runs:
                w.add_reset(first)
                w.add_step(0, second, 1.0, terminated=True)
        export(tmp_path / name, to="parquet", out=tmp_path / f"{name}.parquet")
        table = pq.read_table(tmp_path / f"{name}.parquet")
        shapes = json.loads(table.schema.metadata[b"gym_recording"])["shapes"]
        assert shapes["next_obs"] == "json", shapes
        assert [json.loads(v) for v in table.column("next_obs").to_pylist()] == want[name]


def test_npz_refuses_two_fields_of_one_name(tmp_path: Path) -> None:
    """A Dict key holding a dot and a nested key give one npz name: their rows would go to
    one array (and every offset after them be wrong)."""
    with gym_recording.TraceRecording(tmp_path / "r") as w:
        obs = {"a.b": np.zeros(2), "a": {"b": np.ones(2)}}
        w.add_reset(obs)
        w.add_step(0, obs, 1.0, terminated=True)
    with pytest.raises(ExportError, match=r"both named 'observations\.a\.b'"):
        export(tmp_path / "r", to="npz", out=tmp_path / "x.npz")
    assert not (tmp_path / "x.npz").exists()


def test_npz_counts_a_seed_of_minus_one_as_left_out(tmp_path: Path) -> None:
    """npz stores "no seed" as -1: a recorded seed of -1 cannot be told from it, and says so."""
    with gym_recording.TraceRecording(tmp_path / "r") as w:
        w.add_reset(np.zeros(2), seed=-1)
        w.add_step(0, np.ones(2), 1.0, terminated=True)
    with pytest.warns(LossyExportWarning, match="the seeds of 1 episode"):
        export(tmp_path / "r", to="npz", out=tmp_path / "x.npz")


class _Float64Box(gymnasium.Env):  # type: ignore[type-arg]
    """Declares float32 observations and returns float64 ones (Gymnasium only warns)."""

    observation_space = gymnasium.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        return np.zeros(2), {"big": 2**70}

    def step(self, action: Any) -> Any:
        return np.ones(2), 1.0, True, False, {"big": 2**70}


def test_minari_names_observations_of_another_dtype_than_their_space(
    tmp_path: Path, minari_path: Any
) -> None:
    """Minari stores arrays as their space says: float64 observations of a float32 Box are
    refused naming both dtypes and what to do (Minari's own error named neither)."""
    with TraceRecordingWrapper(_Float64Box(), tmp_path / "r") as w:
        run_episodes(w, 2)
    with pytest.raises(ExportError, match=r"observations were recorded as float64\[2\], but their"):
        export(tmp_path / "r", to="minari", out="tests/f64-v0")
    assert not (tmp_path / "datasets" / "tests" / "f64-v0").exists()


def test_minari_leaves_out_the_info_keys_it_cannot_hold_and_keeps_the_others(
    tmp_path: Path, minari_path: Any
) -> None:
    """An info key of ints past int64 (Minari's OverflowError stopped the whole export), or of
    None at every step, is left out and named; the other keys are kept, tuples of numbers
    among them (all of an episode's infos were dropped, "values of different kinds")."""
    d = tmp_path / "r"
    with gym_recording.TraceRecording(d, record_infos=True) as w:
        for e in range(2):
            for t in range(-1, 3):
                info = {
                    "x": t + 0.5,
                    "big": 2**70 if t < 0 else np.uint64(2**63 + t),
                    "pos": (t, t + 0.5),
                    "grid": [[t, 1], [2, 3]],
                    "none": None,
                }
                if t < 0:
                    w.add_reset(np.zeros(2, np.float32), seed=e, info=info)
                else:
                    w.add_step(1, np.ones(2, np.float32), 1.0, terminated=t == 2, info=info)
    with pytest.warns(LossyExportWarning) as caught:
        export(d, to="minari", out="tests/big-v0")
    (said,) = [str(c.message) for c in caught]
    assert "info key big (ints past int64) (in 2 episodes)" in said, said
    assert "info key none (values of type NoneType) (in 2 episodes)" in said, said
    back = import_minari("tests/big-v0", tmp_path / "back")
    for want, got in zip(gym_recording.load(d), gym_recording.load(back), strict=True):
        kept = [{k: i[k] for k in ("x", "pos", "grid")} for i in want.infos]
        assert _typed(got.infos) == _typed(kept)
    with gym_recording.TraceRecording(tmp_path / "s", record_infos=True) as w:
        w.add_reset(np.zeros(2, np.float32), info={"x": 0.0, "pos": (0, 0.5), "g": [[0, 1]]})
        w.add_step(1, np.ones(2, np.float32), 1.0, info={"x": 1.0, "pos": (1, 1.5), "g": [[2, 3]]})
    with warnings.catch_warnings():
        warnings.simplefilter("error", LossyExportWarning)
        export(tmp_path / "s", to="minari", out="tests/tuples-v0")
    back = import_minari("tests/tuples-v0", tmp_path / "back-s")
    (want,), (got,) = gym_recording.load(tmp_path / "s"), gym_recording.load(back)
    assert _typed(got.infos) == _typed(want.infos)


@pytest.mark.parametrize("storage", ["arrow", "hdf5"])
def test_minari_leaves_out_zero_step_episodes_hdf5_cannot_store(
    tmp_path: Path, minari_path: Any, storage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Minari's HDF5 storage fails on an episode of no step (an IndexError out of Minari):
    left out and said, as the arrow storage's are for array actions."""
    if storage == "hdf5":  # (chosen where pyarrow is missing)
        find_spec = importlib.util.find_spec
        monkeypatch.setattr(
            importlib.util, "find_spec", lambda n, *a: None if n == "pyarrow" else find_spec(n, *a)
        )
    d = tmp_path / "r"
    with gym_recording.TraceRecording(d) as w:
        w.add_reset(np.zeros(2, np.float32), seed=0)
        w.end_episode()
        w.add_reset(np.zeros(2, np.float32), seed=1)
        w.add_step(1, np.ones(2, np.float32), 1.0, terminated=True)
    if storage == "hdf5":
        with pytest.warns(LossyExportWarning, match=r"zero-step episodes \(Minari's HDF5"):
            export(d, to="minari", out="tests/zero-v0")
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("error", LossyExportWarning)
            export(d, to="minari", out="tests/zero-v0")
    back = import_minari("tests/zero-v0", tmp_path / "back")
    assert [ep.seed for ep in gym_recording.load(back)] == ([1] if storage == "hdf5" else [0, 1])


def test_import_minari_refuses_a_url_that_holds_a_recording(
    tmp_path: Path, minari_path: Any
) -> None:
    """As a local directory that holds files: an fsspec URL that holds a recording is not
    written into (it was merged with the recording there)."""
    pytest.importorskip("fsspec")
    d = record_space(tmp_path / "rec", SPACES[0], "box_f32")
    export(d, to="minari", out="tests/url-v0")
    target = f"memory://{tmp_path.name}/existing"
    import_minari("tests/url-v0", target)
    with pytest.raises(OutputExistsError, match="already holds a recording"):
        import_minari("tests/url-v0", target)
    with gym_recording.load(target) as rec:
        assert len(rec.writers) == 1


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


def test_unknown_format(tmp_path: Path) -> None:
    d = record_space(tmp_path / "r", "discrete")
    with pytest.raises(ExportError, match="unknown export format 'csv'") as info:
        export(d, to="csv", out=tmp_path / "x.csv")
    assert isinstance(info.value, RecordingError)


@pytest.mark.parametrize("to", ["parquet", "npz"])
def test_existing_output(tmp_path: Path, to: str) -> None:
    if to == "parquet":
        pytest.importorskip("pyarrow")
    d = record_space(tmp_path / "r", "discrete")
    (tmp_path / "x").write_text("mine")
    with pytest.raises(OutputExistsError, match="exists already"):
        export(d, to=to, out=tmp_path / "x")
    assert (tmp_path / "x").read_text() == "mine"
    with pytest.raises(ExportError, match=f"expected OUT to name the {to} file to write"):
        export(d, to=to, out=f"{tmp_path / 'new'}/")  # (not its temporary file's name)
    assert not (tmp_path / "new").exists()


def test_failed_export_leaves_nothing(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    with gym_recording.TraceRecording(tmp_path / "r") as w:
        w.add_reset(np.zeros(2, np.complex64))
        w.add_step(0, np.ones(2, np.complex64), 1.0)
    with pytest.raises(ExportError, match="complex64"):
        export(tmp_path / "r", to="parquet", out=tmp_path / "out" / "x.parquet")
    assert os.listdir(tmp_path / "out") == []  # no partial file, no temporary file


def test_minari_dataset_errors(tmp_path: Path, minari_path: Any) -> None:
    d = record_space(tmp_path / "r", "discrete")
    with pytest.raises(ExportError, match="not a Minari dataset id"):
        export(d, to="minari", out="bad id")
    with pytest.raises(ExportError, match="namespace/name-v0"):
        export(d, to="minari", out="ns/name")  # no version
    export(d, to="minari", out="ns/name-v0")
    with pytest.raises(OutputExistsError):
        export(d, to="minari", out="ns/name-v0")
    with pytest.raises(ExportError, match="no local Minari dataset"):
        import_minari("ns/other-v0", tmp_path / "o")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_text("x")
    with pytest.raises(OutputExistsError):
        import_minari("ns/name-v0", tmp_path / "full")


def test_minari_datasets_path_that_takes_no_dataset_is_named_with_what_to_do(
    tmp_path: Path, minari_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MINARI_DATASETS_PATH under a file (or a directory one may not write to): the error
    names the dataset, why, and the variable to set; it was the OSError alone
    ("/.../f/sub: Not a directory")."""
    d = record_space(tmp_path / "r", "discrete")
    (tmp_path / "f").write_text("x")
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "f" / "sub"))
    with pytest.raises(RecordingError) as got:
        export(d, to="minari", out="ns/name-v0")
    assert str(got.value) == (
        f"cannot write the Minari dataset ns/name-v0 ({tmp_path / 'f' / 'sub'}): Not a "
        "directory; Minari keeps its datasets where MINARI_DATASETS_PATH says (else "
        "~/.minari/datasets): set it to a directory you may write to"
    )


def test_a_relative_minari_datasets_path_is_refused_with_the_absolute_one_to_set(
    tmp_path: Path, minari_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative MINARI_DATASETS_PATH: Minari's storage wrote under it twice and failed
    ("rel/minari/ns/name-v0/data/rel/minari/...: No such file or directory"), leaving a
    namespace behind. The export refuses it first, naming the absolute path to set."""
    d = record_space(tmp_path / "r", "discrete")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MINARI_DATASETS_PATH", "rel/minari")
    with pytest.raises(RecordingError) as got:
        export(d, to="minari", out="ns/name-v0")
    assert str(got.value) == (
        "cannot write the Minari dataset ns/name-v0: MINARI_DATASETS_PATH is a relative path "
        "('rel/minari'), which Minari's storage writes to wrongly; set it to an absolute path, "
        f"such as {tmp_path / 'rel' / 'minari'}"
    )
    assert not (tmp_path / "rel").exists()
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "rel" / "minari"))
    export(d, to="minari", out="ns/name-v0")
    back = import_minari("ns/name-v0", tmp_path / "back")
    assert len(gym_recording.load(back)) == len(gym_recording.load(d))


def test_minari_names_what_its_arrow_storage_would_refuse_by_episode_and_field(
    tmp_path: Path, minari_path: Any
) -> None:
    """Minari's arrow storage refuses values that are not of their space's dtype and shape.
    It said nothing ("... as tests/x-v0: ", a bare assert), or every observation of the
    episode (a Dict field stored as per-step values: 121,348 characters), or blamed an episode
    it had not reached; and where a space was to be inferred (no action space recorded here),
    a Dict field stored as per-step values crashed the inference with a TypeError. The export
    now refuses each such episode itself, naming it."""
    box = gymnasium.spaces.Box(-1, 1, (2,), np.float64)
    with gym_recording.TraceRecording(tmp_path / "shape", observation_space=box) as w:
        w.add_reset(np.zeros(3))  # (episode 0: arrays of shape (3,), the space's is (2,))
        w.add_step(1, np.ones(3), 1.0, terminated=True)
        w.add_reset([0, 1])  # (episode 1: lists of ints)
        w.add_step(1, [1, 0], 1.0, terminated=True)
    with pytest.raises(ExportError) as got:
        export(tmp_path / "shape", to="minari", out="tests/shape-v0")
    assert str(got.value).startswith(
        "episode 0: the observations were recorded as float64[3], but their space declares "
        "float64[2]"
    )
    space = gymnasium.spaces.Dict({"pos": box, "n": gymnasium.spaces.Discrete(100)})
    with gym_recording.TraceRecording(tmp_path / "dict", observation_space=space) as w:
        w.add_reset({"pos": np.zeros(2), "n": 0})
        for t in range(100):  # (pos turns float32 at step 50: the field, per-step values)
            pos = np.ones(2, np.float64 if t < 50 else np.float32)
            w.add_step(1, {"pos": pos, "n": t}, 1.0, terminated=t == 99)
    with pytest.raises(ExportError) as got:
        export(tmp_path / "dict", to="minari", out="tests/dict-v0")
    assert str(got.value).startswith(
        "episode 0: the observations are per-step values, not one field per part of their "
        "Dict space"
    )
    assert len(str(got.value)) < 400
    assert not (tmp_path / "datasets" / "tests").exists() or not any(
        (tmp_path / "datasets" / "tests").iterdir()
    )


def test_import_minari_names_a_datasets_path_it_cannot_read(
    tmp_path: Path, minari_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MINARI_DATASETS_PATH under a file, on import: "cannot read", the variable to set (the
    OSError came out raw; then a first version said "cannot write" for an import)."""
    (tmp_path / "f").write_text("x")
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "f" / "sub"))
    with pytest.raises(RecordingError) as got:
        import_minari("ns/name-v0", tmp_path / "out")
    assert str(got.value) == (
        f"cannot read the Minari dataset ns/name-v0 ({tmp_path / 'f' / 'sub'}): Not a "
        "directory; Minari keeps its datasets where MINARI_DATASETS_PATH says (else "
        "~/.minari/datasets): set it to the directory that holds it"
    )


def test_minari_infers_spaces_beside_a_dict_field_stored_as_per_step_values(
    tmp_path: Path, minari_path: Any
) -> None:
    """Without recorded spaces, a Dict field that turns into per-step values in a later batch
    crashed the inference (TypeError, a traceback in the CLI). Its space is now inferred from
    the episodes that hold it as a dict, and the other episode is refused by its index."""

    def obs(k: int, t: int) -> dict[str, Any]:  # (episode 2's m widens at its first step)
        return {"a": t % 3, "m": np.full(2 if k < 2 or t < 1 else 3, t, np.float32)}

    rec = gym_recording.TraceRecording(tmp_path / "r")  # (no spaces: the export infers them)
    for k, n in enumerate((3, 2, 2)):
        rec.add_reset(obs(k, 0), seed=k)
        for t in range(1, n + 1):
            rec.add_step(0, obs(k, t), 1.0, terminated=t == n)
        rec.save_complete()  # (a batch each: episodes 0 and 1 keep their dict columns)
    rec.close()
    with pytest.raises(ExportError) as got:
        export(tmp_path / "r", to="minari", out="tests/later-v0")
    assert str(got.value).startswith(
        "episode 2: the observations are per-step values, not one field per part of their "
        "Dict space"
    )


def test_minari_leaves_out_infos_of_dicts_its_arrow_storage_cannot_store(
    tmp_path: Path, minari_path: Any
) -> None:
    """An info dict of no key (as the env gave it, or once its keys are left out) made
    Minari's arrow storage fail the whole export ("Arrays were not all the same length");
    it is now left out and named, with what else of it is."""
    infos = [{"n": {"u": (t, "y")}, "e": {}, "x": float(t)} for t in range(4)]
    with gym_recording.TraceRecording(
        tmp_path / "r",
        observation_space=gymnasium.spaces.Discrete(3),
        action_space=gymnasium.spaces.Discrete(3),
        record_infos=True,
    ) as w:
        w.add_reset(0, seed=0, info=infos[0])
        for t in range(1, 4):
            w.add_step(0, t % 3, 1.0, terminated=t == 3, info=infos[t])
    with pytest.warns(LossyExportWarning) as caught:
        export(tmp_path / "r", to="minari", out="tests/infos-v0")
    said = str(caught[0].message)
    assert "info key n.u (lists or tuples that are not numbers, of one length)" in said
    for key in ("n", "e"):
        assert f"info key {key} (dicts of no key, which Minari's arrow storage cannot " in said
    got = minari_path.load_dataset("tests/infos-v0")[0].infos
    assert list(got) == ["x"] and got["x"].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_minari_says_why_it_cannot_infer_a_space_for_per_step_values(
    tmp_path: Path, minari_path: Any
) -> None:
    """Without recorded spaces, observations whose shape changed partway (per-step values) fit
    no one space: the message says so, and what to do (it said they were "neither numeric
    arrays nor strings", which they are)."""
    with gym_recording.TraceRecording(tmp_path / "r") as w:
        for shape in (2, 3):
            w.add_reset(np.zeros(2, np.float32))
            w.add_step(0, np.ones(shape, np.float32), 1.0, terminated=True)
    with pytest.raises(ExportError) as got:
        export(tmp_path / "r", to="minari", out="tests/infer-v0")
    assert str(got.value) == (
        "cannot infer a space for observations: the recording did not record it, and its "
        "values are per-step values that are not all strings (their type or shape changed "
        "partway, or the env returned lists), which no one space fits; record the env's "
        "spaces (observation_space=, action_space=) to export it, or read the episodes with "
        "gym_recording.load"
    )
