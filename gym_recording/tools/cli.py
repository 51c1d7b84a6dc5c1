"""The ``gym-recording`` command line (also ``python -m gym_recording``).

Exit codes: 0 success; 1 the recording has problems or a command failed; 2 bad usage.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import logging
import os
import shlex
import shutil
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from gym_recording._accel import PURE_PYTHON_FORCED
from gym_recording._errors import NoRecordingWarning, ReadError, RecordingError, TraceFormatError
from gym_recording._optional import require
from gym_recording._progress import progress
from gym_recording._version import __version__
from gym_recording.format.codec import check_level
from gym_recording.format.names import classify, holds_no_recording, no_recording
from gym_recording.read.recording import load
from gym_recording.read.replay import install_hint
from gym_recording.record import steps
from gym_recording.storage import is_url, to_open_again
from gym_recording.tools._source import episodes, episodes_text
from gym_recording.tools.verify import CLEAN_MIN_AGE, printable, verify_cli

__all__ = ["main"]

EXIT_OK = 0
EXIT_PROBLEM = 1
EXIT_USAGE = 2


def _err(msg: str) -> None:
    print(printable(f"gym-recording: error: {msg}"), file=sys.stderr)


def _warn(msg: str) -> None:
    print(printable(f"gym-recording: warning: {msg}"), file=sys.stderr)


def _out(text: str = "") -> None:
    """Print ``text`` on stdout, whatever its encoding can hold (paths may hold anything)."""
    print(printable(text))


def _command() -> str:
    """How to run ``gym-recording`` again, as typed into a shell.

    ``gym-recording`` when that name finds the one installed with this Python; else that
    one's full path (a venv that is not activated); else ``python -m gym_recording`` with
    this Python's path.
    """
    script = os.path.join(os.path.dirname(sys.executable), "gym-recording")
    if not (os.path.isfile(script) and os.access(script, os.X_OK)):
        return f"{shlex.quote(sys.executable)} -m gym_recording"
    found = shutil.which("gym-recording")
    if found and os.path.realpath(found) == os.path.realpath(script):
        return "gym-recording"
    return shlex.quote(script)


def _python() -> str:
    """This Python, as typed into a shell: ``python`` when that name finds it."""
    found = shutil.which("python")
    if found and os.path.realpath(found) == os.path.realpath(sys.executable):
        return "python"
    return shlex.quote(sys.executable)


def _shell_word(text: str) -> str:
    """``text`` as one shell word, in double quotes when it can be (easier to read)."""
    if not any(c in text for c in '"$`\\!'):
        return f'"{text}"'
    return shlex.quote(text)


def _port(text: str) -> int:
    """A TCP port number (argparse type), 0 for any free one."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        msg = f"expected a port number from 0 to 65535, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return port


def _gone_at_exit(location: str, name: str, command: str) -> bool:
    """Whether ``location`` (``name``) is ``memory://``: gone when ``command`` exits; says so."""
    if not (is_url(location) and "memory" in location.split("://")[0].lower().split("::")):
        return False
    _err(
        f"{name} {location} is in fsspec's memory filesystem, which lives only in this "
        f"process: it would be gone when `{command}` exits; give a local directory, or an "
        "object store URL such as s3://bucket/run1"
    )
    return True


def _bad_level(level: int | None, flag: str) -> bool:
    """Whether ``level`` (given as ``flag``) is out of zstd's range; if so, says so."""
    if level is None:
        return False
    try:
        check_level(level, flag)
    except ValueError as exc:
        _err(str(exc))
        return True
    return False


class _FlagGiven(argparse.Action):
    """Store the option's value, and in ``flag`` the option string it was given as."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values)
        namespace.flag = option_string


def _path_word(path: str) -> str:
    """``path`` as one shell word that no command takes for an option (``./-run``)."""
    return shlex.quote(os.path.join(".", path) if path.startswith("-") else path)


# ------------------------------------------------------------------------------------ record


class _Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, ``docker stop``, a scheduler's preemption) during a command."""


