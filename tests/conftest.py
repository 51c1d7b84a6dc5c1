"""Shared test material: small synthetic envs, a driver that keeps what they return, comparisons.

The envs are tiny on purpose (a handful of steps per episode) so that every test records and reads
back real files in milliseconds. The driver keeps a deep copy of every value the env handed to the
caller, and the comparisons check what ``gym_recording.load`` returns against those copies to the
byte, dtype and shape.
"""

from __future__ import annotations

import copy
import json
import math
import os
import shutil
import signal
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from gym_recording.record import steps
from gym_recording.wrappers import TraceRecordingWrapper

# --------------------------------------------------------------------------------------------
# Spaces
# --------------------------------------------------------------------------------------------

#: One observation space per space type, dtype and rank the recorder must keep exactly.
OBSERVATION_SPACES: dict[str, gymnasium.Space[Any]] = {
    "box_rank0_f32": spaces.Box(-1.0, 1.0, shape=(), dtype=np.float32),
    "box_rank1_f16": spaces.Box(-2.0, 2.0, shape=(5,), dtype=np.float16),
    "box_rank1_f32": spaces.Box(-1.0, 1.0, shape=(4,), dtype=np.float32),
    "box_rank1_f64_unbounded": spaces.Box(-np.inf, np.inf, shape=(3,), dtype=np.float64),
    "box_rank2_i32": spaces.Box(-1000, 1000, shape=(2, 3), dtype=np.int32),
    "box_rank1_i8": spaces.Box(-100, 100, shape=(6,), dtype=np.int8),
    "box_rank1_u16": spaces.Box(0, 60000, shape=(3,), dtype=np.uint16),
    "box_rank1_i64": spaces.Box(-(2**40), 2**40, shape=(2,), dtype=np.int64),
    "box_rank1_bool": spaces.Box(0, 1, shape=(5,), dtype=np.bool_),
    "box_image_u8": spaces.Box(0, 255, shape=(12, 16, 3), dtype=np.uint8),
    "box_rank4_f32": spaces.Box(-1.0, 1.0, shape=(2, 3, 4, 5), dtype=np.float32),
    "discrete": spaces.Discrete(7),
    "discrete_start": spaces.Discrete(5, start=-2),
    "multidiscrete": spaces.MultiDiscrete([3, 4, 5]),
    "multidiscrete_2d": spaces.MultiDiscrete([[2, 3], [4, 5]]),
    "multibinary": spaces.MultiBinary(6),
    "multibinary_2d": spaces.MultiBinary([2, 3]),
    "tuple": spaces.Tuple(
        (spaces.Discrete(3), spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32))
    ),
    "dict_nested": spaces.Dict(
        {
            "position": spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float64),
            "inner": spaces.Dict(
                {
                    "count": spaces.Discrete(10),
                    "frame": spaces.Box(0, 255, shape=(4, 5, 3), dtype=np.uint8),
                    "deeper": spaces.Dict({"bits": spaces.MultiBinary(3)}),
                }
            ),
            "pair": spaces.Tuple((spaces.Discrete(4), spaces.MultiDiscrete([2, 2]))),
        }
    ),
    "tuple_of_dict": spaces.Tuple(
        (
            spaces.Dict({"a": spaces.Discrete(2), "b": spaces.Box(0.0, 1.0, (2,), np.float32)}),
            spaces.MultiBinary(2),
        )
    ),
    "text": spaces.Text(max_length=12),
    "dict_with_text": spaces.Dict(
        {"name": spaces.Text(min_length=1, max_length=6), "value": spaces.Discrete(3)}
    ),
}

#: One action space per kind of action value.
ACTION_SPACES: dict[str, gymnasium.Space[Any]] = {
    "discrete": spaces.Discrete(4),
    "discrete_start": spaces.Discrete(3, start=1),
    "box_f32": spaces.Box(-2.0, 2.0, shape=(2,), dtype=np.float32),
    "box_rank0_f64": spaces.Box(-1.0, 1.0, shape=(), dtype=np.float64),
    "multidiscrete": spaces.MultiDiscrete([2, 3]),
    "multibinary": spaces.MultiBinary(3),
    "tuple": spaces.Tuple((spaces.Discrete(2), spaces.Box(-1.0, 1.0, (1,), np.float32))),
    "dict": spaces.Dict(
        {"move": spaces.Discrete(3), "force": spaces.Box(0.0, 1.0, (2,), np.float32)}
    ),
    "text": spaces.Text(max_length=5),
}


