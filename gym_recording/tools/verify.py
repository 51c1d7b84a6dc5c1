"""``gym-recording verify DIR``: check every file of a recording and say what is wrong, per file.

:func:`verify` reads every manifest and batch with the reader's own code (the format layer
checks every name, dtype, shape, size and offset, the parts of split episodes, and that no two
arrays share bytes), then reads every episode through :func:`gym_recording.load` as a user
would, so that whatever the reader refuses is reported. It also reports what FORMAT.md forbids
that the reader reads all the same (a manifest's ``format_version`` not ``"2.<minor>"``, a
segment not named ``<writer>.s<k>``, a Text ``charset`` out of code point order), asking the
format layer, where each rule is written once. It takes time linear in the size of the
recording.

Leftover temporary files (``.gymrec-tmp-*``) of writes interrupted by a crash are reported but
do not make a recording unsound: readers ignore them. :func:`remove_temp_files` (``--clean``)
deletes them safely: only regular files with that prefix directly in the directory (never a
symbolic link or a directory), and only those not modified for :data:`CLEAN_MIN_AGE` seconds,
so that the temporary file of a writer that is still running is left alone.
"""

from __future__ import annotations

import os
import re
import stat
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gym_recording._errors import ReadError, RecordingError, TraceFormatError
from gym_recording.format.limits import MAX_MANIFEST_BYTES
from gym_recording.format.manifest import Manifest, decode_manifest, segment_breach
from gym_recording.format.names import (
    classify,
    find_manifests,
    holds_no_recording,
    is_temp_name,
    misnamed_manifest,
    misnamed_manifests,
    no_recording,
)
from gym_recording.format.spaces import space_breaches, space_from_json
from gym_recording.format.wire import version_breach
from gym_recording.read.recording import load, read_ahead, read_batch
from gym_recording.storage import LocalStorage, Storage, open_storage
from gym_recording.storage.remote import redacted

__all__ = [
    "CLEAN_MIN_AGE",
    "VerifyReport",
    "printable",
    "remove_temp_files",
    "verify",
    "verify_cli",
]

#: ``--clean`` removes a temporary file only if it was not modified for this many seconds. A
#: live writer touches its temporary file while writing and renames it right after its fsync,
#: so an older one belongs to a write that was interrupted.
CLEAN_MIN_AGE = 60.0


@dataclass
class VerifyReport:
    """What :func:`verify` found.

    Attributes:
        directory: The recording directory.
        problems: Per file (a path inside the directory, or the directory), what is wrong with
            it, one message per problem. Empty for a sound recording.
        temp_files: Temporary files (names) of interrupted writes, or of a writer writing
            now; readers ignore them.
        temp_ages: Seconds since each temporary file was last modified (same order);
            ``None`` on remote storage, which ``--clean`` does not change.
        notes: Per file, observations that are not problems (e.g. batch files no manifest
            lists yet, left by a flush interrupted before its manifest was written).
        manifests: Manifests checked.
        batches: Batches checked.
        episode_objects: Episode objects (episodes, or parts of split episodes) decoded.
        episodes: Episodes read through :func:`gym_recording.load`.
        arrays: Array references validated (name, dtype, shape, size, offset).
        compressed: Those of ``arrays`` stored compressed (FORMAT.md §6.2), each decompressed
            and its size checked.
        steps: Steps in the episode objects.

    Example:
        >>> r = VerifyReport("traces")
        >>> r.add("traces/a.json", "bad"); r.add("traces/a.json", "bad")
        >>> r.ok, r.problem_count
        (False, 1)
    """

    directory: str
    problems: dict[str, list[str]] = field(default_factory=dict)
    temp_files: list[str] = field(default_factory=list)
    temp_ages: list[float | None] = field(default_factory=list)
    notes: dict[str, list[str]] = field(default_factory=dict)
    manifests: int = 0
    batches: int = 0
    episode_objects: int = 0
    episodes: int = 0
    arrays: int = 0
    compressed: int = 0
    steps: int = 0
    #: Whether the reader read every episode (else it stopped at a problem).
    read_all: bool = True
    _seen: set[tuple[str, str]] = field(default_factory=set, repr=False)

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
        if (path, problem) not in self._seen:
            self._seen.add((path, problem))
            self.problems.setdefault(path, []).append(problem)

    def add_error(self, exc: TraceFormatError, default_path: str) -> None:
        """Record a :class:`TraceFormatError` under the file it names."""
        path = exc.path or default_path
        self.add(path, _message(exc))

    def note(self, path: str, text: str) -> None:
        """Record an observation about ``path`` that is not a problem."""
        self.notes.setdefault(path, []).append(text)

    def lines(self) -> list[str]:
        """The report as human-readable lines: one per problem or note, each naming its file."""
        out = [f"{path}: {p}" for path, probs in self.problems.items() for p in probs]
        for name, age in zip(self.temp_files, self.temp_ages, strict=True):
            path = os.path.join(self.directory, name)
            if age is None:
                out.append(
                    f"{path}: temporary file of a running or an interrupted write (readers "
                    "ignore it; --clean removes local files only: remove it with the "
                    "storage's own tools)"
                )
            elif age < CLEAN_MIN_AGE:  # (a writer may be writing it now)
                out.append(
                    f"{path}: temporary file, last modified {age:.0f} s ago: a running "
                    "writer's, or left by an interrupted write (readers ignore it; --clean "
                    f"removes it once {CLEAN_MIN_AGE:.0f} s old)"
                )
            else:
                out.append(
                    f"{path}: leftover temporary file of an interrupted write, last modified "
                    f"{age:.0f} s ago (readers ignore it; --clean removes it)"
                )
        out.extend(f"{path}: note: {n}" for path, notes in self.notes.items() for n in notes)
        return out

    def summary(self) -> str:
        """One line: what was checked, and the verdict."""
        checked = (
            f"{self.manifests} manifest(s), {self.batches} batch(es), "
            f"{self.episode_objects} episode object(s), {self.arrays} array(s)"
            + (f" ({self.compressed} compressed)" if self.compressed else "")
            + f", {self.steps} step(s); {self.episodes} episode(s) read"
            + ("" if self.read_all else " before the reader stopped at a problem")
        )
        if self.ok:
            verdict = "OK"
        else:
            verdict = f"{self.problem_count} problem(s) in {len(self.problems)} file(s)"
        temps = f"; {len(self.temp_files)} temporary file(s)" if self.temp_files else ""
        return f"{self.directory}: {verdict} ({checked}{temps})"


