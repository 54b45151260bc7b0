"""Reading files other people wrote: size caps and bounded representations.

fabricplan reads scenario files, catalog overlays and nccl-tests logs that users download from
providers and colleagues. Whatever is in them, a message quotes a bounded piece of it and a
read stops at a stated size, so a hostile or broken file costs a refusal, not the machine.
"""

from __future__ import annotations

import os
import reprlib
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

MIB = 2**20

# Characters of a value a message quotes: enough to recognise it, short enough for one line.
MAX_SHOWN_CHARS = 60

# Quoting a value: at most this many items per list or mapping and levels of nesting, so that a
# value built from YAML aliases (billions of elements sharing a few objects) prints in
# microseconds instead of materialising the whole expansion.
_SHORT = reprlib.Repr()
_SHORT.maxlevel = 3
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = _SHORT.maxset = 4
_SHORT.maxstring = MAX_SHOWN_CHARS
_SHORT.maxlong = MAX_SHOWN_CHARS
_SHORT.maxother = MAX_SHOWN_CHARS


def short_repr(value: Any, limit: int = MAX_SHOWN_CHARS) -> str:
    """``repr(value)`` cut to ``limit`` characters, computed in bounded time and memory."""
    text = _SHORT.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class LimitError(ValueError):
    """An input past one of the limits, or a limit asked for that cannot be; in our words."""


class InputTooLarge(LimitError):
    """A file is over the size a command reads; the message names the cap and how to raise it."""


# Scenario and catalog files are capped by default (see their loaders); this environment
# variable, in MiB, raises (or lowers) both caps. nccl-tests logs have their own option,
# --max-file-mb on grade and calibrate.
MAX_FILE_MB_ENV = "FABRICPLAN_MAX_FILE_MB"
# The most the variable may ask for: files beyond it are not scenarios or catalogs.
MAX_FILE_MB_CEILING = 1024
RAISE_FILE_CAP = f"the environment variable {MAX_FILE_MB_ENV} (MiB)"


# The structural limits (YAML nesting and alias expansion, --set key paths, runs and rows in one
# nccl-tests log) are sized many times over what real files need; this environment variable
# multiplies them all, for the rare file that needs more.
LIMITS_SCALE_ENV = "FABRICPLAN_LIMITS_SCALE"
MAX_LIMITS_SCALE = 1000.0
RAISE_LIMITS = f"raise it with the environment variable {LIMITS_SCALE_ENV} (a factor up to 1,000)"


def limits_scale() -> float:
    """The factor the environment asks the structural limits to be multiplied by (1 unset)."""
    raw = os.environ.get(LIMITS_SCALE_ENV, "").strip()
    if not raw:
        return 1.0
    try:
        factor = float(raw)
    except ValueError:
        factor = float("nan")
    if not 1.0 <= factor <= MAX_LIMITS_SCALE:
        raise LimitError(
            f"{LIMITS_SCALE_ENV}: {short_repr(raw)} is not allowed; a factor from 1 to "
            f"{MAX_LIMITS_SCALE:,.0f}"
        )
    return factor


def scaled(limit: int) -> int:
    """``limit`` times :func:`limits_scale`."""
    return int(limit * limits_scale())


def file_cap(default_bytes: int) -> int:
    """``default_bytes``, or the cap the environment asks for."""
    raw = os.environ.get(MAX_FILE_MB_ENV, "").strip()
    if not raw:
        return default_bytes
    try:
        mb = float(raw)
    except ValueError:
        mb = float("nan")
    if not 0 < mb <= MAX_FILE_MB_CEILING:
        raise LimitError(
            f"{MAX_FILE_MB_ENV}: {short_repr(raw)} is not allowed; a size in MiB above 0 and at "
            f"most {MAX_FILE_MB_CEILING:,}"
        )
    return int(mb * MIB)