# --------------------------------------------------------------------------------------------
# Synthetic envs
# --------------------------------------------------------------------------------------------


class SpaceEnv(gymnasium.Env[Any, Any]):
    """A gymnasium env returning observations sampled from its observation space.

    Episodes last ``min_len..max_len`` steps (drawn at reset) and end terminated or truncated at
    random. Rewards are Python floats drawn from a normal distribution. With ``rich_infos`` the
    infos carry numpy arrays, numpy scalars and nested containers.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012  (gymnasium's convention)

    def __init__(
        self,
        observation_space: gymnasium.Space[Any],
        action_space: gymnasium.Space[Any] | None = None,
        *,
        min_len: int = 1,
        max_len: int = 6,
        rich_infos: bool = False,
    ) -> None:
        # Copies: the module-level spaces are shared between tests, and seeding mutates them.
        self.observation_space = copy.deepcopy(observation_space)
        self.action_space = copy.deepcopy(action_space or spaces.Discrete(3))
        self.min_len = min_len
        self.max_len = max_len
        self.rich_infos = rich_infos
        self._t = 0
        self._len = 0
        self._truncate = False

    def _info(self) -> dict[str, Any]:
        if not self.rich_infos:
            return {"t": self._t}
        return {
            "t": self._t,
            "array": self.np_random.normal(size=(2, 2)).astype(np.float32),
            "ints": np.arange(self._t, self._t + 3, dtype=np.int16),
            "scalar": np.float32(self._t / 3),
            "count": np.int64(self._t * 7),
            "flag": np.bool_(self._t % 2 == 0),
            "nested": {"list": [1, 2.5, "x", None], "tuple": (self._t, "y")},
            "nan": math.nan if self._t == 1 else 0.5,
        }

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self.observation_space.seed(seed)
        self._t = 0
        self._len = int(self.np_random.integers(self.min_len, self.max_len + 1))
        self._truncate = bool(self.np_random.integers(2))
        return self.observation_space.sample(), self._info()

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self._t += 1
        done = self._t >= self._len
        reward = float(self.np_random.normal())
        obs = self.observation_space.sample()
        return obs, reward, done and not self._truncate, done and self._truncate, self._info()


class BufferReuseEnv(gymnasium.Env[Any, Any]):
    """Returns the SAME observation objects every step, mutated in place (like many C envs).

    The observation is a Dict of a float32 array and a uint8 frame, both reused; the info dict
    and the array inside it are reused too.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012

    def __init__(self, episode_len: int = 5) -> None:
        self.observation_space = spaces.Dict(
            {
                "vec": spaces.Box(-np.inf, np.inf, (3,), np.float32),
                "frame": spaces.Box(0, 255, (4, 4, 3), np.uint8),
            }
        )
        self.action_space = spaces.Discrete(2)
        self.episode_len = episode_len
        self._vec = np.zeros(3, dtype=np.float32)
        self._frame = np.zeros((4, 4, 3), dtype=np.uint8)
        self._obs = {"vec": self._vec, "frame": self._frame}
        self._info_arr = np.zeros(2, dtype=np.int64)
        self._info = {"arr": self._info_arr}
        self._t = 0
        self._k = 0  # steps since construction: makes every observation different

    def _advance(self) -> None:
        self._k += 1
        self._vec[:] = (self._k, -self._k, self._k / 2)
        self._frame[...] = self._k % 256
        self._frame[0, 0, 0] = (self._k * 7) % 256
        self._info_arr[:] = (self._k, self._t)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        self._t = 0
        self._advance()
        return self._obs, self._info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self._t += 1
        self._advance()
        return self._obs, float(self._k), self._t >= self.episode_len, False, self._info


class StepCounter(gymnasium.Env[np.ndarray, int]):
    """Two float32 observations and two actions; counts its steps in ``t``. Tests give it
    the ``step`` (its infos) they need."""

    observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}


