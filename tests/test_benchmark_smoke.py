"""The benchmark script runs end to end (tiny sizes; no timing is asserted)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench.py"


def test_benchmark_smoke_run_prints_every_section(tmp_path):
    """`bench.py --smoke` completes and reports write, read, memory and flush sections."""
    out = tmp_path / "BENCH.md"
    proc = subprocess.run(
        [sys.executable, "-W", "ignore", str(BENCH), "--smoke", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "TMPDIR": str(tmp_path), "MINARI_DATASETS_PATH": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = out.read_text()
    for heading in (
        "## Recording (write) speed",
        "## Read-back speed",
        "## Memory (peak RSS",
        "## Flush cost",
    ):
        assert heading in report
    for workload in ("synthetic f32[4], Discrete", "CartPole-v1", "u8[210,160,3] frames"):
        assert f"| {workload}" in report or workload in report
    assert "ONE episode of u8[84,84,4]" in report
