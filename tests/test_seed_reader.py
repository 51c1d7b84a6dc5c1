"""The independent version 1 reader reads every original trace in tests/data/compat exactly.

These tests pin the ground truth down without gym_recording: if they pass, ``seed_reader`` and
``compat_expect`` are trustworthy tools for checking what our own writer and reader do.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from compat_expect import (
    COMPAT_DIR,
    assert_episode_matches,
    assert_episodes_match_in_some_order,
    assert_recording_matches,
    compat_cases,
    expected_by_writer,
    load_expected,
    match_writers,
    step_digest,
)
from seed_reader import read_seed_format, seed_writer_id

CASES = compat_cases()


def case_dir(case: str) -> Path:
    if not COMPAT_DIR.is_dir():
        pytest.skip(f"{COMPAT_DIR} is missing")
    return COMPAT_DIR / case


def need_case(case: str) -> Path:
    path = case_dir(case)
    if not path.is_dir():
        pytest.skip(f"compat case {case!r} is missing")
    return path


def copy_case(case: str, tmp_path: Path) -> Path:
    dst = tmp_path / case
    shutil.copytree(need_case(case), dst)
    for p in dst.iterdir():
        p.chmod(0o644)  # the shared copies are read-only
    return dst


def test_compat_cases_are_discovered():
    """The expected.json files name the six documented cases."""
    case_dir("cartpole")
    assert {"cartpole", "image", "discrete", "tuple", "multiwriter", "empty_episode"} <= set(CASES)


@pytest.mark.parametrize("case", CASES)
def test_seed_reader_matches_expected(case):
    """Every episode of every writer equals the expected digests and rewards exactly."""
    recording = read_seed_format(case_dir(case))
    expected = load_expected(case)
    assert_recording_matches(recording, expected)


@pytest.mark.parametrize("case", CASES)
def test_one_manifest_per_writer(case):
    """Each expected writer is one openaigym.trace.<id>.manifest.json."""
    recording = read_seed_format(case_dir(case))
    assert len(recording) == load_expected(case)["writers"]
    for name in recording:
        assert name.startswith("openaigym.trace.") and name.endswith(".manifest.json")
        assert seed_writer_id(name).endswith(".4287")


@pytest.mark.parametrize("case", CASES)
def test_flat_order_matches(case):
    """Writers read one after another keep each writer's episode order."""
    recording = read_seed_format(case_dir(case))
    flat = [ep for episodes in recording.values() for ep in episodes]
    assert_episodes_match_in_some_order(flat, load_expected(case))


@pytest.mark.parametrize("case", CASES)
def test_arrays_are_owned_copies(case):
    """Decoded arrays own their memory, so no file stays mapped or referenced."""
    for episodes in read_seed_format(case_dir(case)).values():
        for ep in episodes:
            for value in (ep["observations"], ep["actions"], ep["rewards"]):
                arrays = value if isinstance(value, list) else [value]
                for a in arrays:
                    if isinstance(a, np.ndarray):
                        assert a.flags.owndata and a.flags.writeable and a.base is None


def test_multiwriter_writers_match_their_prefixes():
    """The three writers 4, 5, 6 of multiwriter match expected writers 0, 1, 2."""
    recording = read_seed_format(need_case("multiwriter"))
    mapping = match_writers(recording, load_expected("multiwriter"))
    assert {i: seed_writer_id(name) for i, name in mapping.items()} == {
        0: "4.4287",
        1: "5.4287",
        2: "6.4287",
    }


def test_match_writers_ignores_returned_order():
    """Writers handed over in reverse order are still matched by content."""
    recording = read_seed_format(need_case("multiwriter"))
    reversed_recording = dict(reversed(list(recording.items())))
    expected = load_expected("multiwriter")
    assert match_writers(reversed_recording, expected) == match_writers(recording, expected)
    assert_recording_matches(reversed_recording, expected)


def test_cartpole_is_one_array_per_field():
    """Box observations are one float32 [N+1, 4] array, Discrete actions one int64 [N] array."""
    episodes = read_seed_format(need_case("cartpole"))["openaigym.trace.0.4287.manifest.json"]
    assert len(episodes) == 12  # 3 in the first batch, 9 in the second
    for ep in episodes:
        n = ep["actions"].shape[0]
        assert ep["observations"].dtype == np.float32 and ep["observations"].shape == (n + 1, 4)
        assert ep["actions"].dtype == np.int64 and ep["actions"].shape == (n,)
        assert ep["rewards"].dtype == np.float64 and ep["rewards"].shape == (n,)


def test_discrete_observations_are_1d_int64():
    """Discrete observations are an int64 [N+1] array; each step hashes as shape [1]."""
    (episodes,) = read_seed_format(need_case("discrete")).values()
    for ep in episodes:
        assert ep["observations"].dtype == np.int64 and ep["observations"].ndim == 1
        assert step_digest(ep["observations"][0])[:2] == ("int64", [1])


def test_image_observations_are_a_list_of_frames():
    """The original stored an image episode as a list with one uint8 [24, 32, 3] array per step."""
    (episodes,) = read_seed_format(need_case("image")).values()
    for ep in episodes:
        obs = ep["observations"]
        assert isinstance(obs, list) and len(obs) == ep["actions"].shape[0] + 1
        assert all(o.dtype == np.uint8 and o.shape == (24, 32, 3) for o in obs)


def test_tuple_observations_are_json_lists():
    """Tuple observations are plain JSON lists mixing ints and bools, hashed as int64 [3]."""
    (episodes,) = read_seed_format(need_case("tuple")).values()
    first = episodes[0]["observations"][0]
    assert isinstance(first, list) and [type(v) for v in first] == [int, int, bool]
    assert step_digest(first)[:2] == ("int64", [3])


