"""The ecosystem's own checks on what we write, with its real components (issue 17).

Gymnasium's ``check_env`` and ``gym.make(env.spec)``; copies and pickles; replays of real envs
made with keyword arguments (LunarLander, Atari) or registered by a package not yet imported
(MiniGrid); MiniGrid's custom mission space; Minari's ``load_dataset`` on exports of the
cases that failed (zero-step episodes, numpy options, infos, unregistered envs); vector envs
with the recorder inside each worker or under a vector wrapper; ``gym-recording info``.
"""

from __future__ import annotations

import copy
import gc
import json
import pickle
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
from conftest import ACTION_SPACES, OBSERVATION_SPACES, SpaceEnv, run_episodes
from gymnasium import spaces

import gym_recording
from gym_recording import (
    LossyExportWarning,
    RecordingError,
    TraceRecording,
    TraceRecordingVectorWrapper,
    TraceRecordingWrapper,
    UnknownSpace,
)
from gym_recording.record import steps
from gym_recording.tools.export import export
from gym_recording.tools.minari import import_minari


def _record(env: Any, directory: Path, steps_: int = 40, seed: int = 3, **kwargs: Any) -> Path:
    with TraceRecordingWrapper(env, directory, **kwargs) as w:
        w.reset(seed=seed)
        w.action_space.seed(seed)
        for _ in range(steps_):
            _, _, terminated, truncated, _ = w.step(w.action_space.sample())
            if terminated or truncated:
                break
    return directory


# ------------------------------------------------------------------ Gymnasium's own checks


