"""Instructions a step, bare and recorded, counted by valgrind (callgrind), not timed.

Timings on a shared 2-core VM move by more than the gaps worth chasing (BENCHMARKS.md: one
ratio spans 0.84x-0.99x run to run). An instruction count moves far less (the recorder's
overhead by up to ~15% between runs, bare by ~0.2%; see BENCHMARKS.md): each workload runs
bare and recorded in child processes under ``valgrind --tool=callgrind``, each at two lengths,
so that start-up and imports cancel out, with ``PYTHONHASHSEED=0`` and the garbage
collector off (its full passes come at allocation counts, and land in one length's run
and not the other's). It prints instructions a step (a sub-env's step for a vector env), and
bare's over ours, the ratio ``bench.py`` prints for speed. It does not count
cache misses or waits, so it complements ``bench.py`` and does not replace it. Use it to
compare two trees (``PYTHONPATH=other/tree python benchmarks/instructions.py``) or one
change.

    python benchmarks/instructions.py                     # every workload (~2 minutes)
    python benchmarks/instructions.py --workload CartPole

Needs ``valgrind`` on the PATH (Debian: ``apt install valgrind``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import Any

#: Each workload: the env it makes, how many sub-envs (0: a single env), and the two
#: lengths (steps of the env, vector steps of a vector env) whose difference is counted.
WORKLOADS: dict[str, tuple[str, int, int, int]] = {
    "CartPole-v1": ("CartPole-v1", 0, 20_000, 60_000),
    "8 x CartPole-v1, sync": ("CartPole-v1", 8, 1_000, 4_000),
}


def child(kind: str, workload: str, steps: int) -> None:
    """Run one workload for ``steps`` steps, bare or recorded (in a process of its own).

    The loops are ``bench.py``'s (``loops.py``), ``close()`` included.
    """
    import gc

    gc.disable()
    import gymnasium as gym
    from loops import EPISODE_STEPS, drive, drive_vector

    from gym_recording.wrappers import TraceRecordingVectorWrapper, TraceRecordingWrapper

    env_id, n, _, _ = WORKLOADS[workload]
    directory = tempfile.mkdtemp()
    try:
        if n:
            env: Any = gym.make_vec(env_id, n, vectorization_mode="sync")
            if kind == "ours":
                env = TraceRecordingVectorWrapper(env, directory)
            drive_vector(env, steps)
        else:
            env = gym.make(env_id, max_episode_steps=EPISODE_STEPS)
            if kind == "ours":
                env = TraceRecordingWrapper(env, directory)
            drive(env, 1, steps, alternate=True)  # (as bench.py's CartPole workload)
        env.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def count(kind: str, workload: str, steps: int) -> int:
    """The instructions valgrind counted for one child run."""
    cmd = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        __file__,
        "--child",
        kind,
        workload,
        str(steps),
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stderr
    found = re.search(r"Collected : (\d+)", out)
    if found is None:
        raise RuntimeError(f"valgrind printed no count for {kind} {workload}:\n{out[-2000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", action="append", help="only workloads containing this")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]))
        return
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not on the PATH (Debian: apt install valgrind)")
    names = [w for w in WORKLOADS if not args.workload or any(x in w for x in args.workload)]
    jobs = [(k, w, s) for w in names for k in ("bare", "ours") for s in WORKLOADS[w][2:]]
    # One short run of each first, not counted: it writes the .pyc files of a tree that has
    # none yet, which would otherwise be counted in some runs and not others (~500 a step).
    for kind, w in {(k, w) for k, w, _ in jobs}:
        child_run = [sys.executable, __file__, "--child", kind, w, "10"]
        subprocess.run(child_run, capture_output=True, check=True)
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:  # (each job is a child process)
        counts = dict(zip(jobs, pool.map(lambda job: count(*job), jobs), strict=True))
    print("| workload | steps counted | bare, instructions a step | ours | ours - bare | ratio |")
    print("|---|---|---|---|---|---|")
    for w in names:
        _, n, short, long = WORKLOADS[w]
        per = {
            k: (counts[(k, w, long)] - counts[(k, w, short)]) / (long - short)
            for k in ("bare", "ours")
        }
        sub = max(n, 1)  # (per sub-env step)
        print(
            f"| {w} | {(long - short) * sub:,} | {per['bare'] / sub:,.0f} "
            f"| {per['ours'] / sub:,.0f} | {(per['ours'] - per['bare']) / sub:,.0f} "
            f"| {per['bare'] / per['ours']:.3f}x |"
        )


if __name__ == "__main__":
    main()
