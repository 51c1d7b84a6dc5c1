"""``TraceRecordingVectorWrapper``: each sub-env's episodes equal the ones it records alone.

Every test drives a vector env and, beside it, one plain env per sub-env fed the same seeds and
actions by the rules of the autoreset mode (https://farama.org/Vector-Autoreset-Mode): under
NEXT_STEP the step after an episode's end only resets; under SAME_STEP the ending step also
resets; under DISABLED only ``reset(options={"reset_mask": ...})`` resets. The plain envs are
recorded with ``TraceRecordingWrapper``; the episodes must be equal.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv
from gymnasium.vector.utils import iterate
from gymnasium.wrappers.vector import DictInfoToList

import gym_recording
from gym_recording.wrappers import TraceRecordingVectorWrapper, TraceRecordingWrapper

MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]


class DictTupleEnv(gymnasium.Env[dict[str, Any], tuple[int, np.ndarray]]):
    """Dict observations, Tuple actions, random episode ends, and an info per step."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012

    def __init__(self) -> None:
        self.observation_space = spaces.Dict(
            {
                "pos": spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float32),
                "count": spaces.Discrete(100),
            }
        )
        self.action_space = spaces.Tuple(
            (spaces.Discrete(3), spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32))
        )
        self._pos = np.zeros(2, np.float32)
        self._t = 0

    def _obs(self) -> dict[str, Any]:
        return {"pos": self._pos.copy(), "count": self._t}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        self._pos = self.np_random.normal(size=2).astype(np.float32)
        self._t = 0
        return self._obs(), {"t": 0, "tag": "reset"}

    def step(
        self, action: tuple[int, np.ndarray]
    ) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        self._t += 1
        self._pos = (self._pos + np.asarray(action[1], np.float32) * (int(action[0]) - 1)).astype(
            np.float32
        )
        reward = float(self.np_random.normal())
        terminated = bool(self.np_random.random() < 0.2)
        return self._obs(), reward, terminated, False, {"t": self._t, "tag": "step"}


def make_cartpole() -> gymnasium.Env[Any, Any]:
    return gymnasium.make("CartPole-v1", max_episode_steps=12)


def make_dict_env() -> gymnasium.Env[Any, Any]:
    return gymnasium.wrappers.TimeLimit(DictTupleEnv(), max_episode_steps=7)


def drive(
    venv: Any,
    make_env: Callable[[], gymnasium.Env[Any, Any]],
    ref_dirs: list[Path],
    mode: AutoresetMode,
    *,
    steps: int,
    seed: int,
    cut_at: int | None = None,
    record_infos: bool = False,
) -> None:
    """Run ``venv`` (already wrapped) and the plain sub-env replicas side by side."""
    n = venv.num_envs
    refs = [TraceRecordingWrapper(make_env(), str(d), record_infos=record_infos) for d in ref_dirs]
    venv.reset(seed=seed)
    for i, r in enumerate(refs):
        r.reset(seed=seed + i)
    ended = [False] * n  # the replica's last step ended its episode
    venv.action_space.seed(seed)
    next_seed = 1000
    for t in range(steps):
        actions = venv.action_space.sample()
        _, _, terms, truncs, _ = venv.step(actions)
        for i, (r, a) in enumerate(zip(refs, iterate(venv.action_space, actions), strict=True)):
            if ended[i] and mode == AutoresetMode.NEXT_STEP:
                r.reset()
                ended[i] = False
                continue
            _, _, term, trunc, _ = r.step(a)
            assert (term, trunc) == (bool(terms[i]), bool(truncs[i]))
            ended[i] = term or trunc
            if ended[i] and mode == AutoresetMode.SAME_STEP:
                r.reset()
                ended[i] = False
        mask = np.array(ended, dtype=bool)
        if cut_at is not None and t == cut_at:
            mask[0] = True  # a partial reset in mid-episode: the episode is cut
        if mode == AutoresetMode.DISABLED and mask.any():
            seeds = [next_seed + i if mask[i] and i % 2 == 0 else None for i in range(n)]
            next_seed += n
            options = {"reset_mask": mask}
            venv.reset(seed=seeds, options=options)
            assert "reset_mask" in options  # the caller's dict is not emptied
            for i in np.flatnonzero(mask):
                refs[i].reset(seed=seeds[i])
                ended[i] = False
        elif cut_at is not None and t == cut_at:
            only_first = np.arange(n) == 0
            venv.reset(seed=[77] + [None] * (n - 1), options={"reset_mask": only_first})
            refs[0].reset(seed=77)
            ended[0] = False
    venv.close()
    for r in refs:
        r.close()


def assert_field_equal(a: Any, b: Any) -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and sorted(a) == sorted(b)  # key order is not compared
        for k in a:
            assert_field_equal(a[k], b[k])
    elif isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_field_equal(x, y)
    else:
        assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


