"""The example scripts run as their docstrings say, and parse their arguments."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_help_prints_usage_and_creates_nothing(tmp_path: Path) -> None:
    for script in ("train_and_record.py", "playback.py", "render_video.py"):
        got = _run(str(EXAMPLES / script), "--help", cwd=tmp_path)
        assert got.returncode == 0, got.stderr
        assert "usage:" in got.stdout
    assert list(tmp_path.iterdir()) == []  # no folder named --help


def test_train_then_play_back(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    trained = _run(str(EXAMPLES / "train_and_record.py"), str(traces), cwd=tmp_path)
    assert trained.returncode == 0, trained.stderr
    assert f"traces in {traces}" in trained.stdout
    played = _run(str(EXAMPLES / "playback.py"), str(traces), cwd=tmp_path)
    assert played.returncode == 0, played.stderr
    assert "scan_recorded_traces saw" in played.stdout
    episodes = int(played.stdout.split(" episodes, mean return")[0].split("\n")[-1])
    assert f"scan_recorded_traces saw {episodes} episodes" in played.stdout


def test_playback_of_dict_and_tuple_observations(tmp_path: Path) -> None:
    import numpy as np

    from gym_recording import TraceRecording

    cases = {
        "dict": ({"pos": np.zeros(2), "id": np.int64(3)}, "{'pos': float64[2, 2], 'id': int64[2]}"),
        "tuple": ((np.zeros(3, np.uint8), np.float32(2.5)), "(uint8[2, 3], float32[2])"),
    }
    for name, (obs, layout) in cases.items():
        with TraceRecording(tmp_path / name) as rec:
            rec.add_reset(obs, seed=0)
            rec.add_step(0, obs, 1.0, terminated=True)
        played = _run(str(EXAMPLES / "playback.py"), str(tmp_path / name), cwd=tmp_path)
        assert played.returncode == 0, played.stderr
        assert f"observations {layout}, seed 0" in played.stdout
        assert "scan_recorded_traces saw 1 episodes" in played.stdout


def test_playback_of_an_empty_recording_and_of_fractional_returns(tmp_path: Path) -> None:
    from gym_recording import TraceRecording

    (tmp_path / "empty").mkdir()  # (opens as an empty recording)
    played = _run(str(EXAMPLES / "playback.py"), str(tmp_path / "empty"), cwd=tmp_path)
    assert played.returncode == 0, played.stderr
    assert "0 episodes" in played.stdout
    with TraceRecording(tmp_path / "small") as rec:  # (MiniGrid's returns are below 1)
        for reward in (0.25, 0.487):
            rec.add_reset(0)
            rec.add_step(0, 1, reward, terminated=True)
    played = _run(str(EXAMPLES / "playback.py"), str(tmp_path / "small"), cwd=tmp_path)
    assert played.returncode == 0, played.stderr
    assert "2 episodes, mean return 0.3685, best 0.487" in played.stdout


def test_playback_without_a_directory_says_what_it_needs(tmp_path: Path) -> None:
    got = _run(str(EXAMPLES / "playback.py"), cwd=tmp_path)
    assert got.returncode == 2
    assert "directory" in got.stderr


def test_render_video_records_frames_and_writes_videos(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    got = _run(str(EXAMPLES / "render_video.py"), str(traces), "--episodes", "2", cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert "x less)" in got.stdout
    videos = tmp_path / "traces-videos"  # (beside the recording, not in it)
    assert sorted(p.name for p in videos.glob("*.mp4")) == ["episode-0.mp4", "episode-1.mp4"]
    assert not list(traces.glob("*.mp4"))
