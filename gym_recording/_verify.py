"""``gym-recording verify DIR``: check every file of a recording and say what is wrong, per file.

:func:`verify` reads every manifest, batch, array reference and offset with the reader's own
decoders (:mod:`gym_recording._format`), checks what ties them together (episode counts, steps
and sizes against the manifest, the parts of split episodes, file names, arrays that share
bytes), then reads every episode through :func:`gym_recording.load` as a user would. Anything
the reader refuses is therefore reported too.

Leftover temporary files (``.gymrec-tmp-*``) of writes interrupted by a crash are reported but
do not make a recording unsound: readers ignore them. :func:`remove_temp_files` (``--clean``)
deletes them safely: only regular files with that prefix directly in the directory (never a
symbolic link or a directory), and only those not modified for :data:`CLEAN_MIN_AGE` seconds,
so that the temporary file of a writer that is still running is left alone.
"""

from __future__ import annotations

import itertools
import os
import stat
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from gym_recording import _format
from gym_recording._errors import RecordingError, TraceFormatError
from gym_recording._storage import TEMP_PREFIX, LocalStorage, Storage, open_storage

__all__ = ["CLEAN_MIN_AGE", "VerifyReport", "remove_temp_files", "verify", "verify_cli"]

#: ``--clean`` removes a temporary file only if it was not modified for this many seconds. A
#: live writer touches its temporary file while writing and renames it right after its fsync,
#: so an older one belongs to a write that was interrupted.
CLEAN_MIN_AGE = 60.0

_TRACE_PREFIX = "openaigym.trace."


@dataclass
class VerifyReport:
    """What :func:`verify` found.

    Attributes:
        directory: The recording directory.
        problems: Per file (a path inside the directory, or the directory), what is wrong with
            it, one message per problem. Empty for a sound recording.
        temp_files: Leftover temporary files (names) of interrupted writes; readers ignore them.
        temp_ages: Seconds since each temporary file was last modified (same order).
        notes: Per file, observations that are not problems (e.g. batch files no manifest
            lists yet, left by a flush interrupted before its manifest was written).
        manifests: Manifests checked.
        batches: Batches checked.
        episode_objects: Episode objects (episodes, or parts of split episodes) decoded.
        episodes: Episodes read through :func:`gym_recording.load`.
        arrays: Array references validated (name, dtype, shape, size, offset).
        steps: Steps in the episode objects.
    """

    directory: str
    problems: dict[str, list[str]] = field(default_factory=dict)
    temp_files: list[str] = field(default_factory=list)
    temp_ages: list[float] = field(default_factory=list)
    notes: dict[str, list[str]] = field(default_factory=dict)
    manifests: int = 0
    batches: int = 0
    episode_objects: int = 0
    episodes: int = 0
    arrays: int = 0
    steps: int = 0

    @property
    def ok(self) -> bool:
        """Whether the recording is sound: no problem in any file."""
        return not self.problems

    @property
    def problem_count(self) -> int:
        """The number of problems, all files together."""
        return sum(len(p) for p in self.problems.values())

    def add(self, path: str, problem: str) -> None:
        """Record a problem of file ``path`` (once)."""
        probs = self.problems.setdefault(path, [])
        if problem not in probs:
            probs.append(problem)

    def add_error(self, exc: TraceFormatError, default_path: str) -> None:
        """Record a :class:`TraceFormatError` under the file it names."""
        path = exc.path or default_path
        message = str(exc)
        if message.startswith(f"{path}: "):
            message = message[len(path) + 2 :]
        self.add(path, message)

    def note(self, path: str, text: str) -> None:
        """Record an observation about ``path`` that is not a problem."""
        self.notes.setdefault(path, []).append(text)

    def lines(self) -> list[str]:
        """The report as human-readable lines: one per problem or note, each naming its file."""
        out = [f"{path}: {p}" for path, probs in self.problems.items() for p in probs]
        for name, age in zip(self.temp_files, self.temp_ages, strict=True):
            out.append(
                f"{os.path.join(self.directory, name)}: leftover temporary file of an "
                f"interrupted write, last modified {age:.0f} s ago (readers ignore it; "
                "--clean removes it)"
            )
        out.extend(f"{path}: note: {n}" for path, notes in self.notes.items() for n in notes)
        return out

    def summary(self) -> str:
        """One line: what was checked, and the verdict."""
        checked = (
            f"{self.manifests} manifest(s), {self.batches} batch(es), "
            f"{self.episode_objects} episode object(s), {self.arrays} array(s), "
            f"{self.steps} step(s); {self.episodes} episode(s) read"
        )
        if self.ok:
            verdict = "OK"
        else:
            verdict = f"{self.problem_count} problem(s) in {len(self.problems)} file(s)"
        temps = f"; {len(self.temp_files)} leftover temporary file(s)" if self.temp_files else ""
        return f"{self.directory}: {verdict} ({checked}{temps})"


