"""The ``gym-recording`` command line (also ``python -m gym_recording``).

Exit codes: 0 success; 1 the recording has problems or a command failed; 2 bad usage.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar

import numpy as np

from gym_recording._errors import RecordingError
from gym_recording._version import __version__

__all__ = ["main", "progress"]

T = TypeVar("T")

EXIT_OK = 0
EXIT_PROBLEM = 1
EXIT_USAGE = 2


def progress(items: Iterable[T], *, total: int | None = None, desc: str = "") -> Iterator[T]:
    """Iterate ``items`` with a tqdm progress bar on stderr when tqdm is installed and useful.

    Without the ``progress`` extra (tqdm), or when stderr is not a terminal and ``CI`` is set,
    this iterates silently.
    """
    try:
        from tqdm import tqdm
    except ImportError:
        yield from items
        return
    yield from tqdm(
        items,
        total=total,
        desc=desc,
        unit="ep",
        file=sys.stderr,
        leave=False,
        mininterval=0.5,
        disable=None,
    )


def _err(msg: str) -> None:
    print(f"gym-recording: error: {msg}", file=sys.stderr)


# ------------------------------------------------------------------------------------ record


def _cmd_record(args: argparse.Namespace) -> int:
    import gymnasium as gym

    from gym_recording._reader import load
    from gym_recording.wrappers import TraceRecordingWrapper

    if args.episodes < 1:
        _err(f"--episodes must be at least 1, got {args.episodes}")
        return EXIT_USAGE
    try:
        base = gym.make(
            args.env_id, **({"max_episode_steps": args.max_steps} if args.max_steps else {})
        )
    except Exception as exc:  # unknown id, missing extra (box2d, atari...), bad kwargs
        _err(f"cannot make environment {args.env_id!r}: {exc}")
        return EXIT_USAGE
    metadata = {"policy": "uniform random", "command": "gym-recording record"}
    env: TraceRecordingWrapper[Any, Any] = TraceRecordingWrapper(base, args.dir, metadata=metadata)
    steps = 0
    with env:
        env.action_space.seed(args.seed)
        for i in progress(range(args.episodes), total=args.episodes, desc="recording"):
            env.reset(seed=None if args.seed is None else args.seed + i)
            done = False
            while not done:
                _, _, terminated, truncated, _ = env.step(env.action_space.sample())
                steps += 1
                done = terminated or truncated
    directory = env.directory
    with load(directory) as rec:
        returns = [ep.total_reward for ep in rec]
    q = shlex.quote(directory)
    print(f"Recorded {len(returns)} episodes ({steps} steps) of {args.env_id} to {directory}")
    print(f"Mean return {np.mean(returns):.2f} (min {min(returns):g}, max {max(returns):g}).")
    print()
    print("Look at them:")
    print(f"  gym-recording info {q}")
    print(f"  gym-recording verify {q}")
    print(f"  gym-recording view {q}          # in the browser")
    print(
        f'  python -c "import gym_recording; rec = gym_recording.load({directory!r}); '
        'print(rec[0])"'
    )
    return EXIT_OK


# -------------------------------------------------------------------------------------- info


def _human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"  # pragma: no cover


def _cmd_info(args: argparse.Namespace) -> int:
    from gym_recording._reader import load

    with load(args.directory) as rec:
        lengths, returns, term, trunc = [], [], 0, 0
        for ep in progress(rec, total=len(rec), desc="reading"):
            lengths.append(ep.length)
            returns.append(ep.total_reward)
            term += ep.terminated
            trunc += ep.truncated
        size = 0
        for name in os.listdir(rec.directory):
            if name.startswith("openaigym.trace."):
                with contextlib.suppress(OSError):
                    size += os.path.getsize(os.path.join(rec.directory, name))
        rows: list[tuple[str, Any]] = [
            ("directory", rec.directory),
            ("env", rec.env_id or "(not recorded)"),
            ("format", ", ".join(sorted({w.version for w in rec.writers})) or "-"),
            ("writers", len(rec.writers)),
            ("batches", sum(len(w.batches) for w in rec.writers)),
            ("episodes", len(rec)),
            ("steps", int(np.sum(lengths)) if lengths else 0),
            ("bytes", _human_bytes(size)),
            ("observation space", rec.observation_space),
            ("action space", rec.action_space),
        ]
        if lengths:
            rows += [
                ("terminated / truncated / cut", f"{term} / {trunc} / {len(rec) - term - trunc}"),
                (
                    "episode length",
                    f"mean {np.mean(lengths):.1f}, min {min(lengths)}, max {max(lengths)}",
                ),
                (
                    "return",
                    f"mean {np.mean(returns):.3f}, std {np.std(returns):.3f}, "
                    f"min {min(returns):g}, max {max(returns):g}",
                ),
            ]
        if rec.metadata:
            rows.append(("metadata", rec.metadata))
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    return EXIT_OK


# ------------------------------------------------------------------------------------ others


def _cmd_view(args: argparse.Namespace) -> int:
    from gym_recording._viewer import serve

    serve(args.directory, port=args.port, open_browser=not args.no_browser)
    return EXIT_OK


def _cmd_verify(args: argparse.Namespace) -> int:
    from gym_recording._verify import verify_cli

    return verify_cli(args.directory, clean=args.clean)


def _cmd_export(args: argparse.Namespace) -> int:
    from gym_recording._export import export

    where = export(args.directory, to=args.to, out=args.out)
    print(f"Exported {args.directory} as {args.to} to {where}")
    return EXIT_OK


def _cmd_import_minari(args: argparse.Namespace) -> int:
    from gym_recording._export import import_minari

    directory = import_minari(args.dataset_id, args.out)
    print(f"Imported Minari dataset {args.dataset_id} to {directory}")
    print(f"  gym-recording info {shlex.quote(directory)}")
    return EXIT_OK


def _version() -> str:
    """The version, and which step records: the C one, or pure Python (and why)."""
    from gym_recording import recording

    if recording._speedups is not None:
        how = "C step"
    elif os.environ.get("GYM_RECORDING_PURE_PYTHON"):
        how = "pure Python: GYM_RECORDING_PURE_PYTHON is set"
    else:
        how = "pure Python: the C step was not built (no C compiler at install?)"
    return f"gym-recording {__version__} ({how})"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gym-recording",
        description="Record Gymnasium environments to trace files, and inspect them.",
    )
    p.add_argument("--version", action="version", version=_version())
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    r = sub.add_parser(
        "record",
        help="record a random policy on a registered environment",
        description="Record episodes of a uniform random policy on ENV_ID.",
    )
    r.add_argument(
        "env_id",
        nargs="?",
        default="CartPole-v1",
        metavar="ENV_ID",
        help="a registered Gymnasium environment id (default: CartPole-v1)",
    )
    r.add_argument("--episodes", type=int, default=20, help="episodes to record (default: 20)")
    r.add_argument(
        "--dir",
        default=None,
        help="directory to write to (default: a new one under the temp directory)",
    )
    r.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the first episode and of the policy (default: 0)",
    )
    r.add_argument("--max-steps", type=int, default=None, help="cut episodes after this many steps")
    r.set_defaults(func=_cmd_record)

    i = sub.add_parser(
        "info",
        help="summarise a recording",
        description="Print episodes, steps, bytes, spaces, writers and returns.",
    )
    i.add_argument("directory", metavar="DIR")
    i.set_defaults(func=_cmd_info)

    v = sub.add_parser(
        "verify",
        help="check every file of a recording",
        description="Check every manifest, batch, array and offset of DIR. "
        "Exits 0 if the recording is sound, 1 otherwise.",
    )
    v.add_argument("directory", metavar="DIR")
    v.add_argument(
        "--clean", action="store_true", help="remove leftover temporary files of interrupted writes"
    )
    v.set_defaults(func=_cmd_verify)

    e = sub.add_parser(
        "export",
        help="export a recording to parquet, minari or npz",
        description="Export DIR. OUT is a file path for parquet and npz, and a "
        "Minari dataset id (namespace/name-v0) for minari.",
    )
    e.add_argument("directory", metavar="DIR")
    e.add_argument("--to", required=True, choices=["parquet", "minari", "npz"])
    e.add_argument("out", metavar="OUT")
    e.set_defaults(func=_cmd_export)

    m = sub.add_parser(
        "import-minari",
        help="convert a Minari dataset into a recording",
        description="Write the episodes of a local Minari dataset to OUT_DIR.",
    )
    m.add_argument("dataset_id", metavar="DATASET_ID")
    m.add_argument("out", metavar="OUT_DIR")
    m.set_defaults(func=_cmd_import_minari)

    w = sub.add_parser(
        "view",
        help="open a recording in the browser",
        description="Serve DIR read-only on 127.0.0.1 with the trace viewer.",
    )
    w.add_argument("directory", metavar="DIR")
    w.add_argument("--port", type=int, default=0, help="port (default: any free port)")
    w.add_argument("--no-browser", action="store_true", help="only print the URL")
    w.set_defaults(func=_cmd_view)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = _parser().parse_args(argv)
    try:
        return int(args.func(args))
    except RecordingError as exc:
        _err(str(exc))
        return EXIT_PROBLEM
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `gym-recording info DIR | head`
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