def episodes_by_subenv(directory: Path, n: int) -> list[list[gym_recording.Episode]]:
    with gym_recording.load(directory) as rec:
        index = {m.writer: m.metadata["vector_env"]["index"] for m in rec.writers}
        assert sorted(index.values()) == list(range(n))
        out: list[list[gym_recording.Episode]] = [[] for _ in range(n)]
        for ep in rec:
            out[index[ep.writer]].append(ep)
    return out


def assert_same_episodes(directory: Path, ref_dirs: list[Path], *, infos: bool = False) -> int:
    """Each sub-env's episodes equal its replica's; returns the number of episodes."""
    got = episodes_by_subenv(directory, len(ref_dirs))
    total = 0
    for i, ref_dir in enumerate(ref_dirs):
        with gym_recording.load(ref_dir) as ref:
            want = list(ref)
        assert len(got[i]) == len(want), f"sub-env {i}"
        for g, w in zip(got[i], want, strict=True):
            assert_field_equal(g.observations, w.observations)
            assert_field_equal(g.actions, w.actions)
            assert_field_equal(g.rewards, w.rewards)
            assert (g.terminated, g.truncated, g.seed) == (w.terminated, w.truncated, w.seed)
            if infos:
                assert g.infos is not None and w.infos is not None
                assert [(d["t"], d["tag"]) for d in g.infos] == [
                    (d["t"], d["tag"]) for d in w.infos
                ]
        total += len(want)
    return total


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize(
    "make_env", [make_cartpole, make_dict_env], ids=["cartpole_box", "dict_tuple"]
)
def test_sync_vector_episodes_equal_subenvs_alone(
    tmp_path: Path, mode: AutoresetMode, make_env: Callable[[], gymnasium.Env[Any, Any]]
) -> None:
    """Sync vector env: every sub-env's recorded episodes equal the same env recorded alone."""
    n = 3
    venv = TraceRecordingVectorWrapper(
        SyncVectorEnv([make_env] * n, autoreset_mode=mode), str(tmp_path / "vec")
    )
    assert venv.autoreset_mode == mode
    refs = [tmp_path / f"ref{i}" for i in range(n)]
    drive(venv, make_env, refs, mode, steps=60, seed=5, cut_at=17)
    total = assert_same_episodes(tmp_path / "vec", refs)
    assert total >= 3 * n  # several episodes per sub-env, ended in every way


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_async_vector_episodes_equal_subenvs_alone(tmp_path: Path, mode: AutoresetMode) -> None:
    """Async vector env (subprocesses): the same equality, with Dict/Tuple spaces and infos."""
    n = 2
    venv = TraceRecordingVectorWrapper(
        AsyncVectorEnv([make_dict_env] * n, autoreset_mode=mode),
        str(tmp_path / "vec"),
        record_infos=True,
    )
    refs = [tmp_path / f"ref{i}" for i in range(n)]
    drive(venv, make_dict_env, refs, mode, steps=40, seed=11, record_infos=True)
    assert assert_same_episodes(tmp_path / "vec", refs, infos=True) >= 2 * n


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_infos_given_as_a_list_of_each_sub_envs_are_recorded(
    tmp_path: Path, mode: AutoresetMode
) -> None:
    """Under ``DictInfoToList`` (infos as a list of each sub-env's dict) the same episodes
    and infos are recorded as without it (the reset raised AttributeError, and every step)."""
    n = 2
    venv = TraceRecordingVectorWrapper(
        DictInfoToList(SyncVectorEnv([make_dict_env] * n, autoreset_mode=mode)),
        str(tmp_path / "vec"),
        record_infos=True,
    )
    refs = [tmp_path / f"ref{i}" for i in range(n)]
    drive(venv, make_dict_env, refs, mode, steps=30, seed=3, record_infos=True)
    assert_same_episodes(tmp_path / "vec", refs, infos=True)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_sync_infos_per_subenv(tmp_path: Path, mode: AutoresetMode) -> None:
    """With record_infos, each episode has its reset info then one info per step, unbatched."""
    n = 2
    venv = TraceRecordingVectorWrapper(
        SyncVectorEnv([make_dict_env] * n, autoreset_mode=mode),
        str(tmp_path / "vec"),
        record_infos=True,
    )
    refs = [tmp_path / f"ref{i}" for i in range(n)]
    drive(venv, make_dict_env, refs, mode, steps=30, seed=3, record_infos=True)
    assert_same_episodes(tmp_path / "vec", refs, infos=True)