class LegacyEnv:
    """A pre-gymnasium env, a subclass of nothing: ``reset() -> obs``, ``step() -> 4-tuple``.

    Episodes alternate between ending by ``done`` (terminated) and by a time limit, reported
    the old way as ``done`` with ``info["TimeLimit.truncated"] = True``.
    """

    def __init__(self, episode_len: int = 4) -> None:
        self.observation_space = spaces.Box(-10.0, 10.0, (2,), np.float64)
        self.action_space = spaces.Discrete(2)
        self.episode_len = episode_len
        self.episode = -1
        self._t = 0
        self.closed = False

    def reset(self) -> np.ndarray:
        self.episode += 1
        self._t = 0
        return np.array([self.episode, 0.0])

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, dict[str, Any]]:
        self._t += 1
        obs = np.array([self.episode, self._t + 0.5 * int(action)])
        done = self._t >= self.episode_len
        info: dict[str, Any] = {"t": self._t}
        if done and self.episode % 2 == 1:
            info["TimeLimit.truncated"] = True
        return obs, float(self._t), done, info

    def close(self) -> None:
        self.closed = True


# --------------------------------------------------------------------------------------------
# Driving an env and keeping what it returned
# --------------------------------------------------------------------------------------------


@dataclass
class Trace:
    """What the env handed to the caller during one episode (deep copies)."""

    observations: list[Any]
    actions: list[Any] = field(default_factory=list)
    rewards: list[Any] = field(default_factory=list)
    terminated: bool = False
    truncated: bool = False
    seed: int | None = None
    options: Any = None
    infos: list[Any] = field(default_factory=list)

    @property
    def length(self) -> int:
        return len(self.actions)


#: Skips a test without the C step recorder (not built, or GYM_RECORDING_PURE_PYTHON set).
requires_c = pytest.mark.skipif(
    not steps.ACCELERATED,
    reason="gym_recording.record._speedups is not built (or GYM_RECORDING_PURE_PYTHON is set)",
)


def run_episodes(
    env: Any,
    n_episodes: int,
    *,
    seed: int | None = 0,
    options: Any = None,
    action_fn: Any = None,
    max_steps: int | None = None,
) -> list[Trace]:
    """Play ``n_episodes`` on a gymnasium-API ``env``; return deep copies of everything returned.

    Episode ``e`` is reset with ``seed + e`` (or no seed). Actions come from ``action_fn(step)``,
    or are sampled from the (seeded) action space. An episode stops when it terminates, is
    truncated, or after ``max_steps`` steps (then the next reset cuts it).
    """
    if seed is not None:
        env.action_space.seed(seed)
    traces = []
    for e in range(n_episodes):
        ep_seed = None if seed is None else seed + e
        obs, info = env.reset(seed=ep_seed, options=options)
        trace = Trace(
            observations=[copy.deepcopy(obs)],
            seed=ep_seed,
            options=copy.deepcopy(options),
            infos=[copy.deepcopy(info)],
        )
        while max_steps is None or trace.length < max_steps:
            action = action_fn(trace.length) if action_fn else env.action_space.sample()
            obs, reward, terminated, truncated, info = env.step(action)
            trace.actions.append(copy.deepcopy(action))
            trace.observations.append(copy.deepcopy(obs))
            trace.rewards.append(copy.deepcopy(reward))
            trace.infos.append(copy.deepcopy(info))
            trace.terminated, trace.truncated = bool(terminated), bool(truncated)
            if terminated or truncated:
                break
        if max_steps is not None and trace.length >= max_steps:
            trace.terminated = trace.truncated = False  # cut by the next reset/close
        traces.append(trace)
    return traces


def record(
    env: Any,
    directory: Any,
    n_episodes: int = 4,
    *,
    batch_bytes: int = 5_000_000,
    record_infos: bool = False,
    compression: str | None = None,
    **run_kwargs: Any,
) -> list[Trace]:
    """Wrap ``env`` in a TraceRecordingWrapper, play ``n_episodes``, close; return the traces."""
    with TraceRecordingWrapper(
        env,
        directory,
        batch_bytes=batch_bytes,
        record_infos=record_infos,
        compression=compression,
    ) as wrapped:
        return run_episodes(wrapped, n_episodes, **run_kwargs)


def manifest_of(directory: Any) -> dict[str, Any]:
    """The one manifest in ``directory``, parsed."""
    (path,) = Path(directory).glob("openaigym.trace.*.manifest.json")
    with open(path, encoding="utf-8") as f:
        manifest: dict[str, Any] = json.load(f)
    return manifest