def test_empty_episode_has_the_1_by_0_quirk():
    """The zero-step episode's actions and rewards are float64 arrays of shape (1, 0)."""
    (episodes,) = read_seed_format(need_case("empty_episode")).values()
    assert [ep["observations"].shape[0] for ep in episodes] == [6, 1, 5]
    empty = episodes[1]
    for field in ("actions", "rewards"):
        assert empty[field].shape == (1, 0) and empty[field].dtype == np.float64
    # Iterating the quirky array naively would yield one bogus step of shape (0,).
    assert len(list(empty["actions"])) == 1


def test_assert_episode_matches_catches_differences():
    """The checker is not vacuous: a changed reward, byte, dtype or step count fails."""
    (episodes,) = read_seed_format(need_case("cartpole")).values()
    entry = expected_by_writer(load_expected("cartpole"))[0][0]
    ep = episodes[0]
    obs, actions, rewards = ep["observations"], ep["actions"], ep["rewards"]
    assert_episode_matches(obs, actions, rewards, entry)

    bumped = rewards.copy()
    bumped[-1] = np.nextafter(bumped[-1], np.inf)
    with pytest.raises(AssertionError, match="rewards"):
        assert_episode_matches(obs, actions, bumped, entry)
    changed = obs.copy()
    changed[3, 2] += 1
    with pytest.raises(AssertionError, match=r"observations\[3\] bytes differ"):
        assert_episode_matches(changed, actions, rewards, entry)
    with pytest.raises(AssertionError, match=r"observations\[0\] is \('float64'"):
        assert_episode_matches(obs.astype(np.float64), actions, rewards, entry)
    with pytest.raises(AssertionError, match="actions"):
        assert_episode_matches(obs, actions[:-1], rewards, entry)
    with pytest.raises(AssertionError, match="observations"):
        assert_episode_matches(list(obs)[:-1], actions, rewards, entry)


def test_assert_episode_matches_accepts_both_empty_shapes():
    """A zero-step episode may give actions/rewards of shape (0,) or (1, 0), but not (1,)."""
    (episodes,) = read_seed_format(need_case("empty_episode")).values()
    entry = expected_by_writer(load_expected("empty_episode"))[0][1]
    obs = episodes[1]["observations"]
    quirk = np.zeros((1, 0))
    assert_episode_matches(obs, quirk, quirk, entry)
    assert_episode_matches(obs, np.zeros(0, np.int64), np.zeros(0), entry)
    with pytest.raises(AssertionError):
        assert_episode_matches(obs, np.zeros(1, np.int64), np.zeros(0), entry)


def test_reader_ignores_other_files(tmp_path):
    """Temporary files and unlisted batches beside the manifests are ignored."""
    directory = copy_case("discrete", tmp_path)
    (directory / ".gymrec-tmp-abc").write_text("{not json")
    (directory / "openaigym.trace.9.1.ep000000000.json").write_text("{not json")
    (directory / "openaigym.trace.9.1.manifest.json.tmp").write_text("{not json")
    assert_recording_matches(read_seed_format(directory), load_expected("discrete"))


def test_reader_of_an_empty_directory(tmp_path):
    """A directory without manifests holds no writers."""
    assert read_seed_format(tmp_path) == {}


def _rewrite_first_ref(directory: Path, **changes) -> None:
    batch = directory / "openaigym.trace.2.4287.ep000000007.json"
    data = json.loads(batch.read_text())
    data["episodes"][0]["actions"].update(changes)
    batch.write_text(json.dumps(data))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"npyoff": 10_000}, "past the end"),
        ({"size": 8}, "size"),
        ({"npyfile": "../openaigym.trace.2.4287.ep000000007.bin"}, "plain name"),
        ({"npyoff": -8}, "npyoff"),
        ({"shape": [-1]}, "shape"),
        ({"order": "F"}, "C order"),
    ],
)
def test_reader_refuses_bad_ndarray_references(tmp_path, changes, message):
    """A reference that breaks version 1 is an error naming the batch, not garbage."""
    directory = copy_case("discrete", tmp_path)
    _rewrite_first_ref(directory, **changes)
    with pytest.raises(ValueError, match=message) as info:
        read_seed_format(directory)
    assert "ep000000007.json" in str(info.value)


def test_reader_refuses_inconsistent_manifest(tmp_path):
    """A batch whose episode count or position disagrees with the manifest is an error."""
    directory = copy_case("discrete", tmp_path)
    manifest = directory / "openaigym.trace.2.4287.manifest.json"
    data = json.loads(manifest.read_text())
    data["batches"][1]["first"] = 8
    manifest.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="first"):
        read_seed_format(directory)
    data["batches"][1]["first"] = 7
    data["batches"][1]["len"] = 2
    manifest.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="episodes"):
        read_seed_format(directory)


def test_reader_leaves_unknown_objects_alone(tmp_path):
    """Objects that are not ndarray references (e.g. later extensions) stay plain JSON."""
    directory = copy_case("tuple", tmp_path)
    batch = directory / "openaigym.trace.3.4287.ep000000000.json"
    data = json.loads(batch.read_text())
    data["episodes"][0]["extra"] = {"__type": "float", "value": "nan"}
    data["episodes"][0]["more"] = [1, {"a": None}]
    batch.write_text(json.dumps(data))
    ep = read_seed_format(directory)["openaigym.trace.3.4287.manifest.json"][0]
    assert ep["extra"] == {"__type": "float", "value": "nan"}
    assert ep["more"] == [1, {"a": None}]