def test_no_reset_observation_recorded_as_transition(tmp_path: Path) -> None:
    """NEXT_STEP: the reset step's zero reward never appears; every step's obs follows its own."""
    venv = TraceRecordingVectorWrapper(
        SyncVectorEnv([make_cartpole] * 2), str(tmp_path / "vec"), batch_bytes=500
    )
    venv.reset(seed=0)
    for _ in range(80):
        venv.step(np.array([1, 1]))  # pushing right ends episodes quickly
    venv.close()
    with gym_recording.load(tmp_path / "vec") as rec:
        assert len(rec) >= 4
        for ep in rec:
            # CartPole pays 1.0 for every real step; a recorded reset step would pay 0.0
            assert ep.rewards.tolist() == [1.0] * ep.length
            assert ep.observations.shape == (ep.length + 1, 4)
            # observations follow the dynamics: x moves by about tau * x_dot each step
            x, x_dot = ep.observations[:, 0], ep.observations[:, 1]
            np.testing.assert_allclose(x[1:], x[:-1] + 0.02 * x_dot[:-1], atol=1e-5)
    for eps in episodes_by_subenv(tmp_path / "vec", 2):
        assert all(ep.terminated or ep.truncated for ep in eps[:-1])
        assert not (eps[-1].terminated or eps[-1].truncated)  # cut by close()


def test_seeds_per_subenv_and_metadata(tmp_path: Path) -> None:
    """reset(seed=s) records s + i for sub-env i, a list records its items, autoresets none."""
    venv = TraceRecordingVectorWrapper(
        SyncVectorEnv([make_cartpole] * 3),
        str(tmp_path),
        metadata={"run": "seeds"},
    )
    venv.reset(seed=10)
    venv.step(venv.action_space.sample())
    venv.reset(seed=[1, None, 3], options={"level": 2})
    venv.step(venv.action_space.sample())
    venv.close()
    got = episodes_by_subenv(tmp_path, 3)
    assert [[ep.seed for ep in eps] for eps in got] == [[10, 1], [11, None], [12, 3]]
    assert [eps[1].options for eps in got] == [{"level": 2}] * 3
    with gym_recording.load(tmp_path) as rec:
        assert rec.env_id == "CartPole-v1"
        for m in rec.writers:
            assert m.metadata["run"] == "seeds"
            assert m.metadata["vector_env"]["num_envs"] == 3
            assert m.metadata["vector_env"]["autoreset_mode"] == "NextStep"


def test_a_vector_env_without_sub_envs_records_no_seed_it_cannot_know(tmp_path: Path) -> None:
    """CartPole's own vector env (make_vec's default, "vector_entry_point") draws every
    sub-env's start from one generator: no sub-env has the seed s + i, so the episodes
    record none. Their spec is the vector env's without its vector arguments (num_envs,
    ...), its max_episode_steps a field again: the spec of one sub-env, from which
    gym.make (and Minari's recover_environment) make it, with the env's own kwargs."""
    envs = gymnasium.make_vec("CartPole-v1", num_envs=2, sutton_barto_reward=True)
    assert envs.unwrapped.spec.kwargs["vectorization_mode"] == "vector_entry_point"
    with TraceRecordingVectorWrapper(envs, tmp_path) as venv:
        obs, _ = venv.reset(seed=0)
        for _ in range(3):
            venv.step(np.array([0, 1]))
    got = episodes_by_subenv(tmp_path, 2)
    assert [[ep.seed for ep in eps] for eps in got] == [[None], [None]]
    for i, (ep,) in enumerate(got):
        assert (ep.env_id, ep.length) == ("CartPole-v1", 3)
        assert ep.env_spec["kwargs"] == {"sutton_barto_reward": True}
        assert ep.env_spec["max_episode_steps"] == 500
        np.testing.assert_array_equal(ep.observations[0], obs[i], strict=True)
    spec = gymnasium.envs.registration.EnvSpec.from_json(json.dumps(got[0][0].env_spec))
    one = gymnasium.make(spec)
    assert one.spec.max_episode_steps == 500 and one.unwrapped._sutton_barto_reward
    with pytest.warns(gym_recording.ReplayMismatchWarning, match="without a seed"):
        assert not got[0][0].replay(render=False).reproduced


def test_partial_reset_leaves_caller_options_intact(tmp_path: Path) -> None:
    """The reset_mask the caller passes stays in its dict, and only masked sub-envs restart.

    Each restarted sub-env's options are recorded as the sub-env got them: the rest of the
    dict, here ``{}`` (not ``None``).
    """
    venv = TraceRecordingVectorWrapper(SyncVectorEnv([make_cartpole] * 2), str(tmp_path))
    venv.reset(seed=0)
    venv.step(np.array([0, 0]))
    options = {"reset_mask": np.array([False, True])}
    venv.reset(options=options)
    assert options["reset_mask"].tolist() == [False, True]
    venv.step(np.array([0, 0]))
    venv.close()
    got = episodes_by_subenv(tmp_path, 2)
    assert [[ep.length for ep in eps] for eps in got] == [[2], [1, 1]]
    assert got[1][1].options == {}  # (what Gymnasium hands the sub-env: the dict, mask popped)