@dataclass
class _BatchState:
    """What one batch left for the next: whether its last episode continues, and its part."""

    continues: bool = False
    part: int = 0


def _message(exc: TraceFormatError) -> str:
    text = str(exc)
    if exc.path and text.startswith(f"{exc.path}: "):
        return text[len(exc.path) + 2 :]
    return text


class _Verifier:
    def __init__(self, directory: str, storage: Storage, report: VerifyReport) -> None:
        self.directory = directory
        self.storage = storage
        self.report = report
        self.listed: dict[str, str] = {}  # file name -> the manifest that lists it

    def path(self, name: str) -> str:
        return os.path.join(self.directory, name)

    def manifest(self, name: str) -> None:
        rep, path = self.report, self.path(name)
        try:
            data = self.storage.read_bytes(name, _format.MAX_MANIFEST_BYTES)
            m = _format.parse_manifest(data, name, path)
        except TraceFormatError as exc:
            rep.add_error(exc, path)
            return
        rep.manifests += 1
        from gym_recording._spaces import space_from_json

        for key in ("observation_space", "action_space"):
            try:
                space_from_json(getattr(m, key), where=key)
            except TraceFormatError as exc:
                rep.add(path, _message(exc))
        prefix = name[: -len(".manifest.json")]
        for i, entry in enumerate(m.batches):
            for fn in (entry.fn, entry.bin):
                if fn is None:
                    continue
                other = self.listed.setdefault(fn, name)
                if other != name:
                    rep.add(path, f"batches[{i}]: {fn} is also listed by {other}")
            if not m.legacy:
                want_fn, want_bin = _format.batch_names(prefix, entry.first)
                if entry.fn != want_fn or entry.bin not in (None, want_bin):
                    rep.add(
                        path,
                        f"batches[{i}]: expected the files {want_fn} and {want_bin} "
                        f"(FORMAT.md §1), got {entry.fn} and {entry.bin}",
                    )
        state = _BatchState()
        for i, entry in enumerate(m.batches):
            state = self.batch(m, i, entry, state)
        if m.batches and state.continues:
            rep.note(
                path,
                "the last episode is unfinished: its last part is not written yet (a live "
                "writer, or one that was killed); readers hide it",
            )

    def batch(
        self, m: _format.Manifest, i: int, entry: _format.BatchEntry, prev: _BatchState
    ) -> _BatchState:
        rep, path = self.report, self.path(entry.fn)
        after = _BatchState(continues=entry.continues)
        try:
            data = self.storage.read_bytes(entry.fn, _format.MAX_BATCH_JSON_BYTES)
            parsed = _format.parse_json(data, path, strict=not m.legacy)
            _format.check_json_depth(parsed, path)
            objs = _format.decode_batch_episodes(parsed, entry, path)
            ctx = _format.DecodeContext(path, self.storage.map)
            _format.check_batch_entry(entry, objs, len(data), ctx)
        except TraceFormatError as exc:
            rep.add_error(exc, path)
            return after
        rep.batches += 1
        spans: dict[str, list[tuple[int, int, int]]] = {}
        for j, obj in enumerate(objs):
            where = f"episodes[{j}]"
            try:
                ep = _format.decode_episode(obj, ctx, where)
            except TraceFormatError as exc:
                rep.add_error(exc, path)
                continue
            rep.episode_objects += 1
            rep.steps += len(ep["rewards"])
            for blob, ep_spans in ctx.spans.items():
                spans.setdefault(blob, []).extend((a, b, j) for a, b in ep_spans)
            last = j == len(objs) - 1
            if ep["continues"] != (last and entry.continues):
                if ep["continues"] and not last:
                    rep.add(path, f"{where}: continues, but only a batch's last episode may")
                else:
                    rep.add(
                        path,
                        f"{where}: 'continues' is {str(ep['continues']).lower()}, but the "
                        f"manifest {m.name} says the batch "
                        f"{'continues' if entry.continues else 'does not continue'}",
                    )
            want_part = prev.part + 1 if j == 0 and prev.continues else 0
            if ep["part"] != want_part:
                rep.add(path, f"{where}: expected part {want_part}, got part {ep['part']}")
            if last:
                after.part = ep["part"]
        rep.arrays += ctx.arrays
        for blob, blob_spans in spans.items():
            self.listed.setdefault(blob, m.name)
            blob_spans.sort()
            for (_, end_a, ja), (start_b, _, jb) in itertools.pairwise(blob_spans):
                if start_b < end_a:
                    rep.add(
                        path,
                        f"episodes[{ja}] and episodes[{jb}] have arrays that share bytes "
                        f"of {blob} (at offset {start_b})",
                    )
                    break
        return after

    def read_all(self) -> None:
        """Read every episode as users do; report what the reader refuses and we did not."""
        from gym_recording._reader import load

        rep = self.report
        try:
            with load(self.directory) as rec:
                for _ in rec:
                    rep.episodes += 1
        except TraceFormatError as exc:
            where = exc.path or self.directory
            if where not in rep.problems:
                rep.add_error(exc, self.directory)
        except Exception as exc:  # a reader bug must not hide behind a crash of verify
            rep.add(self.directory, f"the reader failed unexpectedly: {type(exc).__name__}: {exc}")