def _on_sigterm() -> Callable[[], None]:
    """Have SIGTERM stop a command as a Ctrl-C does; what undoes it.

    ``record`` then writes its episodes; a command that writes a file or a copy removes what
    it wrote of it. A second SIGTERM kills, as without. Not where a handler is set already
    (the caller's, when :func:`main` is called from Python; an env may set its own later,
    which then decides). (Only the main thread handles signals.)
    """
    if threading.current_thread() is not threading.main_thread() or (
        signal.getsignal(signal.SIGTERM) != signal.SIG_DFL  # (the env's own: it decides)
    ):
        return lambda: None

    def stop(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        raise _Terminated

    before = signal.signal(signal.SIGTERM, stop)

    def restore() -> None:
        signal.signal(signal.SIGTERM, before)

    return restore


def _cmd_record(args: argparse.Namespace) -> int:
    import gymnasium as gym

    from gym_recording.wrappers import TraceRecordingWrapper
    from gym_recording.wrappers._render import render_choice

    if args.episodes < 1:
        _err(f"--episodes must be at least 1, got {args.episodes}")
        return EXIT_USAGE
    if args.max_steps is not None and args.max_steps < 1:
        _err(f"--max-steps must be at least 1, got {args.max_steps}")
        return EXIT_USAGE
    if args.seed is not None and args.seed < 0:
        _err(f"--seed must be 0 or more (Gymnasium's seeds are), got {args.seed}")
        return EXIT_USAGE
    if args.compression_level is not None and args.compression is None:
        _err("--compression-level needs --compression zstd")
        return EXIT_USAGE
    if _bad_level(args.compression_level, "--compression-level"):
        return EXIT_USAGE
    if args.dir == "":
        _err("expected --dir to name the recording's directory, got an empty string")
        return EXIT_USAGE
    if args.dir is not None and _gone_at_exit(args.dir, "--dir", "record"):
        return EXIT_USAGE
    kwargs: dict[str, Any] = {"max_episode_steps": args.max_steps} if args.max_steps else {}
    if args.record_render:
        kwargs["render_mode"] = "rgb_array"
    try:
        base = gym.make(args.env_id, **kwargs)
    except Exception as exc:  # unknown id, missing extra (box2d, atari...), bad kwargs
        hint = install_hint(exc)
        if ":" not in args.env_id and isinstance(exc, gym.error.UnregisteredEnv):
            hint = (
                "; an env that its package registers when imported is named with the "
                "package, e.g. ale_py:ALE/Pong-v5 or minigrid:MiniGrid-Empty-5x5-v0"
            )
        _err(f"cannot make environment {args.env_id!r}: {str(exc).rstrip('.')}{hint}")
        return EXIT_USAGE
    if args.record_render:
        try:
            render_choice(True, base, vector=False)
        except RecordingError as exc:  # an env that does not render RGB frames
            base.close()
            _err(str(exc))
            return EXIT_USAGE
        try:  # (before a directory is made: pygame missing, say, for Gymnasium's own envs)
            base.reset(seed=args.seed)
        except Exception:  # (not rendering's: the recording's reset meets it, as without)
            pass
        else:
            try:
                base.render()
            except Exception as exc:
                base.close()
                _err(f"cannot render {args.env_id!r} to record its frames: {exc}")
                return EXIT_USAGE
    metadata = {"policy": "uniform random", "command": "gym-recording record"}
    try:
        env: TraceRecordingWrapper[Any, Any] = TraceRecordingWrapper(
            base,
            args.dir,
            metadata=metadata,
            compression=args.compression,
            compression_level=args.compression_level,
            record_render=args.record_render,
        )
    except BaseException as exc:  # (a --dir that cannot be made: main says why)
        base.close()
        if not isinstance(exc, ValueError) or isinstance(exc, RecordingError):
            raise
        _err(str(exc))  # (a value the wrapper refuses)
        return EXIT_USAGE
    interrupted, i = 0, 0  # (the exit code of an interrupted run: 130 Ctrl-C, 143 SIGTERM)
    try:
        with env:  # (closed, so written, however the loop ends)
            env.action_space.seed(args.seed)
            for i in progress(range(args.episodes), total=args.episodes, desc="recording"):
                env.reset(seed=None if args.seed is None else args.seed + i)
                done = False
                while not done:
                    _, _, terminated, truncated, _ = env.step(env.action_space.sample())
                    done = terminated or truncated
    except KeyboardInterrupt as exc:
        interrupted = 143 if isinstance(exc, _Terminated) else 130
    except RecordingError:
        raise
    except Exception as exc:  # (the env's own error: what was recorded before it is kept)
        _err(
            f"{args.env_id} raised {type(exc).__name__}: {exc} (in episode {i}); the episodes "
            f"before it are kept in {env.directory}; to see where it was raised, step the env "
            "in Python"
        )
        return EXIT_PROBLEM
    # (as given, for the printed commands, which run from here; else where it was made)
    directory = args.dir if args.dir is not None else env.directory
    writer = env.recording.writer_id
    env_id = base.spec.id if base.spec is not None else args.env_id  # (not MODULE:ENV_ID)
    try:
        # (this run's episodes: --dir may hold earlier ones; the env may have changed the
        # working directory, and a URL's shown name hides its password: as given then)
        written = env.directory if args.dir is None else to_open_again(args.dir, env.directory)
        with load(written) as rec:
            returns: list[float] = []
            steps = 0  # (as recorded: an interrupted step may be)
            for ep in rec:  # (one at a time: a long run's episodes need not fit in memory)
                if ep.writer == writer:
                    returns.append(ep.total_reward)
                    steps += ep.length
            others = len(rec) - len(returns)
            envs = {w.env_id for w in rec.writers if w.writer != writer} - {env_id}
    except (TraceFormatError, ReadError) as exc:  # (this run's files are written)
        why = "holds a damaged file" if isinstance(exc, TraceFormatError) else "cannot be read now"
        _warn(f"this run is written, but the directory {why}: {exc}")
        _out(
            f"Recorded {episodes_text(env.recording.episode_count)} of {args.env_id} to {directory}"
        )
        return interrupted or EXIT_PROBLEM
    q = _path_word(directory)
    cmd = _command()
    snippet = f"import gym_recording; rec = gym_recording.load({directory!r}); print(rec[0])"
    if interrupted:
        _out(f"Interrupted: the episodes recorded so far are kept in {directory}")
    _out(f"Recorded {episodes_text(len(returns))} ({steps} steps) of {args.env_id} to {directory}")
    if others:
        _out(f"It also holds {episodes_text(others)} of other runs, recorded earlier.")
    if envs:
        _warn(
            f"{directory} also holds episodes of {', '.join(sorted(map(str, envs)))}: exports "
            "need one env per directory (record each env into a directory of its own)"
        )
    if not returns:
        return interrupted or EXIT_OK
    _out(f"Mean return {np.mean(returns):.2f} (min {min(returns):g}, max {max(returns):g}).")
    _out()
    _out("Look at them:")
    _out(f"  {cmd} info {q}")
    _out(f"  {cmd} verify {q}")
    if not is_url(directory):  # (the viewer serves local directories)
        _out(f"  {cmd} view {q}          # in the browser")
    _out(f"  {_python()} -c {_shell_word(snippet)}")
    if args.record_render:
        beside = directory.rstrip("/")
        if not is_url(beside) and os.path.basename(os.path.normpath(beside)) in ("", ".", ".."):
            beside = os.path.abspath(beside)  # (a sibling of ".", named)
        videos = _path_word(beside + "-videos")
        _out(f"  {cmd} export {q} --to mp4 {videos}   # one video per episode")
    return interrupted or EXIT_OK


# -------------------------------------------------------------------------------------- info


def _human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"  # pragma: no cover


def _array_bytes(*fields: Any) -> int:
    """The bytes of the arrays in ``fields`` as read back (decompressed), in lists too."""

    def count(v: Any) -> int:
        if isinstance(v, np.ndarray):
            return sum(map(count, v.flat)) if v.dtype == object else v.nbytes
        if isinstance(v, dict):
            return sum(map(count, v.values()))
        return sum(map(count, v)) if isinstance(v, (list, tuple)) else 0

    return count(fields)


def _or_not_recorded(value: Any) -> Any:
    """``value``, or ``"(not recorded)"`` for ``None`` (an original-format trace's space)."""
    return "(not recorded)" if value is None else value


def _format_file(name: str) -> bool:
    """Whether ``name`` is a manifest, batch or blob by FORMAT.md §1, the files ``info`` sums.

    A name that only starts like one (an editor's ``*.json~``, a ``*.bak`` copy) is not.
    """
    return classify(name) in ("manifest", "batch", "blob")


def _cmd_info(args: argparse.Namespace) -> int:
    with load(args.directory) as rec:
        if not rec.writers:
            _err(f"{args.directory} {no_recording()}")
            return EXIT_PROBLEM
        lengths, returns, term, trunc, cut, untold = [], [], 0, 0, 0, 0
        version_1 = {w.writer for w in rec.writers if w.version == "1"}  # (no ending recorded)
        arrays, rendered, frame_shapes = 0, 0, set[tuple[int, ...]]()
        damaged = None  # (the episodes before a damaged file are summed up all the same)
        try:
            for ep in episodes(rec, "reading"):
                lengths.append(ep.length)
                returns.append(ep.total_reward)
                if ep.writer in version_1:
                    untold += 1
                else:
                    term += ep.terminated
                    trunc += ep.truncated
                    cut += not (ep.terminated or ep.truncated)
                arrays += _array_bytes(ep.observations, ep.actions, ep.rewards, ep.render_frames)
                if ep.render_frames is not None:
                    rendered += 1
                    frame_shapes.add(ep.render_frames.shape[1:])
        except (TraceFormatError, ReadError) as exc:
            damaged = exc
        sizes: list[int | None] = []  # (of the files FORMAT.md §1 names: no backup, no temp)
        if is_url(rec.directory):  # (as listed by the object store; "-" if it cannot be)
            try:
                # (the URL as given: the recording's directory hides its password)
                fs, root = require("fsspec", "remote", "info").core.url_to_fs(args.directory)
                sizes = [
                    e["size"]
                    for e in fs.ls(root, detail=True)
                    if _format_file(str(e["name"]).rsplit("/", 1)[-1])
                ]
            except Exception:
                sizes = [None]
        elif os.path.isdir(rec.directory):
            for name in os.listdir(rec.directory):
                if _format_file(name):
                    with contextlib.suppress(OSError):
                        sizes.append(os.path.getsize(os.path.join(rec.directory, name)))
        on_disk = None if None in sizes else sum(s or 0 for s in sizes)
        rows: list[tuple[str, Any]] = [
            ("directory", rec.directory),
            (
                "env",
                ", ".join(dict.fromkeys(w.env_id for w in rec.writers if w.env_id))
                or "(not recorded)",
            ),
            ("format", ", ".join(sorted({w.version for w in rec.writers})) or "-"),
            ("writers", len({w.writer for w in rec.writers})),
            ("batches", sum(len(w.batches) for w in rec.writers)),
            ("episodes", len(rec)),
            ("steps", int(np.sum(lengths)) if lengths else 0),
            (
                "bytes",
                ("-" if on_disk is None else _human_bytes(on_disk))
                + (f" (compressed arrays: {', '.join(rec.codecs)})" if rec.codecs else ""),
            ),
            ("arrays, read back", _human_bytes(arrays)),
            ("observation space", _or_not_recorded(rec.observation_space)),
            ("action space", _or_not_recorded(rec.action_space)),
        ]
        if lengths:
            shapes = ", ".join("x".join(map(str, s)) for s in sorted(frame_shapes))
            rows.append(
                (
                    "rendered frames",
                    f"in {rendered} of {len(lengths)} episodes ({shapes})"
                    if rendered
                    else "none (record with record_render=True, or --record-render)",
                )
            )
        w0 = rec.writers[0]
        if any(
            (w.observation_space, w.action_space) != (w0.observation_space, w0.action_space)
            for w in rec.writers
        ):
            rows.append(("note", "the writers record different spaces: the first one's above"))
        if lengths:
            rows += [
                (
                    "terminated / truncated / cut",
                    f"{term} / {trunc} / {cut}"
                    + (
                        f" (and {untold} of format 1, which did not record how they ended)"
                        if untold
                        else ""
                    ),
                ),
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
        metadata = [w.metadata for w in rec.writers]
        if any(metadata):
            if all(m == metadata[0] for m in metadata):
                rows.append(("metadata", metadata[0]))
            else:  # writers that differ (the sub-envs of a vector env): each one's
                rows += [(f"metadata, writer {w.writer}", w.metadata) for w in rec.writers]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(printable(f"{k:<{width}}  {v}".replace("\n", "\\n")))  # (one line each)
    if damaged is not None:
        _err(
            f"read {len(lengths)} of {len(rec)} episodes (the steps, lengths and returns above "
            f"are theirs), then: "
            f"{damaged}. `{_command()} verify {_path_word(rec.directory)}` lists every "
            "damaged file; `gym_recording.load(...)[i]` still reads the episodes of the others"
        )
        return EXIT_PROBLEM
    return EXIT_OK


# ------------------------------------------------------------------------------------ others


def _cmd_view(args: argparse.Namespace) -> int:
    from gym_recording.tools.viewer import serve

    names: list[str] = []
    with contextlib.suppress(OSError):  # (a missing or unreadable directory: serve says so)
        names = os.listdir(args.directory)
    if holds_no_recording(names):  # (said as info and verify say it; served, as one may come)
        _warn(f"{args.directory} {no_recording(names)}")
    try:
        serve(args.directory, port=args.port, open_browser=not args.no_browser)
    except OSError as exc:
        if exc.errno not in (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES):
            raise  # (not the port: stdout full or closed, say, said as other commands say it)
        _err(
            f"cannot serve on port {args.port}: {exc.strerror or exc}; choose another "
            "--port, or leave it out for any free port"
        )
        return EXIT_USAGE
    return EXIT_OK


def _cmd_verify(args: argparse.Namespace) -> int:
    return verify_cli(args.directory, clean=args.clean)


def _cmd_export(args: argparse.Namespace) -> int:
    from gym_recording.tools.export import export

    if not args.out:
        _err("expected OUT to name what to write, got an empty string")
        return EXIT_USAGE
    where = export(args.directory, to=args.to, out=args.out)
    _out(f"Exported {args.directory} as {args.to} to {where}")
    return EXIT_OK


def _cmd_recode(args: argparse.Namespace) -> int:
    from gym_recording.tools.recode import recode

    level = getattr(args, "level", None)
    if _bad_level(level, getattr(args, "flag", "--compression-level")):
        return EXIT_USAGE
    if not args.out:
        _err("expected OUT to name the copy's directory, got an empty string")
        return EXIT_USAGE
    if _gone_at_exit(args.out, "OUT", args.command):
        return EXIT_USAGE
    try:
        out = recode(args.directory, args.out, compression=args.codec, compression_level=level)
    except ValueError as exc:  # a value refused (a damaged file: below)
        if isinstance(exc, RecordingError):
            raise
        _err(str(exc))
        return EXIT_USAGE
    how = "with its arrays compressed" if args.codec else "with every array raw"
    _out(f"Copied {args.directory} to {out} {how}")
    _out(f"  {_command()} verify {_path_word(out)}")
    return EXIT_OK


def _cmd_import_minari(args: argparse.Namespace) -> int:
    from gym_recording.tools.minari import import_minari

    if not args.out:
        _err("expected OUT_DIR to name the recording's directory, got an empty string")
        return EXIT_USAGE
    if _gone_at_exit(args.out, "OUT_DIR", "import-minari"):
        return EXIT_USAGE
    directory = import_minari(args.dataset_id, args.out)
    _out(f"Imported Minari dataset {args.dataset_id} to {directory}")
    _out(f"  {_command()} info {_path_word(directory)}")
    return EXIT_OK


def _version() -> str:
    """The version, and whether the C extension runs (step, writes, views), or why not."""
    if steps.ACCELERATED:
        how = "C extension: step, writes, views"
    elif PURE_PYTHON_FORCED:
        how = "pure Python: GYM_RECORDING_PURE_PYTHON is set"
    else:
        how = (
            "pure Python: the optional C extension gym_recording._speedups is not "
            "built in this install (pip builds it when installing from source with a C "
            "compiler; a source tree used without installing has none)"
        )
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
        help="a registered Gymnasium environment id (default: CartPole-v1); MODULE:ENV_ID "
        "imports MODULE first, for envs their package registers on import "
        "(ale_py:ALE/Pong-v5, minigrid:MiniGrid-Empty-5x5-v0)",
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
    r.add_argument(
        "--compression",
        choices=["zstd"],
        default=None,
        help="compress the arrays losslessly, each that shrinks (default: raw arrays, "
        "readable by every reader)",
    )
    r.add_argument(
        "--compression-level", type=int, default=None, help="zstd's level, 1-22 (default: 3)"
    )
    r.add_argument(
        "--record-render",
        action="store_true",
        help="also record the env's rendered RGB frames (made with render_mode='rgb_array'); "
        "best with --compression zstd",
    )
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
        "--clean",
        action="store_true",
        help="remove leftover temporary files of interrupted writes: only those left "
        f"unmodified for {CLEAN_MIN_AGE:.0f} s or more (a younger one may be a running "
        "writer's)",
    )
    v.set_defaults(func=_cmd_verify)

    e = sub.add_parser(
        "export",
        help="export a recording to parquet, minari, npz or mp4 videos",
        description="Export DIR. OUT is a file path for parquet and npz, a "
        "Minari dataset id (namespace/name-v0) for minari, and a new directory for mp4 "
        "(one video per episode, of its rendered frames or image observations).",
    )
    e.add_argument("directory", metavar="DIR")
    e.add_argument("--to", required=True, choices=["parquet", "minari", "npz", "mp4"])
    e.add_argument("out", metavar="OUT")
    e.set_defaults(func=_cmd_export)

    for name, codec, what, description in (
        (
            "compress",
            "zstd",
            "compressed (zstd)",
            "compressed losslessly with zstd (FORMAT.md 6.2), but for those that would not "
            "shrink; the copy needs gym-recording 2.1 or later to read.",
        ),
        (
            "decompress",
            None,
            "raw",
            "stored raw, read zero-copy by every reader of its version (recorded infos "
            "keep their columns: FORMAT.md's opening says which readers read them).",
        ),
    ):
        c = sub.add_parser(
            name,
            help=f"copy a recording with its arrays {what}",
            description=f"Copy DIR to OUT with its arrays {description}",
        )
        c.add_argument("directory", metavar="DIR")
        c.add_argument("out", metavar="OUT")
        if codec:
            c.add_argument(
                "--compression-level",
                "--level",
                dest="level",
                type=int,
                default=None,
                action=_FlagGiven,
                help="zstd's level, 1-22 (default: 3), as record's --compression-level",
            )
        c.set_defaults(func=_cmd_recode, codec=codec)

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
    w.add_argument("--port", type=_port, default=0, help="port (default: any free port)")
    w.add_argument("--no-browser", action="store_true", help="only print the URL")
    w.set_defaults(func=_cmd_view)
    return p


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    """A warning as the command line says things: one line, no source location."""
    _warn(str(message))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = _parser().parse_args(argv)
    if getattr(args, "directory", None) == "":
        _err("expected DIR to name a recording directory, got an empty string")
        return EXIT_USAGE
    said = _Said()  # (the library's log warnings, as the command line says things)
    logger = logging.getLogger("gym_recording")
    restore_sigterm = _on_sigterm()  # (SIGTERM stops any command as a Ctrl-C does)
    try:  # (nothing between: an interrupt leaves neither the handler nor the signal's)
        logger.addHandler(said)
        return _run_command(args)
    except KeyboardInterrupt as exc:  # (what a command was writing is removed on the way)
        terminated = isinstance(exc, _Terminated)
        _err(f"interrupted ({'SIGTERM' if terminated else 'Ctrl-C'})")
        return 143 if terminated else 130
    finally:
        restore_sigterm()
        logger.removeHandler(said)


class _Said(logging.Handler):
    """Log records of warnings and errors as one line each, as :func:`_warn` and :func:`_err`."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        (_err if record.levelno >= logging.ERROR else _warn)(record.getMessage())


def _run_command(args: argparse.Namespace) -> int:
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        # (a directory that holds no recording: said once, as the error it is here)
        warnings.simplefilter("error", NoRecordingWarning)
        try:
            return int(args.func(args))
        except (RecordingError, NoRecordingWarning) as exc:
            _err(str(exc))
            return EXIT_PROBLEM
        except BrokenPipeError:  # `gym-recording info DIR | head`
            return EXIT_OK
        except OSError as exc:  # a file it cannot read or write (a read-only place, say)
            name, why = exc.filename, exc.strerror or str(exc)
            _err(f"{name}: {why}" if name is not None else why)
            return EXIT_PROBLEM


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
