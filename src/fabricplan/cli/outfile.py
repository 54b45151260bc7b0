"""Writing a command's output file: never over a file unasked, never through a symlink, never
half-written.

``-`` is standard output. Otherwise the text goes to a temporary file beside the target and is
renamed over it, so a reader sees the old file or the new one, never a torn one; an existing
file is replaced only with ``--force``, and a symlink at the target is refused (renaming over it
would replace the link, writing through it would change whatever it points at).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path

STDOUT = "-"


class OutFileError(ValueError):
    """The output file cannot or may not be written; the message says why and what to do."""


def check_target(path: Path | str, *, force: bool, flag: str = "--out") -> Path:
    """Refuse a target that :func:`write_out` would refuse, before any work is done for it."""
    target = Path(path)
    if target.is_symlink():
        raise OutFileError(f"{flag} {target}: is a symbolic link; give the file's own path")
    if target.exists():
        if target.is_dir():
            raise OutFileError(f"{flag} {target}: is a directory; give a file name")
        if not force:
            raise OutFileError(f"{flag} {target}: the file exists; add --force to replace it")
    return target


def write_out(path: Path | str, text: str, *, force: bool, flag: str = "--out") -> str:
    """Write ``text`` to ``path`` (``-``: standard output) and return where it went."""
    if str(path) == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return "standard output"
    target = check_target(path, force=force, flag=flag)
    folder = target.parent
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise OutFileError(f"{flag} {target}: cannot write in {folder}: {_reason(exc)}") from None
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # as open() would make it, not mkstemp's 0600
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if target.is_symlink():  # made while we wrote: still never replace a link
            raise OutFileError(f"{flag} {target}: is a symbolic link; give the file's own path")
        os.replace(tmp, target)  # atomic on one file system; renames the link, never follows it
    except OSError as exc:
        _discard(tmp)
        raise OutFileError(f"{flag} {target}: cannot write: {_reason(exc)}") from None
    except BaseException:
        _discard(tmp)
        raise
    return str(target)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _discard(tmp: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__