def _temp_names(names: Iterable[str]) -> list[str]:
    return sorted(n for n in names if n.startswith(TEMP_PREFIX))


def verify(directory: str | os.PathLike[str]) -> VerifyReport:
    """Check every manifest, batch, array reference and offset of a recording.

    Args:
        directory: The recording directory.

    Returns:
        A :class:`VerifyReport`; ``report.ok`` is true for a sound recording. Leftover
        temporary files are listed in ``report.temp_files`` without making it unsound.

    Example:
        >>> import tempfile, numpy as np
        >>> from gym_recording import TraceRecording
        >>> d = tempfile.mkdtemp()
        >>> with TraceRecording(d) as rec:
        ...     rec.add_reset(np.zeros(3))
        ...     rec.add_step(0, np.ones(3), 1.0)
        >>> report = verify(d)
        >>> report.ok, report.manifests, report.episodes
        (True, 1, 1)
    """
    directory = os.fspath(directory)
    report = VerifyReport(directory)
    try:
        storage = open_storage(directory, create=False)
        names = storage.list_names()
    except (TraceFormatError, RecordingError) as exc:
        report.add(directory, _message(exc) if isinstance(exc, TraceFormatError) else str(exc))
        return report
    v = _Verifier(directory, storage, report)
    report.temp_files = _temp_names(names)
    now = time.time()
    for name in report.temp_files:
        try:
            report.temp_ages.append(max(0.0, now - os.lstat(v.path(name)).st_mtime))
        except OSError:
            report.temp_ages.append(0.0)
    for name in sorted(names):
        if _format.MANIFEST_RE.match(name) is not None:
            v.manifest(name)
    for name in sorted(names):
        if (
            name.startswith(_TRACE_PREFIX)
            and _format.MANIFEST_RE.match(name) is None
            and name not in v.listed
        ):
            report.note(
                v.path(name),
                "no manifest lists this file (a flush interrupted before its manifest was "
                "written, or a damaged manifest); readers ignore it",
            )
    v.read_all()
    return report


