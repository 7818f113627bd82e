"""Output files: checked before any work, written atomically, all of a run or none.

Every command that writes a file goes through here. `check_outputs` runs first (before a
scenario is read or a search started): each path must name a file in an existing, writable
folder, and no two options may name the same file. Only regular files are written: a device
(/dev/null, /dev/sda), a FIFO or a socket is refused — the atomic rename would put a regular
file in its place — and a symbolic link is written through, to the file it points to (the link
stays a link). `write_outputs` then writes a run's files in two phases: each is written to a
temporary file in its own folder and flushed to disk (fsync), then all are renamed over their
targets (os.replace, atomic on POSIX). A failure in the first phase leaves no target touched; a
failure while renaming puts back what the earlier renames of the run replaced (or removes a
file the run created). A full disk therefore leaves neither a truncated file nor the first of
two files behind.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from planner.errors import InputError
from planner.specs.files import file_kind, os_problem, shorten

# The two system calls that can fail half-way through a run, named so that tests can make them
# fail (a full disk, a rename refused) without touching the rest of the process.
_write_fd = os.write
_rename = os.replace


@dataclass(frozen=True)
class Output:
    """One file a run writes: the option that names it (for errors), where, what, and
    whether it is a script to make runnable."""

    flag: str
    path: Path
    data: bytes | str
    executable: bool = False


def check_outputs(paths: dict[str, Path | None]) -> None:
    """Refuse, before any work, an output path (option → path; None = not given) that cannot
    be written: a folder, a missing or non-folder parent, a parent this user cannot write to,
    or a file named by two options."""
    seen: dict[Path, str] = {}
    for flag, path in paths.items():
        if path is None:
            continue
        key = check_output(path, flag).resolve()
        if key in seen:
            raise InputError(f"{flag} and {seen[key]} both name {path}; give each its own file")
        seen[key] = flag


def check_output(path: Path, flag: str) -> Path:
    """One output path, as `check_outputs` checks it; the file the run will write (`target`)."""
    target = target_of(path, flag)
    shown = f"{flag} {shorten(str(path))}"
    parent = target.parent
    if not parent.exists():
        raise InputError(f"{shown}: folder '{shorten(str(parent))}' does not exist; create it "
                         "or write elsewhere")
    if not parent.is_dir():
        raise InputError(f"{shown}: '{shorten(str(parent))}' is not a folder; check the path")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{shown}: folder '{shorten(str(parent))}' is not writable; choose a "
                         "folder you can write to")
    if target.exists() and not os.access(target, os.W_OK):
        raise InputError(f"{shown}: the file is read-only; remove it or write elsewhere")
    return target


def target_of(path: Path, flag: str) -> Path:
    """The file writing `path` replaces: `path` itself (a regular file, or nothing yet), or
    the file a symbolic link points to. InputError naming `flag` for a folder, a device, a FIFO
    or a socket (renaming over it would replace it), a link loop, or a name the system cannot
    take."""
    shown = f"{flag} {shorten(str(path))}"
    target = path
    try:
        if stat.S_ISLNK(os.lstat(path).st_mode):
            target = Path(os.path.realpath(path))
            shown += f" (a link to {shorten(str(target))})"
        mode = os.lstat(target).st_mode
    except (FileNotFoundError, NotADirectoryError):  # a new file: its folder is checked next
        return target
    except OSError as exc:
        raise InputError(f"{shown}: {os_problem(path, exc)}; give another file name") from None
    except ValueError:  # a NUL byte
        raise InputError(f"{shown}: not a valid path; give a file name") from None
    if stat.S_ISLNK(mode):
        raise InputError(f"{shown}: a loop of symbolic links; give a file name")
    if stat.S_ISDIR(mode):
        raise InputError(f"{shown}: is a folder; give a file name inside it")
    if (kind := file_kind(mode)) is not None:
        raise InputError(f"{shown}: is {kind}, not a regular file; outputs are written to "
                         "regular files only (a new one, or one replaced whole) — give a file "
                         "name")
    return target


def write_atomic(path: Path, data: bytes | str, flag: str = "--out",
                 executable: bool = False) -> None:
    """Write one file atomically (see `write_outputs`)."""
    write_outputs([Output(flag, path, data, executable)])


def write_outputs(outputs: list[Output]) -> None:
    """Write every output or none (InputError naming the option on failure): stage each in a
    temporary file beside its target, then rename them all into place."""
    # each written where its path leads (a link's target), checked again just before writing
    outputs = [replace(out, path=target_of(out.path, out.flag)) for out in outputs]
    staged: list[tuple[Output, str]] = []
    try:
        for out in outputs:
            staged.append((out, _stage(out)))
    except OSError as exc:
        for _, tmp in staged:
            _remove(tmp)
        raise _failed(out, exc) from None
    _commit(staged)


def _stage(out: Output) -> str:
    """A temporary file in the target's folder holding `out.data`, flushed to disk, with the
    mode the target will have; its name."""
    data = out.data.encode() if isinstance(out.data, str) else out.data
    fd, tmp = tempfile.mkstemp(dir=out.path.parent, prefix=f".{_short_name(out.path)}.",
                               suffix=".tmp")
    try:
        view = memoryview(data)
        while view:  # os.write may write less than asked
            view = view[_write_fd(fd, view):]
        os.fsync(fd)
        os.fchmod(fd, _mode(out))
    except BaseException:
        os.close(fd)
        _remove(tmp)
        raise
    os.close(fd)
    return tmp


def _commit(staged: list[tuple[Output, str]]) -> None:
    """Rename each staged file over its target; on a failure, undo the renames done so far
    (an earlier target is restored from a hard-link backup, or removed if the run created
    it) and remove what is still staged."""
    done: list[tuple[Output, str | None]] = []
    pending = list(staged)
    try:
        while pending:
            out, tmp = pending[0]
            backup = _backup(out.path)
            try:
                _rename(tmp, out.path)
            except OSError:
                if backup:
                    _remove(backup)
                raise
            done.append((out, backup))
            pending.pop(0)
    except OSError as exc:
        for prev, backup in reversed(done):
            if backup:
                with contextlib.suppress(OSError):
                    os.replace(backup, prev.path)
            else:
                _remove(str(prev.path))
        for _, tmp in pending:
            _remove(tmp)
        raise _failed(pending[0][0], exc) from None
    for _, backup in done:
        if backup:
            _remove(backup)
    for folder in {out.path.parent for out, _ in staged}:
        _sync_dir(folder)


def _backup(path: Path) -> str | None:
    """A hard link to the file `path` names now (None if there is none, or if the file system
    cannot link: the run then removes rather than restores it on failure)."""
    if not path.is_file():
        return None
    name = str(path.parent / f".{_short_name(path)}.{secrets.token_hex(6)}.bak")
    try:
        os.link(path, name)
    except OSError:
        return None
    return name


def _short_name(path: Path) -> str:
    """The start of a file's name, for the names of its temporary and backup files (a name
    near the system's 255-byte limit leaves no room for a prefix and a suffix)."""
    return path.name[:32]


def _mode(out: Output) -> int:
    """The target's current mode, or what a new file gets under the umask; runnable for a
    script."""
    if out.path.is_file():
        mode = out.path.stat().st_mode & 0o7777
    else:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    if out.executable:
        mode |= (mode & 0o444) >> 2  # execute wherever read is allowed
    return mode


def _failed(out: Output, exc: OSError) -> InputError:
    return InputError(f"{out.flag} {shorten(str(out.path))}: cannot write it "
                      f"({os_problem(out.path, exc)}); nothing was written — free space or "
                      "write elsewhere")


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _sync_dir(folder: Path) -> None:
    """Make the renames durable (a folder's entries are flushed with the folder)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