def test_episode_trigger_per_subenv(tmp_path: Path) -> None:
    """episode_trigger is called with each sub-env's own episode index."""
    calls: list[int] = []

    def trigger(k: int) -> bool:
        calls.append(k)
        return k % 2 == 1

    venv = TraceRecordingVectorWrapper(
        SyncVectorEnv([make_cartpole] * 2, autoreset_mode=AutoresetMode.SAME_STEP),
        str(tmp_path),
        episode_trigger=trigger,
    )
    venv.reset(seed=1)
    for _ in range(60):
        venv.step(np.array([1, 0]))
    venv.close()
    got = episodes_by_subenv(tmp_path, 2)
    assert all(len(eps) >= 1 for eps in got)
    assert sorted(set(calls)) == list(range(max(calls) + 1))
    assert all(ep.seed is None for eps in got for ep in eps)  # episode 0 (seeded) skipped


def test_default_directory_and_repr(tmp_path: Path) -> None:
    """Without a directory the sub-envs share one fresh temporary directory."""
    with TraceRecordingVectorWrapper(SyncVectorEnv([make_cartpole] * 2)) as venv:
        venv.reset(seed=0)
        venv.step(np.array([0, 1]))
        assert "TraceRecordingVectorWrapper" in repr(venv)
    assert {r.directory for r in venv.recordings} == {venv.directory}
    with gym_recording.load(venv.directory) as rec:
        assert len(rec) == 2


def test_a_single_env_is_refused_with_the_wrapper_to_use(tmp_path: Path) -> None:
    """A single env given to the vector wrapper is a TypeError naming TraceRecordingWrapper
    (as a vector env given to TraceRecordingWrapper names the vector wrapper), before
    anything is written."""
    env = make_cartpole()
    with pytest.raises(TypeError, match=r"TraceRecordingWrapper\(env, directory\)") as caught:
        TraceRecordingVectorWrapper(env, tmp_path / "v")
    assert "got TimeLimit" in str(caught.value)
    assert not (tmp_path / "v").exists()
    env.close()


def test_same_step_without_final_obs_is_an_error(tmp_path: Path) -> None:
    """A vector env that claims SAME_STEP but drops final_obs is refused, not recorded wrong."""

    class Broken(gymnasium.vector.VectorWrapper):  # type: ignore[type-arg]
        def step(self, actions: Any) -> Any:
            obs, rew, term, trunc, info = self.env.step(actions)
            info.pop("final_obs", None)
            info.pop("_final_obs", None)
            return obs, rew, term, trunc, info

    venv = TraceRecordingVectorWrapper(
        Broken(SyncVectorEnv([make_cartpole], autoreset_mode=AutoresetMode.SAME_STEP)),
        str(tmp_path),
    )
    venv.reset(seed=0)
    with pytest.raises(gym_recording.RecordingError, match="final_obs"):
        for _ in range(100):
            venv.step(np.array([1]))
    venv.close()


class _Counter(gymnasium.vector.VectorEnv):  # type: ignore[type-arg]
    """3 sub-envs whose observations count the steps (episodes of 5); step 12's result is
    ``bad`` of what it would be (an env's bug)."""

    def __init__(self, mode: AutoresetMode, bad: Callable[[list[Any]], list[Any]]) -> None:
        self.num_envs, self.bad, self.t = 3, bad, 0
        self.single_observation_space = spaces.Box(-1e9, 1e9, (2,), np.float32)
        self.single_action_space = spaces.Discrete(2)
        self.observation_space = gymnasium.vector.utils.batch_space(
            self.single_observation_space, 3
        )
        self.action_space = gymnasium.vector.utils.batch_space(self.single_action_space, 3)
        self.metadata = {"autoreset_mode": mode}

    def reset(self, *, seed: Any = None, options: Any = None) -> Any:
        self.t = 0
        return np.zeros((3, 2), np.float32), {}

    def step(self, actions: Any) -> Any:
        self.t += 1
        obs = np.full((3, 2), self.t, np.float32)
        term = np.full(3, self.t % 5 == 0)
        info = {}
        if self.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP and term.any():
            info = {"final_obs": obs - 0.5, "_final_obs": term}
        result = [obs, np.ones(3), term, np.zeros(3, bool), info]
        return tuple(self.bad(result) if self.t == 12 else result)