def read_capped(path: str | Path, max_bytes: int, *, what: str, raise_with: str = "") -> bytes:
    """The bytes of ``path``, refusing any file over ``max_bytes``.

    Reads at most ``max_bytes + 1`` bytes, so a device or pipe that never ends (``/dev/zero``)
    is refused as fast as a large regular file. ``raise_with`` names the option that raises
    the cap, if there is one. OSError propagates for the caller to word.
    """
    with open(path, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise InputTooLarge(too_large_message(what, max_bytes, raise_with))
    return data


def read_user_text(path: str | Path, default_bytes: int) -> str:
    """A scenario or catalog file the user gave, as UTF-8 text, under its cap (raised by
    ``FABRICPLAN_MAX_FILE_MB``). Raises InputTooLarge, LimitError, UnicodeDecodeError, OSError."""
    cap = file_cap(default_bytes)
    return read_capped(path, cap, what="the file", raise_with=RAISE_FILE_CAP).decode("utf-8")


def too_large_message(what: str, max_bytes: int, raise_with: str = "") -> str:
    how = f"; raise the limit with {raise_with}" if raise_with else ""
    return f"{what} is larger than {max_bytes / MIB:g} MiB, more than this command reads{how}"


def open_capped(
    path: str | Path, max_bytes: int, *, what: str, raise_with: str = ""
) -> CappedLines:
    """The lines of ``path`` (UTF-8, undecodable bytes replaced), raising
    :class:`InputTooLarge` once more than ``max_bytes`` bytes have been read: a file streamed
    line by line is still bounded. OSError propagates for the caller to word."""
    raw = open(path, "rb")  # noqa: SIM115 - the caller closes the wrapper, which closes it
    return CappedLines(raw, max_bytes, too_large_message(what, max_bytes, raise_with))


class CappedLines:
    """Line iteration over a binary handle that counts bytes and stops at a cap."""

    # Longest line kept whole, in characters. nccl-tests and NCCL lines are a few hundred
    # characters; a longer line (a progress bar's carriage returns, binary junk) keeps its first
    # part, so that one line without an end cannot take the memory a whole file may.
    MAX_LINE_CHARS = 64 * 1024

    def __init__(self, raw: IO[bytes], max_bytes: int, message: str) -> None:
        self._raw, self._left, self._message = raw, max_bytes, message

    def __enter__(self) -> CappedLines:
        return self

    def __exit__(self, *exc: object) -> None:
        self._raw.close()

    def close(self) -> None:
        self._raw.close()

    def __iter__(self) -> CappedLines:
        return self

    def __next__(self) -> str:
        line = self._raw.readline(self.MAX_LINE_CHARS)
        if not line:
            raise StopIteration
        self._take(len(line))
        if not line.endswith(b"\n"):  # an over-long line: drop the rest of it
            while (rest := self._raw.readline(self.MAX_LINE_CHARS)) and self._take(len(rest)):
                if rest.endswith(b"\n"):
                    break
        return line.decode("utf-8", errors="replace")

    def _take(self, n: int) -> bool:
        self._left -= n
        if self._left < 0:
            raise InputTooLarge(self._message)
        return True


def _number(value: Any) -> str:
    """A bound as a message writes it: 10,000,000, 0.5."""
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def describe_error(err: Mapping[str, Any]) -> str:
    """One validation error (a pydantic ``errors()`` item) in our words: what is allowed."""
    kind, ctx = err["type"], err.get("ctx") or {}
    match kind:
        case "extra_forbidden":
            return "unknown key"
        case "missing":
            return "required but missing"
        case "literal_error":
            return f"must be one of {ctx.get('expected', '')}"
        case "greater_than":
            return f"must be greater than {_number(ctx['gt'])}"
        case "greater_than_equal":
            return f"must be at least {_number(ctx['ge'])}"
        case "less_than_equal":
            return f"must be at most {_number(ctx['le'])}"
        case "less_than":
            return f"must be less than {_number(ctx['lt'])}"
        case "int_parsing" | "int_type" | "int_from_float" | "int_parsing_size":
            return "must be a whole number"
        case "float_parsing" | "float_type":
            return "must be a number"
        case "finite_number":
            return "must be a finite number"
        case "bool_parsing" | "bool_type":
            return "must be true or false"
        case "string_type":
            return "must be text"
        case "string_too_short":
            return (
                "must not be empty"
                if ctx.get("min_length") == 1
                else (f"must be at least {ctx.get('min_length')} characters")
            )
        case "string_too_long":
            return f"must be at most {ctx['max_length']} characters"
        case "string_pattern_mismatch":
            return f"must match the pattern {ctx.get('pattern', '')}"
        case "model_type" | "dict_type" | "model_attributes_type":
            return "must be a mapping of keys to values"
        case "tuple_type" | "list_type":
            return "must be a list"
        case "too_short":
            return f"must have at least {ctx.get('min_length')} item(s)"
        case "value_error" | "assertion_error":
            return str(err["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
        case _:
            return str(err["msg"])