def remove_temp_files(
    directory: str | os.PathLike[str], *, min_age: float = CLEAN_MIN_AGE
) -> tuple[list[str], list[tuple[str, str]]]:
    """Delete leftover temporary files of interrupted writes, safely.

    Only regular files whose name starts with ``.gymrec-tmp-`` directly in ``directory`` are
    removed; symbolic links, directories and anything else are left alone, and so is a file
    modified less than ``min_age`` seconds ago, which may belong to a writer still running.

    Args:
        directory: The recording directory (local).
        min_age: Seconds a temporary file must have been left unmodified to be removed.

    Returns:
        The names removed, and ``(name, reason)`` for those left in place.
    """
    directory = os.fspath(directory)
    if not isinstance(open_storage(directory, create=False), LocalStorage):
        return [], []
    removed: list[str] = []
    kept: list[tuple[str, str]] = []
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
    dir_fd = os.open(directory, flags)
    try:
        now = time.time()
        for name in _temp_names(os.listdir(dir_fd)):
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:  # renamed by its writer meanwhile
                continue
            if not stat.S_ISREG(st.st_mode):
                kept.append((name, "not a regular file"))
                continue
            age = now - st.st_mtime
            if age < min_age:
                kept.append((name, f"modified {age:.0f} s ago: a writer may still use it"))
                continue
            try:
                os.unlink(name, dir_fd=dir_fd)
            except FileNotFoundError:
                continue
            except OSError as exc:
                kept.append((name, f"cannot remove it: {exc.strerror or exc}"))
                continue
            removed.append(name)
    finally:
        os.close(dir_fd)
    return removed, kept


def _safe(text: str) -> str:
    """``text`` printable on this stdout whatever its encoding (names may be odd)."""
    enc = getattr(sys.stdout, "encoding", None) or "utf-8"
    return text.encode(enc, "backslashreplace").decode(enc, "replace")


def verify_cli(directory: str | os.PathLike[str], *, clean: bool = False) -> int:
    """Run ``gym-recording verify DIR [--clean]``: print what is wrong, per file.

    Prints one line per problem, each starting with the file at fault, then the leftover
    temporary files (removed with ``clean``, if older than :data:`CLEAN_MIN_AGE` seconds),
    notes, and a summary line.

    Args:
        directory: The recording directory.
        clean: Remove leftover temporary files of interrupted writes (see
            :func:`remove_temp_files`).

    Returns:
        The exit code: 0 if the recording is sound, 1 if any file has a problem.
    """
    directory = os.fspath(directory)
    report = verify(directory)
    removed: list[str] = []
    kept: list[tuple[str, str]] = []
    if clean and report.temp_files:
        try:
            removed, kept = remove_temp_files(directory)
        except OSError as exc:
            report.add(directory, f"cannot remove temporary files: {exc.strerror or exc}")
    for line in report.lines():
        print(_safe(line))
    for name in removed:
        print(_safe(f"{os.path.join(directory, name)}: removed"))
    for name, why in kept:
        print(_safe(f"{os.path.join(directory, name)}: kept ({why})"))
    if removed:
        gone = set(removed)
        keep = [
            (n, a)
            for n, a in zip(report.temp_files, report.temp_ages, strict=True)
            if n not in gone
        ]
        report.temp_files = [n for n, _ in keep]
        report.temp_ages = [a for _, a in keep]
    print(_safe(report.summary()))
    return 0 if report.ok else 1