def _without(where: str, text: str) -> str:
    """``text`` without a leading ``where: ``, or its password hidden: the place named once."""
    for place in dict.fromkeys((where, redacted(where))):
        text = text.removeprefix(f"{place.rstrip('/')}: ").removeprefix(f"{place}: ")
    return text


def _message(exc: TraceFormatError) -> str:
    return _without(exc.path, str(exc)) if exc.path else str(exc)


def _check_manifest(
    storage: Storage, directory: str, name: str, report: VerifyReport, listed: set[str]
) -> None:
    path = os.path.join(directory, name)
    try:
        m: Manifest = decode_manifest(storage.read_bytes(name, MAX_MANIFEST_BYTES), name, path)
    except TraceFormatError as exc:
        report.add_error(exc, path)
        return
    except ReadError as exc:
        report.add(path, str(exc))
        return
    report.manifests += 1
    # What FORMAT.md forbids but the reader reads all the same: problems of the file too.
    for breach in (version_breach(m.version), segment_breach(m)):
        if breach is not None:
            report.add(path, breach)
    for key in ("observation_space", "action_space"):
        try:
            space_from_json(getattr(m, key), where=key)
        except TraceFormatError as exc:
            report.add(path, _message(exc))
        else:
            for breach in space_breaches(getattr(m, key), where=key):
                report.add(path, breach)
    ahead = 0  # (batches a remote storage fetched ahead)
    for i, entry in enumerate(m.batches):
        listed.update((entry.fn, m.blob_name(i)))
        if i >= ahead:
            ahead = i + max(1, read_ahead(storage, ((m, j) for j in range(i, len(m.batches)))))
        try:
            batch = read_batch(storage, directory, m, i)
        except TraceFormatError as exc:
            report.add_error(exc, os.path.join(directory, entry.fn))
            continue
        except ReadError as exc:  # (a file this process cannot read now: said, the rest read)
            report.add(os.path.join(directory, entry.fn), str(exc))
            continue
        report.batches += 1
        report.episode_objects += len(batch)
        report.arrays += batch.arrays
        report.compressed += batch.compressed
        report.steps += batch.steps
    if m.batches and m.batches[-1].continues:
        report.note(
            path,
            "the last episode is unfinished: its last part is not written yet (a live "
            "writer, or one that was killed); readers hide it",
        )