@pytest.mark.parametrize("mode", MODES[:2], ids=lambda m: m.name)
@pytest.mark.parametrize(
    "bad",
    [
        lambda r: [r[0][:-1], *r[1:]],
        lambda r: [r[0], r[1][:-1], *r[2:]],
        lambda r: [r[0], r[1], r[2][:2], *r[3:]],
        lambda r: r[:4],
    ],
    ids=["short-obs", "short-rewards", "short-terminations", "4-tuple"],
)
def test_a_step_result_that_cannot_be_recorded_ends_each_episode_before_it(
    tmp_path: Path, mode: AutoresetMode, bad: Callable[[list[Any]], list[Any]]
) -> None:
    """A result of too few rows, or not a 5-tuple, raised a bare IndexError or ValueError, and
    the episodes went on without that step (11 then 13 recorded as one transition). Now a
    RecordingError, and each episode ends at its last recorded step."""
    venv = TraceRecordingVectorWrapper(_Counter(mode, bad), tmp_path)
    venv.reset(seed=0)
    for t in range(1, 21):
        if t == 12:
            with pytest.raises(gym_recording.RecordingError, match="cannot record the step"):
                venv.step(np.zeros(3, np.int64))
        else:
            venv.step(np.zeros(3, np.int64))
    venv.close()
    with gym_recording.load(tmp_path) as rec:
        assert len({ep.writer for ep in rec}) == 3
        for ep in rec:
            counts = ep.observations[:, 0].tolist()
            steps = counts[:-1] + ([counts[-1] + 0.5] if counts[-1] % 1 else counts[-1:])
            assert steps == list(range(int(steps[0]), int(steps[0]) + len(steps))), counts
            # (checked before any sub-env's step was recorded: the first ones kept step 12)
            assert 12 not in steps[1:], counts


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("vectorization", ["sync", "async"])
@pytest.mark.parametrize("batch_bytes", [3000, 5_000_000])
def test_long_runs_in_columns_equal_subenvs_alone(
    tmp_path: Path, mode: AutoresetMode, vectorization: str, batch_bytes: int
) -> None:
    """Many vector steps (the wrapper holds them in columns and hands them over every 1,024
    steps, or fewer), in small batches (episodes split in parts) or one: each sub-env's
    episodes equal the same env recorded alone, with times that follow the steps."""

    def make() -> gymnasium.Env[Any, Any]:
        return gymnasium.make("CartPole-v1", max_episode_steps=40)

    n = 4
    cls = SyncVectorEnv if vectorization == "sync" else AsyncVectorEnv
    venv = TraceRecordingVectorWrapper(
        cls([make] * n, autoreset_mode=mode), str(tmp_path / "vec"), batch_bytes=batch_bytes
    )
    # (private: the columns are what this test is about; None would test the other path)
    assert venv._columns is not None
    refs = [tmp_path / f"ref{i}" for i in range(n)]
    drive(venv, make, refs, mode, steps=1300, seed=9, cut_at=700)
    total = assert_same_episodes(tmp_path / "vec", refs)
    assert total >= 30 * n
    for eps in episodes_by_subenv(tmp_path / "vec", n):
        times = [(ep.started_at, ep.ended_at) for ep in eps]
        assert all(a is not None and b is not None and a <= b for a, b in times)
        assert all(times[j][1] <= times[j + 1][0] for j in range(len(times) - 1))