# --------------------------------------------------------------------------------------------
# Exact comparisons
# --------------------------------------------------------------------------------------------


def assert_array_exact(got: Any, want: np.ndarray, where: str) -> None:
    """``got`` is an ndarray with ``want``'s dtype, shape and bytes."""
    assert isinstance(got, np.ndarray), f"{where}: expected an ndarray, got {type(got).__name__}"
    assert got.dtype == want.dtype, f"{where}: dtype {got.dtype}, expected {want.dtype}"
    assert got.shape == want.shape, f"{where}: shape {got.shape}, expected {want.shape}"
    assert got.tobytes() == want.tobytes(), f"{where}: bytes differ"


def assert_field_exact(
    got: Any, values: list[Any], where: str = "field", *, read_only: bool = False
) -> None:
    """A field read back equals the per-step ``values``, in the layout FORMAT.md §5 promises.

    ndarrays of shape S come back as ONE array ``[len, *S]``; numpy scalars as an array of their
    dtype; Python ints as int64, floats as float64, bools as bool; dicts and tuples as
    dicts/tuples (same key order) of such fields; strings as a list of ``str``. With
    ``read_only``, every array must be read-only (what ``gym_recording.load`` promises).
    """
    if not values:
        assert len(got) == 0, f"{where}: expected no steps, got {len(got)}"
        return
    first = values[0]
    if isinstance(first, dict):
        assert isinstance(got, dict), f"{where}: expected a dict field, got {type(got).__name__}"
        assert list(got) == list(first), f"{where}: keys {list(got)}, expected {list(first)}"
        for key in first:
            assert_field_exact(
                got[key], [v[key] for v in values], f"{where}.{key}", read_only=read_only
            )
    elif isinstance(first, tuple):
        assert type(got) is tuple, f"{where}: expected a tuple field, got {type(got).__name__}"
        assert len(got) == len(first), f"{where}: {len(got)} members, expected {len(first)}"
        for i in range(len(first)):
            assert_field_exact(got[i], [v[i] for v in values], f"{where}[{i}]", read_only=read_only)
    elif isinstance(first, np.ndarray):
        assert_array_exact(got, np.stack(values), where)
    elif isinstance(first, np.generic):
        assert_array_exact(got, np.array(values, dtype=first.dtype), where)
    elif type(first) is bool:
        assert_array_exact(got, np.array(values, dtype=np.bool_), where)
    elif type(first) is int:
        assert_array_exact(got, np.array(values, dtype=np.int64), where)
    elif type(first) is float:
        assert_array_exact(got, np.array(values, dtype=np.float64), where)
    elif isinstance(first, str):
        assert isinstance(got, list), f"{where}: expected a list of str, got {type(got).__name__}"
        assert all(type(s) is str for s in got), f"{where}: not all str: {got!r}"
        assert got == values, f"{where}: {got!r} != {values!r}"
    else:
        assert_value_exact(list(got), values, where)
    if read_only and isinstance(got, np.ndarray):
        assert got.flags.writeable is False, f"{where}: array is writeable"


def assert_value_exact(got: Any, want: Any, where: str = "value") -> None:
    """``got`` equals ``want`` exactly, types included (arrays by dtype, shape and bytes)."""
    if isinstance(want, np.ndarray):
        assert_array_exact(got, want, where)
    elif isinstance(want, np.generic):
        assert type(got) is type(want), f"{where}: {type(got).__name__}, expected {type(want)}"
        assert got.tobytes() == want.tobytes(), f"{where}: {got!r} != {want!r}"
    elif isinstance(want, dict):
        assert isinstance(got, dict), f"{where}: expected a dict, got {type(got).__name__}"
        assert list(got) == list(want), f"{where}: keys {list(got)}, expected {list(want)}"
        for key in want:
            assert_value_exact(got[key], want[key], f"{where}[{key!r}]")
    elif isinstance(want, (list, tuple)):
        assert type(got) is type(want), f"{where}: {type(got).__name__}, expected {type(want)}"
        assert len(got) == len(want), f"{where}: {len(got)} items, expected {len(want)}"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_value_exact(g, w, f"{where}[{i}]")
    elif isinstance(want, float) and math.isnan(want):
        assert isinstance(got, float) and math.isnan(got), f"{where}: {got!r}, expected nan"
    else:
        assert type(got) is type(want), f"{where}: {type(got).__name__}, expected {type(want)}"
        assert got == want, f"{where}: {got!r} != {want!r}"