def _read_all(directory: str, report: VerifyReport, options: dict[str, Any] | None) -> None:
    """Read every episode as users do; report what the reader refuses that was not yet."""
    try:
        with load(directory, storage_options=options) as rec:
            for _ in rec:
                report.episodes += 1
    except TraceFormatError as exc:
        report.read_all = False
        if (exc.path or directory) not in report.problems:
            report.add_error(exc, directory)
    except ReadError as exc:  # (the storage failed: nothing said of the files)
        report.read_all = False
        report.add(directory, _without(directory, str(exc)))
    except Exception as exc:  # a reader bug must not hide behind a crash of verify
        report.read_all = False
        report.add(directory, f"the reader failed unexpectedly: {type(exc).__name__}: {exc}")


def verify(
    directory: str | os.PathLike[str], *, storage_options: dict[str, Any] | None = None
) -> VerifyReport:
    """Check every manifest, batch, array reference and offset of a recording.

    Args:
        directory: The recording directory (a path or an fsspec URL).
        storage_options: Options for the filesystem of a URL ``directory`` (as :func:`load`).

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
        storage = open_storage(directory, create=False, storage_options=storage_options)
        names = storage.list_names()
    except (TraceFormatError, RecordingError) as exc:
        text = _message(exc) if isinstance(exc, TraceFormatError) else str(exc)
        report.add(directory, _without(directory, text))
        return report
    now = time.time()
    local = storage.directory if isinstance(storage, LocalStorage) else None  # (file:// too)
    st: os.stat_result | None
    for name in _temp_names(names):
        path = os.path.join(directory, name)
        try:
            st = None if local is None else os.lstat(os.path.join(local, name))
        except FileNotFoundError:  # (renamed meanwhile, by the writer that was writing it)
            continue
        except OSError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):
            report.note(
                path,
                "named as a temporary file, but not a regular file: readers "
                "ignore it, and --clean leaves it (remove it yourself if unwanted)",
            )
            continue
        report.temp_files.append(name)
        if local is None:
            report.temp_ages.append(None)
        else:  # (0: it could not be checked)
            report.temp_ages.append(0.0 if st is None else max(0.0, now - st.st_mtime))
    listed: set[str] = set()
    manifests, misnamed = find_manifests(names), misnamed_manifests(names)
    for bad in misnamed:  # (a writer is not skipped: §8)
        report.add(os.path.join(directory, bad), misnamed_manifest(bad))
    if not manifests and not misnamed:
        # No writer has written yet (or one was killed first), or this is no recording at all:
        # a directory of other files only, such as a wrong path.
        if holds_no_recording(names):
            report.add(directory, no_recording([n for n in names if not is_temp_name(n)]))
        else:
            report.note(directory, "no manifest yet: no episode is written (readers see none)")
    for name in manifests:
        _check_manifest(storage, directory, name, report, listed)
    for name in sorted(names):
        if classify(name) in ("batch", "blob") and name not in listed:
            report.note(
                os.path.join(directory, name),
                "no manifest lists this file (a flush interrupted before its manifest was "
                "written, or a damaged manifest); readers ignore it",
            )
    if manifests:  # (else there is nothing to read, and the report says why)
        _read_all(directory, report, storage_options)
    return report


def _temp_names(names: Iterable[str]) -> list[str]:
    return sorted(n for n in names if is_temp_name(n))


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
    storage = open_storage(os.fspath(directory), create=False)
    if not isinstance(storage, LocalStorage):
        return [], []
    removed: list[str] = []
    kept: list[tuple[str, str]] = []
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
    dir_fd = os.open(storage.directory, flags)  # (a path, also for a file:// URL)
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


#: Control characters but tab and newline, and those that reorder or break text (a terminal
#: acts on them: ESC starts sequences that clear the screen, set its title, write the
#: clipboard; a right-to-left override can fake what a line says).
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` printable on this stdout whatever its encoding, control characters escaped.

    (Names and a recording's strings may hold anything.)
    """
    enc = getattr(sys.stdout, "encoding", None) or "utf-8"
    text = _CONTROLS.sub(lambda m: repr(m.group())[1:-1], text)
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
        print(printable(line))
    for name in removed:
        print(printable(f"{os.path.join(directory, name)}: removed"))
    for name, why in kept:
        print(printable(f"{os.path.join(directory, name)}: kept ({why})"))
    left = [
        (n, a) for n, a in zip(report.temp_files, report.temp_ages, strict=True) if n not in removed
    ]
    report.temp_files, report.temp_ages = [n for n, _ in left], [a for _, a in left]
    if list(report.problems) != [directory] or report.manifests or report.temp_files:
        print(printable(report.summary()))  # (not for no recording at all: said above)
    return 0 if report.ok else 1