def test_unusual_arrays_take_the_step_by_step_path(tmp_path: Path) -> None:
    """Actions of another dtype than the space's (a list, floats) are recorded exactly, one
    sub-env at a time, between steps held in columns."""
    n = 2
    venv = TraceRecordingVectorWrapper(
        SyncVectorEnv([make_cartpole] * n), str(tmp_path / "vec"), batch_bytes=3000
    )
    venv.reset(seed=3)
    expected: list[list[int]] = [[] for _ in range(n)]
    pending = [False] * n  # NEXT_STEP: the step after an episode's end resets the sub-env
    for t in range(300):
        a = np.array([t % 2, (t // 3) % 2])
        action: Any = a if t % 5 else a.tolist()  # every fifth a list of Python ints
        _, _, terms, truncs, _ = venv.step(action)
        for i in range(n):
            if pending[i]:
                pending[i] = False
                continue
            expected[i].append(int(a[i]))
            pending[i] = bool(terms[i] or truncs[i])
    venv.close()
    got = episodes_by_subenv(tmp_path / "vec", n)
    for i in range(n):
        acts = np.concatenate([ep.actions for ep in got[i]])
        assert acts.dtype == np.int64 and acts.tolist() == expected[i]


_NEVER_CLOSED = """
import multiprocessing, sys
import gymnasium, numpy as np
from gym_recording.wrappers import TraceRecordingVectorWrapper


def record(directory):
    venv = TraceRecordingVectorWrapper(
        gymnasium.make_vec("CartPole-v1", num_envs=3, vectorization_mode="sync"), directory
    )
    venv.reset(seed=1)
    for t in range(100):
        venv.step(np.array([t % 2, 1, 0]))
    return venv


if __name__ == "__main__":
    how, directory = sys.argv[1], sys.argv[2]
    if how == "kept":  # (alive at interpreter exit)
        venv = record(directory)
    elif how == "dropped":  # (collected on return, never closed)
        record(directory)
    else:  # (a worker, which ends without atexit under fork and forkserver)
        p = multiprocessing.get_context(how).Process(target=record, args=(directory,))
        p.start()
        p.join()
        sys.exit(p.exitcode)
"""


@pytest.mark.parametrize("how", ["kept", "dropped", "fork", "forkserver", "spawn"])
def test_steps_held_in_columns_are_written_at_interpreter_exit(tmp_path: Path, how: str) -> None:
    """A wrapper never closed still leaves every step: alive at exit, dropped before it, or
    in a multiprocessing worker (its columns are handed over before its recordings close)."""
    import multiprocessing

    if how not in ("kept", "dropped") and how not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {how} start method here")
    script = tmp_path / "never_closed.py"
    script.write_text(_NEVER_CLOSED)
    d = tmp_path / "rec"
    subprocess.run([sys.executable, str(script), how, str(d)], check=True, timeout=120)
    got = episodes_by_subenv(d, 3)
    for eps in got:
        # 100 vector steps: each a step of the sub-env, or (NEXT_STEP) the reset after an end
        resets_after_ends = sum(1 for ep in eps[:-1] if ep.terminated or ep.truncated)
        assert sum(ep.length for ep in eps) + resets_after_ends == 100


def test_a_vector_wrapper_closed_by_an_atexit_handler_closes_cleanly(tmp_path: Path) -> None:
    """close() in the user's exit handler, when no thread pool takes work any more: the
    sub-envs' writers close one by one (it raised RuntimeError from the pool)."""
    src = textwrap.dedent(
        f"""
        import atexit, numpy as np, gymnasium as gym
        from gym_recording import TraceRecordingVectorWrapper
        env = TraceRecordingVectorWrapper(gym.make_vec("CartPole-v1", 2, "sync"), {str(tmp_path)!r})
        env.reset(seed=0)
        @atexit.register
        def done():
            for _ in range(5):
                env.step(np.zeros(2, np.int64))
            env.close()
            print("closed")
        """
    )
    proc = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, timeout=120)
    assert proc.stdout == "closed\n" and not proc.stderr, proc.stderr
    with gym_recording.load(tmp_path) as rec:
        assert sorted(ep.length for ep in rec) == [5, 5]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_child_forked_after_a_vector_step_leaves_the_parents_steps_alone(
    tmp_path: Path,
) -> None:
    """A child forked while the wrapper holds steps in columns exits quietly (before, at its
    exit it handed the parent's columns to the parent's recordings and logged their refusal); the
    parent writes them."""
    src = textwrap.dedent(
        f"""
        import os, sys, numpy as np, gymnasium as gym
        from gym_recording import TraceRecordingVectorWrapper
        env = TraceRecordingVectorWrapper(gym.make_vec("CartPole-v1", 2, "sync"), {str(tmp_path)!r})
        env.reset(seed=0)
        for _ in range(3):
            env.step(np.zeros(2, np.int64))
        pid = os.fork()
        if pid == 0:
            sys.exit(0)
        os.waitpid(pid, 0)
        env.close()
        """
    )
    proc = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    with gym_recording.load(tmp_path) as rec:
        assert sorted(ep.length for ep in rec) == [3, 3]


def test_a_closed_vector_wrapper_refuses_reset_and_step(tmp_path: Path) -> None:
    """Used after close(), the vector wrapper raises RecordingClosedError instead of recording
    nothing; each sub-env's episodes before it stay as they were."""
    venv = TraceRecordingVectorWrapper(gymnasium.make_vec("CartPole-v1", num_envs=2), tmp_path)
    venv.reset(seed=0)
    venv.step(np.zeros(2, np.int64))
    venv.close()
    with pytest.raises(gym_recording.RecordingClosedError, match="reset"):
        venv.reset(seed=1)
    with pytest.raises(gym_recording.RecordingClosedError, match="the env has stepped"):
        venv.step(np.zeros(2, np.int64))
    with gym_recording.load(tmp_path) as rec:
        # (make_vec's CartPole is its own vector env: no seed per sub-env, see above)
        assert sorted((ep.length, ep.seed) for ep in rec) == [(1, None), (1, None)]


class _Counting(gymnasium.Env[np.ndarray, int]):
    """Observations [episode, step]: an episode's steps can be told apart from another's."""

    observation_space = spaces.Box(0, 1e9, (2,), np.float64)
    action_space = spaces.Discrete(2)

    def __init__(self, length: int) -> None:
        self.length, self.episode, self.t = length, -1, 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        self.episode, self.t = self.episode + 1, 0
        return np.array([self.episode, 0.0]), {}

    def step(self, action: int) -> Any:
        self.t += 1
        return np.array([self.episode, self.t], np.float64), 1.0, self.t == self.length, False, {}


def test_a_failed_write_in_one_sub_env_leaves_every_episode_whole(tmp_path: Path) -> None:
    """One sub-env's batch cannot be written (a directory stands at its blob's name) while
    the columns are handed over: every sub-env takes its rows, the batch stays buffered, and
    the WriteError is raised once all are recorded. Once the way is clear, the batch is
    written: no step is lost, and no episode joins steps of two."""
    from gym_recording.format.names import batch_names  # (the name the next blob will take)

    n = 3
    envs = SyncVectorEnv([lambda k=k: _Counting(7 + 3 * k) for k in range(n)])
    venv = TraceRecordingVectorWrapper(envs, tmp_path, batch_bytes=2_000)
    venv.reset(seed=0)
    for _ in range(1500):
        venv.step(np.zeros(n, np.int64))
    rec = venv.recordings[0]
    last = rec.batches[-1]
    blob = tmp_path / batch_names(rec.file_prefix, last["first"] + last["len"])[1]
    blob.mkdir()
    with pytest.raises(gym_recording.WriteError, match="Is a directory"):
        for _ in range(3000):
            venv.step(np.zeros(n, np.int64))
    blob.rmdir()
    for _ in range(1500):
        venv.step(np.zeros(n, np.int64))
    venv.close()
    assert gym_recording.verify(tmp_path).ok
    for k, eps in enumerate(episodes_by_subenv(tmp_path, n)):
        assert len(eps) > 300 // (7 + 3 * k)
        for ep in eps:
            obs = ep.observations
            assert (obs[:, 0] == obs[0, 0]).all(), f"sub-env {k}: steps of two episodes"
            np.testing.assert_array_equal(obs[:, 1], np.arange(ep.length + 1))
        numbers = [int(ep.observations[0, 0]) for ep in eps]
        assert numbers == list(range(len(eps)))  # (every episode, none lost)


class _EditsOptions(gymnasium.Wrapper):  # type: ignore[type-arg]
    """An env that takes its level out of the options it is given, and marks them."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        if options is not None:
            options.pop("level", None)
            options["nested"]["seen"] = True
        return self.env.reset(seed=seed, options=options)


def test_reset_options_are_recorded_as_given_not_as_the_env_leaves_them(tmp_path: Path) -> None:
    """Envs may edit the options dict they get (Gymnasium hands every sub-env the same one):
    each episode records the options the caller gave, so that a replay gets them."""
    single = TraceRecordingWrapper(_EditsOptions(make_cartpole()), tmp_path / "one")
    single.reset(seed=0, options={"level": 3, "nested": {"a": [1]}})
    single.close()
    venv = TraceRecordingVectorWrapper(
        SyncVectorEnv([lambda: _EditsOptions(make_cartpole())] * 2), str(tmp_path / "vec")
    )
    venv.reset(seed=0, options={"level": 3, "nested": {"a": [1]}})
    venv.step(np.array([0, 0]))
    venv.close()
    with gym_recording.load(tmp_path / "one") as rec:
        assert rec[0].options == {"level": 3, "nested": {"a": [1]}}
    got = episodes_by_subenv(tmp_path / "vec", 2)
    assert [eps[0].options for eps in got] == [{"level": 3, "nested": {"a": [1]}}] * 2


class _FailsOnce(gymnasium.Wrapper[Any, Any, Any, Any]):
    """Its ``what`` call (``"step"`` or ``"reset"``) number ``at`` raises (0: never)."""

    def __init__(self, env: gymnasium.Env[Any, Any], what: str, at: int) -> None:
        super().__init__(env)
        self.what, self.at, self.calls = what, at, 0

    def _count(self, what: str) -> None:
        if what == self.what:
            self.calls += 1
            if self.calls == self.at:
                raise ValueError(f"a transient {what} failure")

    def step(self, action: Any) -> Any:
        self._count("step")
        return self.env.step(action)

    def reset(self, **kwargs: Any) -> Any:
        self._count("reset")
        return self.env.reset(**kwargs)


@pytest.mark.parametrize("what", ["step", "reset"])
def test_a_sub_env_failing_mid_call_ends_every_episode_it_may_have_touched(
    tmp_path: Path, what: str
) -> None:
    """Sub-env 1 raises inside the vector env's step (or reset), after sub-env 0 stepped (or
    reset): which sub-envs did is not known, so each episode ends at its last recorded step,
    and each records again from its next reset. (The episodes went on: sub-env 0's missed
    the step lost with the call, or ran on into its next episode.)"""

    def make(at: int) -> Callable[[], gymnasium.Env[Any, Any]]:
        return lambda: _FailsOnce(gymnasium.make("CartPole-v1", max_episode_steps=8), what, at)

    venv = TraceRecordingVectorWrapper(SyncVectorEnv([make(0), make(3)]), tmp_path)
    venv.reset(seed=0)
    failed = 0
    for t in range(20):
        try:
            if what == "reset" and t in (4, 7):  # (sub-env 1's third reset raises)
                venv.reset(seed=[100 + t, 200 + t])
            venv.step(np.array([1, 1]))
        except ValueError as exc:
            failed += 1
            assert "transient" in str(exc)
    venv.close()
    assert failed == 1
    with gym_recording.load(tmp_path) as rec:
        first = rec.writers[0].writer
        lengths = [(ep.length, ep.truncated) for ep in rec if ep.writer == first]
    assert lengths and all(n <= 8 for n, _ in lengths), lengths
    assert all(n == 8 for n, truncated in lengths if truncated), lengths  # (no step missing)
    assert gym_recording.verify(tmp_path).ok


class _IntKeyInfoEnv(gymnasium.Env[Any, Any]):
    observation_space = spaces.Box(-1, 1, (2,), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action: Any) -> Any:
        return np.zeros(2, np.float32), 0.0, False, False, {3: "int key", "a": 1.0}


def test_infos_with_a_key_that_is_not_a_str_are_recorded_per_sub_env(tmp_path: Path) -> None:
    """An info key that is not a str (Gymnasium's vector env masks it as ``"_3"``): each
    sub-env's info holds it, as the single-env wrapper records it. (It raised
    AttributeError: 'int' object has no attribute 'startswith'.)"""
    venv = TraceRecordingVectorWrapper(
        SyncVectorEnv([_IntKeyInfoEnv] * 2), tmp_path, record_infos=True
    )
    venv.reset(seed=0)
    venv.step(np.array([0, 1]))
    venv.close()
    with gym_recording.load(tmp_path) as rec:
        assert [ep.infos[1] for ep in rec] == [{3: "int key", "a": 1.0}] * 2


class _ResetFails(gymnasium.Env[np.ndarray, int]):
    """Steps for ever; its reset raises ``exc`` when the options ask it to."""

    observation_space = spaces.Box(-1, 1, (2,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, exc: type[BaseException]) -> None:
        self.exc, self.t = exc, 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        if options and options.get("boom"):
            raise self.exc("boom")
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action: int) -> Any:
        self.t += 1
        return np.full(2, self.t / 100, np.float32), 1.0, False, False, {}


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
def test_a_partial_reset_that_fails_ends_only_the_episodes_it_was_to_reset(
    tmp_path: Path, exc: type[BaseException]
) -> None:
    """A reset of sub-env 0 alone (``reset_mask``) that raises, an error or a Ctrl-C, ends
    sub-env 0's episode only: sub-env 1's goes on, every step recorded (a Ctrl-C ended it
    too, and its next steps were not recorded)."""
    w = TraceRecordingVectorWrapper(SyncVectorEnv([lambda: _ResetFails(exc)] * 2), tmp_path)
    w.reset(seed=0)
    for _ in range(5):
        w.step(np.array([0, 1]))
    with pytest.raises(exc):
        w.reset(options={"reset_mask": np.array([True, False]), "boom": True})
    for _ in range(5):
        w.step(np.array([0, 1]))
    w.close()
    with gym_recording.load(tmp_path) as rec:
        index = {m.writer: m.metadata["vector_env"]["index"] for m in rec.writers}
        got = [(index[ep.writer], ep.seed, ep.length) for ep in rec]
    assert sorted(got) == [(0, 0, 5), (1, 1, 10)]


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_episode_ids_count_the_episodes_of_steps_held_in_columns(
    tmp_path: Path, mode: AutoresetMode
) -> None:
    """``episode_ids`` is each sub-env's current episode at every step, whether its steps
    are held in columns (no infos) or handed on at once (infos): it stayed at its value of
    the last hand-over, 0 after 19 episodes."""
    ids = {}
    for infos in (False, True):
        env = SyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 2, autoreset_mode=mode)
        w = TraceRecordingVectorWrapper(env, tmp_path / str(infos), record_infos=infos)
        w.reset(seed=0)
        seen = []
        for _ in range(200):
            _, _, te, tr, _ = w.step(np.array([0, 1]))
            if mode == AutoresetMode.DISABLED and (te | tr).any():
                w.reset(options={"reset_mask": te | tr})
            seen.append(list(w.episode_ids))
        w.close()
        ids[infos] = seen
    assert ids[False] == ids[True] and ids[False][-1][0] >= 15
