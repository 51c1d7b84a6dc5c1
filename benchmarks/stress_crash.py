"""Stress the crash safety of the recorder: many SIGKILL trials, then check every recording.

Runs the subprocess harness of ``tests/crash_harness.py`` many more times than the test suite:

* ``random``: a recorder killed after a random delay (0 to 0.5 s after it is ready), with a
  random batch size (so that flushes are frequent or rare);
* ``flush``: a recorder that kills itself inside the n-th atomic write, at a random phase
  (before the temporary file, mid-write, before fsync, before rename, after rename);
* ``many``: 4 recorders writing into one directory, all killed at one random moment.

After each trial every episode a manifest lists must read back complete and exact, in order,
none twice and none skipped; leftover temporary files must be ignored by readers, reported by
``verify`` and removed by its cleaning. Prints the counts.

Usage::

    python benchmarks/stress_crash.py --trials 300 --jobs 2
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
import crash_harness as ch  # noqa: E402

BATCH_SIZES = [1_000, 3_000, 8_000, 20_000, 60_000, 200_000]


def _many(directory: Path, seeds: list[int], rnd: random.Random) -> tuple[int, int]:
    """Several recorders into one directory, all SIGKILLed at one moment; check each."""
    args = [str(rnd.choice(BATCH_SIZES)), "100000"]
    procs = [
        subprocess.Popen(
            [sys.executable, ch.HARNESS, "child", "run", str(directory), str(s), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for s in seeds
    ]
    for p in procs:
        assert p.stdout is not None
        p.stdout.readline()  # ready
    time.sleep(rnd.uniform(0.0, 0.5))
    for p in procs:
        p.send_signal(signal.SIGKILL)
    for p in procs:
        p.communicate(timeout=60)
    from gym_recording._verify import verify

    import gym_recording

    episodes = 0
    with gym_recording.load(directory) as rec:
        writer_seed = {m.writer: m.metadata["trial_seed"] for m in rec.writers}
        count: Counter[str] = Counter()
        for ep in rec:
            ts = writer_seed[ep.writer]
            k = count[ep.writer]
            count[ep.writer] += 1
            assert ep.seed == ch.episode_seed(ts, k)
            ch.assert_episode(ep, ch.expected_episode(ts, k))
            episodes += 1
    report = verify(directory)
    assert report.ok, report.lines()
    return episodes, len(report.temp_files)


def trial(k: int, root: Path, base_seed: int) -> dict[str, int]:
    rnd = random.Random(base_seed * 100_003 + k)
    kind = rnd.choice(["random", "random", "flush", "many"])
    d = root / f"trial{k}"
    d.mkdir()
    out: Counter[str] = Counter({f"kind {kind}": 1})
    failed = False
    try:
        if kind == "random":
            t = ch.run_child(
                "run",
                d,
                k,
                rnd.choice(BATCH_SIZES),
                100_000,
                kill_after=rnd.uniform(0.0, 0.5),
            )
            out["killed"] += int(t.killed)
            found = ch.check_recording(d, k)
        elif kind == "flush":
            phase = rnd.choice(ch.PHASES)
            n = rnd.randrange(0, 60)
            t = ch.run_child("die", d, k, rnd.choice(BATCH_SIZES[:3]), n, phase, 100_000)
            out["killed"] += int(t.returncode == -signal.SIGKILL)
            out[f"kill in {phase}"] += 1
            found = ch.check_recording(d, k)
        else:
            seeds = [k * 10 + i for i in range(4)]
            episodes, temps = _many(d, seeds, rnd)
            out["killed"] += 4
            out["episodes verified"] += episodes
            out["temp files left"] += temps
            return dict(out)
        out["episodes verified"] += found.episodes
        out["batches"] += found.batches
        out["batches ending in a split episode"] += found.split_episodes
        out["temp files left (removed by clean)"] += found.temp_files
        return dict(out)
    except Exception:
        failed = True
        traceback.print_exc()
        print(f"trial {k} ({kind}) FAILED; files kept in {d}", file=sys.stderr)
        return {"FAILED": 1}
    finally:
        if not failed:
            shutil.rmtree(d, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="gymrec-stress-"))
    start = time.time()
    totals: Counter[str] = Counter()
    with ThreadPoolExecutor(args.jobs) as pool:
        for i, res in enumerate(pool.map(lambda k: trial(k, root, args.seed), range(args.trials))):
            totals.update(res)
            if (i + 1) % 25 == 0:
                print(f"{i + 1}/{args.trials} trials, {totals['FAILED']} failed", flush=True)
    elapsed = time.time() - start
    print(f"\n{args.trials} trials in {elapsed:.0f} s (seed {args.seed}, {args.jobs} jobs)")
    for key in sorted(totals):
        print(f"  {key}: {totals[key]}")
    if not totals["FAILED"]:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if totals["FAILED"] else 0


if __name__ == "__main__":
    sys.exit(main())