def assert_episode_exact(ep: Any, trace: Trace, *, infos: bool = False, where: str = "") -> None:
    """A loaded ``Episode`` holds exactly what the env returned during ``trace``."""
    where = where or f"episode {getattr(ep, 'index', '?')}"
    assert ep.length == trace.length, f"{where}: length {ep.length}, expected {trace.length}"
    assert_field_exact(ep.observations, trace.observations, f"{where}.observations", read_only=True)
    assert_field_exact(ep.actions, trace.actions, f"{where}.actions", read_only=True)
    want_rewards = np.array([float(r) for r in trace.rewards], dtype=np.float64)
    assert_array_exact(ep.rewards, want_rewards, f"{where}.rewards")
    assert ep.rewards.flags.writeable is False, f"{where}: rewards are writeable"
    assert ep.total_reward == pytest.approx(math.fsum(want_rewards.tolist()), rel=1e-12, abs=1e-12)
    assert ep.terminated is trace.terminated, f"{where}: terminated {ep.terminated}"
    assert ep.truncated is trace.truncated, f"{where}: truncated {ep.truncated}"
    assert ep.seed == trace.seed, f"{where}: seed {ep.seed}, expected {trace.seed}"
    assert_value_exact(ep.options, trace.options, f"{where}.options")
    if infos:
        assert ep.infos is not None, f"{where}: no infos recorded"
        assert len(ep.infos) == trace.length + 1
        assert_value_exact(ep.infos, trace.infos, f"{where}.infos")
    else:
        assert ep.infos is None, f"{where}: infos recorded without record_infos"


# --------------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------------


@pytest.fixture(params=sorted(OBSERVATION_SPACES), ids=str)
def observation_space_name(request: pytest.FixtureRequest) -> str:
    """The name of each observation space of OBSERVATION_SPACES in turn."""
    return str(request.param)


@pytest.fixture(autouse=True, scope="session")
def _temp_files_in_one_directory_removed_at_the_end() -> Any:
    """What the code under test puts in the temporary directory (a recording made with
    ``directory=None``, a subprocess's files, Ray's session) goes in one directory of its
    own, removed when the tests end. (A short name: Ray's sockets must fit 107 bytes.)"""
    where = tempfile.mkdtemp(prefix="gr-")
    patch = pytest.MonkeyPatch()
    patch.setattr(tempfile, "tempdir", where)
    patch.setenv("TMPDIR", where)
    yield
    patch.undo()
    shutil.rmtree(where, ignore_errors=True)


@pytest.fixture(autouse=True, scope="session")
def _ctrl_c_as_in_a_terminal() -> Any:
    """Ctrl-C (SIGINT) reaches the tests and their subprocesses as it does in a terminal.

    A shell starts a background job (``pytest &``, a script's ``cmd &``) with SIGINT ignored,
    which its children inherit: Python then installs no ``KeyboardInterrupt``, and the tests of
    what a Ctrl-C does saw their subprocess finish instead. Python's handler here is reset to
    the default in every ``exec``'d child.
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        yield
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    else:
        yield


@pytest.fixture
def trace_dir(tmp_path: Any) -> Any:
    """A recording directory inside the test's tmp_path (not yet created)."""
    return tmp_path / "traces"


# ---------------------------------------------------------------------------------------------
# In CI (GYM_RECORDING_REQUIRE_ALL=1, set by .ci/run) a test that skips for want of an optional
# component (a browser, an extra, a server) fails instead: CI installs all of them, so a skip
# there means a broken install step, not a missing feature.
# ---------------------------------------------------------------------------------------------


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Any:
    outcome = yield
    report = outcome.get_result()
    if (
        report.skipped
        and os.environ.get("GYM_RECORDING_REQUIRE_ALL") == "1"
        and item.get_closest_marker("optional_skip_ok") is None
        and not hasattr(report, "wasxfail")
    ):
        report.outcome = "failed"
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"skipped in CI, where every optional component is installed: {reason}"