def test_check_env_passes_and_the_spec_remakes_a_recording_env(tmp_path: Path) -> None:
    from gymnasium.utils.env_checker import check_env

    env = TraceRecordingWrapper(gymnasium.make("CartPole-v1"), tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # (a skipped check warns)
        warnings.filterwarnings("ignore", message=".*is different from the unwrapped version.*")
        warnings.filterwarnings("ignore", message=".*Box observation space m.*infinity.*")
        check_env(env, skip_render_check=True)
    again = gymnasium.make(env.spec)
    assert isinstance(again, TraceRecordingWrapper)
    assert again.recording.writer_id != env.recording.writer_id  # a new writer, same folder
    again.reset(seed=1)
    again.step(0)
    again.close()
    env.close()
    writers = {m.writer for m in gym_recording.load(tmp_path).writers}
    assert writers == {env.recording.writer_id, again.recording.writer_id}
    made = TraceRecordingWrapper(gymnasium.make("CartPole-v1"))  # (a new temporary directory)
    again = gymnasium.make(made.spec)
    assert again.directory == made.directory
    made.close()
    again.close()
    shutil.rmtree(made.directory)


@pytest.mark.parametrize("path", ["c", "python"])
def test_copies_and_pickles_are_refused_and_say_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    if path == "python":
        monkeypatch.setattr(steps, "speedups", None)
    elif steps.speedups is None:
        pytest.skip("gym_recording._speedups is not built")
    env = TraceRecordingWrapper(gymnasium.make("CartPole-v1"), tmp_path)
    env.reset(seed=0)
    env.step(1)
    for obj in (env, env.recording):
        for how in (copy.copy, copy.deepcopy, pickle.dumps):
            with pytest.raises(RecordingError, match="cannot be copied or pickled"):
                how(obj)
    env.step(0)  # the original goes on, nothing lost
    env.close()
    (ep,) = gym_recording.load(tmp_path)
    assert ep.length == 2 and ep.actions.tolist() == [1, 0]


# ------------------------------------------------------------------ replay


def test_replay_makes_the_env_with_its_recorded_kwargs(tmp_path: Path) -> None:
    d = _record(gymnasium.make("LunarLander-v3", continuous=True), tmp_path / "lunar")
    ep = gym_recording.load(d)[0]
    assert ep.actions.dtype == np.float32 and ep.actions.shape[1:] == (2,)
    assert ep.replay().reproduced


class _Knob(gymnasium.Env[Any, Any]):
    """Observes ``offset + scale(-3)`` (``scale`` a callable, which JSON cannot hold)."""

    observation_space = spaces.Box(-10, 10, (1,), np.float64)
    action_space = spaces.Discrete(2)

    def __init__(
        self, offset: float = 0.0, scale: Any = None, config: Any = None, heightmap: Any = None
    ) -> None:
        if config is not None:
            config["made"] = config.get("made", 0) + 1  # (an env that changes its config)
        self.value = np.full(1, offset + (scale(-3) if scale else 0), np.float64)

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        return self.value.copy(), {}

    def step(self, action: Any) -> Any:
        return self.value.copy(), 1.0, False, False, {}


def test_replay_keeps_the_kwargs_json_takes_and_names_the_others(tmp_path: Path) -> None:
    """A spec whose kwargs JSON refuses (a numpy bool, from a sweep table; a callable) keeps
    the kwargs it can, as values; a replay makes the env with them and names the others.
    (The kwargs were all kept as reprs, and the replay made the default 4x4 slippery map.)"""
    lake = gymnasium.make("FrozenLake-v1", map_name="8x8", is_slippery=np.bool_(False))
    ep = gym_recording.load(_record(lake, tmp_path / "numpy", seed=1))[0]
    assert ep.env_spec["kwargs"] == {"map_name": "8x8", "is_slippery": False}
    assert ep.replay(render=False).reproduced
    gymnasium.register("tests/Knob-v0", entry_point=f"{__name__}:_Knob")
    try:
        knob = gymnasium.make("tests/Knob-v0", offset=2.0, scale=abs, config={"a": [1]})
        ep = gym_recording.load(_record(knob, tmp_path / "callable", steps_=2))[0]
        assert ep.env_spec["kwargs"] == {"offset": 2.0, "config": {"a": [1], "made": 1}}
        assert ep.env_spec["kwargs_not_recorded"] == ["scale"]
        with pytest.warns(gym_recording.ReplayMismatchWarning) as caught:
            result = ep.replay(render=False)
        assert result.observations[0].tolist() == [2.0]  # (offset kept, scale not)
        assert result.message.endswith(
            "The environment was made without its arguments scale, which were not recorded "
            "(not plain JSON, or too large): pass them in env_kwargs."
        )
        assert str(caught[0].message) == result.message
        assert ep.replay(render=False, env_kwargs={"scale": abs}).reproduced
        clipped = gymnasium.wrappers.ClipReward(
            gymnasium.make("tests/Knob-v0", offset=2.0, scale=abs), 0.0, 0.5
        )
        ep2 = gym_recording.load(_record(clipped, tmp_path / "clipped", steps_=2))[0]
        assert ep2.env_spec["wrappers_not_recorded"] == ["ClipReward"]
        with pytest.warns(gym_recording.ReplayMismatchWarning):
            result = ep2.replay(render=False, env_kwargs={"scale": abs})  # (reward 1, not 0.5)
        assert result.message.endswith(
            "It was made without its wrappers ClipReward, which a summarised spec does not record."
        )
        assert ep.env_spec["kwargs"]["config"]["made"] == 1  # (the replays' envs had copies)
        gymnasium.registry.pop("tests/Knob-v0")
        gymnasium.register("tests/Knob-v0", entry_point=f"{__name__}:_Knob", kwargs={"scale": "x"})
        with pytest.raises(
            RecordingError, match=r"scale were not recorded \(not plain.*pass them in env_kw"
        ):
            ep.replay(render=False)  # (the registered "x" is not callable: make fails)
    finally:
        gymnasium.registry.pop("tests/Knob-v0", None)


def test_a_spec_holding_an_array_or_much_json_is_summarised_small(tmp_path: Path) -> None:
    """An array kwarg (a height map, say) is not recorded (it went in whole, as a list: a
    1900x1900 one made a 70 MB manifest the reader refused); nor is a list of more than
    64 KiB of JSON; a spec of more than 1 MiB is summarised."""
    gymnasium.register("tests/Knob-v0", entry_point=f"{__name__}:_Knob")
    try:
        cases = [
            (np.zeros((300, 300)), "array"),
            (list(range(200_000)), "list"),
            ({"goal": np.zeros(2)}, "nested array"),  # (it came back a list)
        ]
        for big, name in cases:
            knob = gymnasium.make("tests/Knob-v0", offset=1.0, heightmap=big)
            d = _record(knob, tmp_path / name, steps_=1)
            (manifest,) = d.glob("*.manifest.json")
            assert manifest.stat().st_size < 20_000
            spec = gym_recording.load(d)[0].env_spec
            assert spec["kwargs"] == {"offset": 1.0} and spec["kwargs_not_recorded"] == [
                "heightmap"
            ]
    finally:
        gymnasium.registry.pop("tests/Knob-v0", None)


def test_replay_of_a_spec_that_only_looks_like_a_summary_uses_the_id() -> None:
    """A file's spec is read as it is: one holding "kwargs_not_recorded" of the wrong types
    (not the writer's) is no summary, and the recorded id is made (it raised TypeError)."""
    env = gymnasium.make("CartPole-v1")
    obs, _ = env.reset(seed=3)
    spec = {"kwargs_not_recorded": "scale", "kwargs": ["x"]}
    ep = gym_recording.Episode(
        obs[None], np.zeros(0, np.int64), np.zeros(0), env_id="CartPole-v1", env_spec=spec, seed=3
    )
    assert ep.replay(render=False).reproduced


def test_replay_without_rendering_of_an_env_recorded_with_a_window_opens_none(
    tmp_path: Path,
) -> None:
    """``render=False`` replays with ``render_mode=None``, not the recorded mode: "human"
    drew each step in a window at the env's real-time rate ("rgb_array" stands for it here:
    "human" needs a display)."""
    pytest.importorskip("pygame")
    env = gymnasium.make("CartPole-v1", render_mode="rgb_array")
    d = _record(env, tmp_path / "human", steps_=5)
    spec = json.loads((next(d.glob("*.manifest.json"))).read_text())
    assert spec["env_spec"]["kwargs"] == {"render_mode": "rgb_array"}
    made: list[Any] = []
    real = gymnasium.make

    def make(*args: Any, **kwargs: Any) -> Any:
        made.append(kwargs.get("render_mode", "(recorded)"))
        return real(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gymnasium, "make", make)
        assert gym_recording.load(d)[0].replay(render=False).reproduced
        assert gym_recording.load(d)[0].replay().frames is not None
    assert made == [None, "rgb_array"]


def test_the_recording_s_metadata_is_a_copy_to_change(tmp_path: Path) -> None:
    """``rec.metadata`` is a deep copy (it was shallow: a change inside it showed in every
    later ``rec.metadata``). ``ep.env_spec`` is the writer's, shared, as documented: a
    read-only dict would cost each episode a copy, or break yaml.safe_dump of it."""
    d = tmp_path / "rec"
    env = TraceRecordingWrapper(gymnasium.make("CartPole-v1"), d, metadata={"run": {"tags": ["a"]}})
    env.reset(seed=0)
    env.step(0)
    env.close()
    rec = gym_recording.load(d)
    rec.metadata["run"]["tags"].append("b")
    assert rec.metadata == {"run": {"tags": ["a"]}}
    assert type(rec[0].env_spec) is dict and rec[0].env_spec is rec[0].env_spec


def test_replay_of_a_recording_of_a_recorded_env_records_nothing(tmp_path: Path) -> None:
    """Two recording wrappers: the outer one's env spec holds the inner one. A replay makes
    the env without it, so that it does not record into the inner recording's directory."""
    inner = TraceRecordingWrapper(gymnasium.make("CartPole-v1"), tmp_path / "inner")
    outer = TraceRecordingWrapper(gymnasium.wrappers.ClipReward(inner, -1, 1), tmp_path / "outer")
    outer.reset(seed=0)
    for _ in range(3):
        outer.step(0)
    outer.close()
    before = sorted(p.name for p in (tmp_path / "inner").iterdir())
    with gym_recording.load(tmp_path / "outer") as rec:
        wrappers = [w["name"] for w in rec[0].env_spec["additional_wrappers"]]
        assert wrappers == ["TraceRecordingWrapper", "ClipReward"]
        assert rec[0].replay().reproduced
    del rec
    gc.collect()  # (a recording made by the replay would write at its collection)
    assert sorted(p.name for p in (tmp_path / "inner").iterdir()) == before


def test_replay_of_atari_with_its_obs_type(tmp_path: Path) -> None:
    ale_py = pytest.importorskip("ale_py")
    gymnasium.register_envs(ale_py)
    d = _record(gymnasium.make("ALE/Breakout-v5", obs_type="grayscale"), tmp_path, steps_=20)
    ep = gym_recording.load(d)[0]
    assert ep.observations.shape == (ep.length + 1, 210, 160)
    assert ep.replay().reproduced


def test_replay_of_an_env_whose_package_is_not_imported_says_to_import_it(tmp_path: Path) -> None:
    """In a process that never imported minigrid, the recorded entry point is not imported (a
    recording can name any code): the error says to import minigrid; imported, the replay
    reproduces, and so does ``trust_env_spec=True``, which imports the entry point."""
    pytest.importorskip("minigrid")
    code = (
        "import sys, gymnasium, minigrid, gym_recording\n"
        "env = gym_recording.TraceRecordingWrapper(gymnasium.make('MiniGrid-Empty-5x5-v0'), "
        "sys.argv[1])\n"
        "env.reset(seed=2)\n"
        "for a in [2, 2, 1, 2]: env.step(a)\n"
        "env.close()\n"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True)
    replay = (
        "import sys, gym_recording\n"
        "ep = gym_recording.load(sys.argv[1])[0]\n"
        "try:\n"
        "    ep.replay()\n"
        "except gym_recording.RecordingError as e:\n"
        "    print('refused' if 'import the package that registers it' in str(e) else e)\n"
        "print('minigrid' in sys.modules)\n"
        "r = ep.replay(trust_env_spec=True)\n"
        "print(r.reproduced, 'minigrid' in sys.modules)\n"
        "import minigrid\n"
        "print(ep.replay().reproduced)\n"
    )
    got = subprocess.run(
        [sys.executable, "-c", replay, str(tmp_path)], capture_output=True, text=True, check=True
    )
    assert got.stdout.split() == ["refused", "False", "True", "True", "True"]


def test_replay_of_an_env_whose_package_is_missing_names_it(tmp_path: Path) -> None:
    """An env whose entry point's package is not installed (ale_py, minigrid) says to
    install it, by its name on PyPI's usual spelling."""
    spec = gymnasium.envs.registration.EnvSpec("Gone-v0", entry_point="gone_pkg.envs:GoneEnv")
    with gym_recording.TraceRecording(tmp_path, env_spec=json.loads(spec.to_json())) as w:
        w.add_reset(np.zeros(2))
        w.add_step(0, np.ones(2), 1.0, terminated=True)
    with pytest.raises(RecordingError, match="'Gone-v0' is not registered in this process"):
        gym_recording.load(tmp_path)[0].replay()
    with pytest.raises(RecordingError) as caught:
        gym_recording.load(tmp_path)[0].replay(trust_env_spec=True)
    said = str(caught.value)
    assert "cannot make environment 'Gone-v0' to replay episode 0" in said
    assert said.endswith("install the package that provides it (`pip install gone-pkg`, say)")


def test_replay_names_no_package_to_install_when_it_is_installed(tmp_path: Path) -> None:
    """A module missing from an installed package (a spec of another gymnasium version)
    does not ask to install that package."""
    entry = "gymnasium.envs.classic_control.newer_env:NewerEnv"
    spec = gymnasium.envs.registration.EnvSpec("Newer-v0", entry_point=entry)
    with gym_recording.TraceRecording(tmp_path, env_spec=json.loads(spec.to_json())) as w:
        w.add_reset(np.zeros(2))
    with pytest.raises(RecordingError) as caught:
        gym_recording.load(tmp_path)[0].replay(trust_env_spec=True)
    assert "newer_env" in str(caught.value) and "pip install" not in str(caught.value)


class _FailsOnStep(gymnasium.Env[Any, Any]):
    """An env of this module (made by its entry point), whose step fails on request."""

    metadata = {"render_modes": ["rgb_array"]}  # noqa: RUF012
    observation_space = spaces.Box(0, 1, (2,), np.float32)
    action_space = spaces.Discrete(2)
    fail = False

    def __init__(self, render_mode: str | None = None) -> None:
        self.render_mode = render_mode

    def render(self) -> Any:
        return np.zeros((4, 4, 3), np.uint8)

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {"x": 0.0, "pos": np.zeros(2)}

    def step(self, action: Any) -> Any:
        if _FailsOnStep.fail:
            raise RuntimeError("the simulator crashed")
        return np.ones(2, np.float32), 0.0, False, False, {"x": 1.5, "pos": np.ones(2)}


def test_an_env_error_during_replay_is_a_recording_error(tmp_path: Path) -> None:
    gymnasium.register("tests/FailsOnStep-v0", entry_point=f"{__name__}:_FailsOnStep")
    try:
        _record(gymnasium.make("tests/FailsOnStep-v0"), tmp_path, steps_=3)
        _FailsOnStep.fail = True
        with pytest.raises(RecordingError, match="the simulator crashed"):
            gym_recording.load(tmp_path)[0].replay()
    finally:
        _FailsOnStep.fail = False
        gymnasium.registry.pop("tests/FailsOnStep-v0", None)


def test_replay_refuses_arguments_it_cannot_use_before_making_the_env(tmp_path: Path) -> None:
    """A tolerance that is not a number was a RecordingError blaming the env ("failed at
    reset"), env_kwargs that are not a dict a bare TypeError out of dict()."""
    ep = gym_recording.load(_record(gymnasium.make("CartPole-v1"), tmp_path, steps_=3))[0]
    for kwargs, error, said in (
        ({"rtol": "x"}, TypeError, "expected rtol to be a number, got str"),
        ({"atol": -1.0}, ValueError, "expected atol to be a number of at least 0, got -1.0"),
        ({"atol": float("nan")}, ValueError, "expected atol to be a number of at least 0"),
        ({"env_kwargs": [1]}, TypeError, "expected env_kwargs to be a dict, got list"),
    ):
        with pytest.raises(error, match=re.escape(said)):
            ep.replay(render=False, **kwargs)


def _spec_recording(path: Path, spec: dict[str, Any], env_id: str | None = None) -> Path:
    """A recording of one CartPole step whose manifest holds ``spec`` (as a hostile file may)."""
    env = gymnasium.make("CartPole-v1")
    obs, _ = env.reset(seed=0)
    obs2 = env.step(0)[0]
    with TraceRecording(path, env_id=env_id or spec.get("id"), env_spec=spec) as w:
        w.add_reset(obs, seed=0)
        w.add_step(0, obs2, 1.0)
    return path


def test_replay_runs_no_code_a_recording_names_unless_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recording's spec names code that ``gymnasium.make`` imports and calls: an entry point
    (``os:system`` ran a shell command), wrappers, an id ``"module:Name-v0"``. Without
    ``trust_env_spec`` none of it runs and the error says why and what to do."""
    (tmp_path / "planted_mod.py").write_text(
        "import pathlib\n"
        f"pathlib.Path({str(tmp_path / 'IMPORTED')!r}).touch()\n"
        "def Env(**kwargs):\n"
        f"    pathlib.Path({str(tmp_path / 'CALLED')!r}).touch()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    cartpole = json.loads(gymnasium.spec("CartPole-v1").to_json())
    hostile = {
        "entry point": ({**cartpole, "entry_point": "planted_mod:Env"}, None),
        "unregistered": ({**cartpole, "id": "Planted-v0", "entry_point": "planted_mod:Env"}, None),
        "id": ({}, "planted_mod:Planted-v0"),
        "summary id": ({"id": "planted_mod:P-v0", "kwargs": {}, "kwargs_not_recorded": []}, None),
        "wrapper": (
            {
                **cartpole,
                "additional_wrappers": [
                    {"name": "W", "entry_point": "planted_mod:Env", "kwargs": {}}
                ],
            },
            None,
        ),
        "gymnasium wrapper that writes": (
            {
                **cartpole,
                "additional_wrappers": [
                    {
                        "name": "RecordVideo",
                        "entry_point": "gymnasium.wrappers.rendering:RecordVideo",
                        "kwargs": {"video_folder": str(tmp_path / "videos")},
                    }
                ],
            },
            None,
        ),
    }
    for name, (spec, env_id) in hostile.items():
        ep = gym_recording.load(_spec_recording(tmp_path / name, spec, env_id))[0]
        with pytest.raises(RecordingError, match="if you trust whoever made the recording"):
            ep.replay(render=False)
        assert not (tmp_path / "IMPORTED").exists(), name
        assert not (tmp_path / "videos").exists(), name
    with pytest.raises(RecordingError) as caught:
        gym_recording.load(tmp_path / "entry point")[0].replay()
    said = str(caught.value)
    assert (
        "'CartPole-v1' is recorded with the entry point 'planted_mod:Env', but registered here "
        "with 'gymnasium.envs.classic_control.cartpole:CartPoleEnv'"
    ) in said and "pass env_id='CartPole-v1' to replay the env registered here" in said
    assert "import" not in said.split("inside none but")[1]  # (no module the file names)
    with pytest.raises(RecordingError):  # (trusted: made as recorded; it makes no env)
        gym_recording.load(tmp_path / "unregistered")[0].replay(trust_env_spec=True)
    assert (tmp_path / "IMPORTED").exists() and (tmp_path / "CALLED").exists()
    # Gymnasium's own wrappers that keep to the env are made, as recorded.
    clip = {"name": "ClipReward", "entry_point": "gymnasium.wrappers:ClipReward"}
    spec = {**cartpole, "additional_wrappers": [{**clip, "kwargs": {"max_reward": 0.5}}]}
    with pytest.warns(gym_recording.ReplayMismatchWarning, match="reward"):
        result = gym_recording.load(_spec_recording(tmp_path / "clip", spec))[0].replay(
            render=False
        )
    assert result.first_mismatch == 1  # (0.5, where 1.0 was recorded: the wrapper was made)


# ------------------------------------------------------------------ spaces


def test_minigrid_keeps_its_known_space_parts_and_exports_to_minari(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("minigrid")
    minari = pytest.importorskip("minari")
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "datasets"))
    d = _record(gymnasium.make("MiniGrid-Empty-5x5-v0"), tmp_path / "rec", steps_=15)
    rec = gym_recording.load(d)
    space = rec.observation_space
    assert isinstance(space, spaces.Dict) and isinstance(space["mission"], UnknownSpace)
    assert space["image"] == spaces.Box(0, 255, (7, 7, 3), np.uint8)
    export(d, to="minari", out="tests/minigrid-v0")
    dataset = minari.load_dataset("tests/minigrid-v0")
    assert isinstance(dataset.observation_space["mission"], spaces.Text)
    (got,) = list(dataset.iterate_episodes())
    ep = rec[0]
    assert got.observations["mission"] == ep.observations["mission"]
    assert np.array_equal(got.observations["image"], ep.observations["image"])


def test_a_text_space_of_every_character_is_stored_compactly(tmp_path: Path) -> None:
    chars = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    space = spaces.Text(3, charset=chars)
    with TraceRecording(tmp_path, observation_space=space) as rec:
        rec.add_reset("a")
        rec.add_step(0, "b", 1.0)
    manifest = next(tmp_path.glob("*.manifest.json"))
    assert manifest.stat().st_size < 4000
    assert gym_recording.load(tmp_path).observation_space == space


# ------------------------------------------------------------------ gym-recording info


def _info(directory: Path) -> str:
    got = subprocess.run(
        [sys.executable, "-m", "gym_recording", "info", str(directory)],
        capture_output=True,
        text=True,
        check=True,
    )
    return got.stdout


def test_info_counts_an_episode_both_terminated_and_truncated_once(tmp_path: Path) -> None:
    with TraceRecording(tmp_path) as rec:
        for _ in range(3):
            rec.add_reset(np.zeros(2))
            rec.add_step(0, np.ones(2), 1.0, terminated=True, truncated=True)
        rec.add_reset(np.zeros(2))  # cut by the close
    line = next(x for x in _info(tmp_path).splitlines() if x.startswith("terminated"))
    assert line.split()[-5:] == ["3", "/", "3", "/", "1"]


def test_info_shows_every_writer_of_a_vector_recording(tmp_path: Path) -> None:
    venv = TraceRecordingVectorWrapper(gymnasium.make_vec("CartPole-v1", num_envs=3), tmp_path)
    venv.reset(seed=0)
    for _ in range(5):
        venv.step(venv.action_space.sample())
    venv.close()
    text = _info(tmp_path)
    for i in range(3):
        assert f"'index': {i}" in text


# ------------------------------------------------------------------ vector envs


def _worker_env(directory: str) -> Any:
    return TraceRecordingWrapper(gymnasium.make("CartPole-v1"), directory)


def test_recorders_inside_async_workers_leave_no_empty_writer(tmp_path: Path) -> None:
    """AsyncVectorEnv makes one env in the parent to read the spaces and closes it unused."""
    import functools

    make = functools.partial(_worker_env, str(tmp_path))
    venv = gymnasium.vector.AsyncVectorEnv([make, make])
    venv.reset(seed=0)
    for _ in range(20):
        venv.step(venv.action_space.sample())
    venv.close()
    rec = gym_recording.load(tmp_path)
    assert len(rec.writers) == 2
    assert all(sum(1 for ep in rec if ep.writer == m.writer) for m in rec.writers)


def test_sub_env_specs_under_a_vector_wrapper(tmp_path: Path) -> None:
    venv = gymnasium.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync")
    venv = gymnasium.wrappers.vector.RecordEpisodeStatistics(venv)
    wrapped = TraceRecordingVectorWrapper(venv, tmp_path)
    wrapped.reset(seed=0)
    wrapped.step(wrapped.action_space.sample())
    wrapped.close()
    for ep in gym_recording.load(tmp_path):
        assert ep.env_spec["id"] == "CartPole-v1"
        assert "num_envs" not in ep.env_spec["kwargs"]


# ------------------------------------------------------------------ Minari


@pytest.fixture
def minari(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    module = pytest.importorskip("minari")
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "datasets"))
    return module


@pytest.mark.parametrize("act", ["box_f32", "multibinary", "tuple", "dict", "discrete"])
def test_zero_step_episodes_do_not_fail_the_export(tmp_path: Path, minari: Any, act: str) -> None:
    env = SpaceEnv(OBSERVATION_SPACES["box_rank1_f32"], ACTION_SPACES[act], min_len=1, max_len=3)
    with TraceRecordingWrapper(env, tmp_path / "rec") as w:
        run_episodes(w, 3, seed=1)
        w.reset(seed=9)  # a zero-step episode, cut by the close
    rec = gym_recording.load(tmp_path / "rec")
    assert rec[-1].length == 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        export(tmp_path / "rec", to="minari", out=f"tests/zero-{act}-v0")
    dataset = minari.load_dataset(f"tests/zero-{act}-v0")
    stored = [ep for ep in rec if ep.length or act == "discrete"]
    assert dataset.total_episodes == len(stored)
    lossy = [str(w.message) for w in caught if issubclass(w.category, LossyExportWarning)]
    assert bool(lossy) == (act != "discrete") and all("zero-step" in m for m in lossy)
    for got, ep in zip(dataset.iterate_episodes(), stored, strict=True):
        assert np.array_equal(got.observations, ep.observations)
        assert np.array_equal(got.rewards, ep.rewards)


def test_numpy_options_infos_times_metadata_and_spec_go_there_and_back(
    tmp_path: Path, minari: Any
) -> None:
    gymnasium.register("tests/Unregistered-v0", entry_point=f"{__name__}:_FailsOnStep")
    try:
        env = gymnasium.make("tests/Unregistered-v0")
    finally:
        gymnasium.registry.pop("tests/Unregistered-v0")  # unknown to the exporting process
    options = {"level": np.int64(3), "scale": np.float32(0.5), "tags": ("a", "b")}
    with TraceRecordingWrapper(env, tmp_path / "rec", record_infos=True, metadata={"run": 7}) as w:
        for e in range(2):
            w.reset(seed=e, options=options)
            for _ in range(3):
                w.step(1)
    rec = gym_recording.load(tmp_path / "rec")
    with warnings.catch_warnings():
        warnings.simplefilter("error", LossyExportWarning)  # everything fits
        export(tmp_path / "rec", to="minari", out="tests/full-v0")
    dataset = minari.load_dataset("tests/full-v0")
    assert dataset.spec.env_spec is not None and dataset.spec.env_spec.id == "tests/Unregistered-v0"
    recovered = dataset.recover_environment()  # made from the recorded entry point
    assert recovered.observation_space == env.observation_space
    recovered.close()
    metas = list(dataset.storage.get_episode_metadata(range(2)))
    assert metas[0]["options"] == {"level": 3, "scale": 0.5, "tags": ["a", "b"]}
    assert metas[1]["gym_recording_started_at"] == rec[1].started_at
    assert dataset.storage.metadata["gym_recording"]["metadata"] == {"run": 7}
    back = gym_recording.load(import_minari("tests/full-v0", tmp_path / "back"))
    assert back.metadata["run"] == 7 and back.metadata["source"] == "minari"
    for a, b in zip(rec, back, strict=True):
        assert np.array_equal(a.observations, b.observations) and a.seed == b.seed
        assert (a.started_at, a.ended_at) == (b.started_at, b.ended_at)
        assert b.infos is not None and len(b.infos) == len(a.infos or []) == a.length + 1
        assert [i["x"] for i in b.infos] == [i["x"] for i in a.infos or []]
        assert np.array_equal(b.infos[-1]["pos"], a.infos[-1]["pos"])  # type: ignore[index]
        assert b.options == a.options == {"level": 3, "scale": 0.5, "tags": ("a", "b")}
        assert [type(v) for v in b.options.values()] == [np.int64, np.float32, tuple]
    assert json.dumps(back[0].env_spec)  # (the spec came back)


def test_what_minari_cannot_hold_is_named_in_one_warning(tmp_path: Path, minari: Any) -> None:
    d = tmp_path / "rec"
    with TraceRecording(d, record_infos=True) as rec:
        rec.add_reset(np.zeros(2, np.float32), options={"raw": b"\x00\x01"}, info={"a": 1})
        rec.add_step(0, np.ones(2, np.float32), 1.0, info={"b": 2}, terminated=True)
        rec.add_reset(np.zeros(2, np.float32), info={"a": 1})
        rec.add_step(1, np.ones(2, np.float32), 1.0, info={"a": 2}, truncated=True)
    with pytest.warns(LossyExportWarning) as caught:
        export(d, to="minari", out="tests/lossy-v0")
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "reset options that are not a JSON object" in message
    # Arrow storage holds one layout of infos: the first episode's cannot be stored (keys
    # that change between steps), so none are, said once (the second's alone read back the
    # first's as NaN, which is not what it had).
    assert "the infos (their keys or types differ between episodes" in message
    assert "keys that change between steps" not in message
    dataset = minari.load_dataset("tests/lossy-v0")
    assert [ep.infos for ep in dataset.iterate_episodes()] == [{}, {}]


def test_minari_keeps_the_info_keys_of_every_step(tmp_path: Path, minari: Any) -> None:
    """Infos whose reset info has fewer keys than its steps' (MuJoCo's) keep the keys every
    info has; the others are named in the warning."""
    d = tmp_path / "rec"
    with TraceRecording(d, record_infos=True) as rec:
        for e in range(2):
            rec.add_reset(np.zeros(2, np.float32), info={"x_position": 0.5 + e})
            for t in range(3):
                info = {"x_position": float(t), "x_velocity": 2.0 * t, "reward_run": 1.0}
                rec.add_step(0, np.ones(2, np.float32), 1.0, info=info, terminated=t == 2)
    with pytest.warns(LossyExportWarning, match="reward_run, x_velocity"):
        export(d, to="minari", out="tests/mujoco-like-v0")
    dataset = minari.load_dataset("tests/mujoco-like-v0")
    for e, ep in enumerate(dataset.iterate_episodes()):
        assert set(ep.infos) == {"x_position"}
        assert ep.infos["x_position"].tolist() == [0.5 + e, 0.0, 1.0, 2.0]
