"""Parse nccl-tests output as people really paste it.

Handled: the classic table with ``#`` headers, with or without the ``root`` (and ``redop``)
columns; ``#wrong`` as ``N/A``; output pasted without the leading ``#``; lines prefixed by Slurm
(``0: ``), ``mpirun --tag-output`` (``[1,0]<stdout>:``) or pdsh (``host: ``); NCCL INFO lines mixed
in; several runs in one file; and nccl-tests JSON (``-J``). Anything that looks like a result row
but is not one raises :class:`ParseError` naming the line.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabricplan.collectives.busbw import OPS, resolve_op
from fabricplan.inputs import MIB, InputTooLarge, open_capped

# Largest log read by default, in bytes. One nccl-tests run prints a few KB (NCCL INFO lines
# included, about 100 KB); a log that collects a few hundred runs stays well under this. Larger
# files are refused before they are read (``--max-file-mb`` raises it): parsing streams the
# lines, but every result row is kept, about 200 bytes each.
DEFAULT_MAX_LOG_BYTES = 64 * MIB
# Largest message size a row may give, in bytes: nccl-tests allocates every size on each GPU,
# and no GPU has a TiB of memory (the largest, 192 GB). Beyond it a row is a typo or junk.
MAX_SIZE_BYTES = 2**40
# Longest whole number a row may give, in digits (a count, a root, #wrong): 2**40 has 13
# digits. Python refuses to convert beyond 4,300; this refuses far earlier, in our words.
MAX_INT_DIGITS = 15
# Runs and result rows one file may hold. A sweep of every collective at several node counts is
# tens of runs of about 35 rows (8 B to 16 GiB by doubling); grading costs about 2 ms a run and
# its JSON report about 1 KB a row, so these keep a report to seconds and a few hundred MB.
MAX_RUNS = 1_000
MAX_ROWS = 100_000
# Ranks a log may name ("Rank N ..."): the largest jobs run 100,000 GPUs; 10**8 is a typo.
MAX_RANK = 10**8


class ParseError(ValueError):
    """Input that is not nccl-tests output; ``line`` is 1-based (0 when not line-specific)."""

    def __init__(self, message: str, line: int = 0, text: str = "") -> None:
        self.line, self.text, self.reason = line, text, message
        where = f"line {line}: " if line else ""
        shown = f" [{text.strip()[:80]}]" if text.strip() else ""
        super().__init__(f"{where}{message}{shown}")


# slots: a long log keeps every row, and a slotted record is about half the size
@dataclass(frozen=True, slots=True)
class Result:
    """One size of one run: out-of-place figures, and in-place ones when printed."""

    size_bytes: int
    count: int
    dtype: str
    redop: str | None
    root: int | None
    time_us: float
    algbw_GBps: float
    busbw_GBps: float
    wrong: int | None  # None when not checked (N/A)
    inplace_time_us: float | None = None
    inplace_algbw_GBps: float | None = None
    inplace_busbw_GBps: float | None = None


@dataclass
class Run:
    """One nccl-tests invocation and what its log says about the setup."""

    first_line: int = 0
    label: str = ""
    op: str | None = None
    nranks: int | None = None
    hosts: set[str] = field(default_factory=set)
    nccl_version: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    gdr: bool | None = None
    transport: str | None = None  # "ib", "roce" or "socket"
    nics_in_use: int | None = None
    avg_busbw_GBps: float | None = None
    results: list[Result] = field(default_factory=list)

    @property
    def nodes(self) -> int | None:
        return len(self.hosts) or None

    def inferred_nranks(self) -> int | None:
        """Rank count from the log, else from busbw/algbw for all_reduce (= 2(n-1)/n)."""
        if self.nranks:
            return self.nranks
        if self.op in (None, "all_reduce"):
            ratios = [r.busbw_GBps / r.algbw_GBps for r in self.results if r.algbw_GBps > 0.5]
            if ratios:
                ratio = sorted(ratios)[len(ratios) // 2]
                if ratio < 1.999:
                    return max(2, round(2 / (2 - ratio)))
        return None


# Prefixes added by launchers; stripped repeatedly (a line may carry several).
_PREFIXES = (
    re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:\s?"),  # mpirun --tag-output
    re.compile(r"^\s*\d+:\s"),  # srun --label / Slurm
    re.compile(r"^[A-Za-z][\w.\-]*:\s+(?=[#\d\s])"),  # pdsh / clush "host: "
)
_ROW_START = re.compile(r"^\s*\d+\s+\d+\s+\S")
_HEADER = re.compile(r"^#?\s*size\s+count\s+type\b", re.IGNORECASE)
_RANK = re.compile(r"Rank\s+(\d{1,9})\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device")
_OP = re.compile(rf"\b({'|'.join(OPS)})(?:_perf)?\b")
# "# ===== label =====": the section header of a file that collects several logs (nccl-tests
# itself never prints one)
_SECTION = re.compile(r"^#?\s*=====\s.*=====\s*$")
_CONCLUDED = re.compile(r"Collective test concluded:\s*(\w+)")
_ENV = re.compile(r"\b(NCCL_[A-Z0-9_]+)=\(?([\w./^-]*\w)")
_ENV_INFO = re.compile(r"\b(NCCL_[A-Z0-9_]+) set by environment to (\S+)")
_GDR = re.compile(r"\bGDR (\d)\b")
_GDR_OLD = re.compile(r"GPU Direct RDMA (Enabled|Disabled)")
_NET = re.compile(r"NET/(IB|Socket)\s*:\s*Using\s+(.*)")
_AVG = re.compile(r"Avg bus bandwidth\s*:\s*([\d.eE+-]+|nan|inf)")
_VERSION = re.compile(r"NCCL version\s+([\w.+-]+)")


def _strip_prefix(line: str) -> str:
    changed = True
    while changed:
        changed = False
        for pat in _PREFIXES:
            new = pat.sub("", line, count=1)
            if new != line:
                line, changed = new, True
    return line


def _number(tok: str, what: str, lineno: int, raw: str) -> float:
    try:
        value = float(tok)
    except ValueError:
        raise ParseError(f"{what} should be a number, got '{tok[:20]}'", lineno, raw) from None
    if not (math.isfinite(value) and value >= 0):
        raise ParseError(f"{what} should be a finite number >= 0, got '{tok[:20]}'", lineno, raw)
    return value


def _whole(tok: str, what: str, lineno: int, raw: str) -> int:
    """A whole number of at most MAX_INT_DIGITS digits (a sign allowed: root -1)."""
    if len(tok.lstrip("+-")) > MAX_INT_DIGITS:
        raise ParseError(
            f"{what} has more than {MAX_INT_DIGITS} digits ('{tok[:20]}...')", lineno, raw
        )
    try:
        return int(tok)
    except ValueError:
        raise ParseError(
            f"{what} should be a whole number, got '{tok[:20]}'", lineno, raw
        ) from None


def _wrong(tok: str, lineno: int, raw: str) -> int | None:
    if tok.upper() == "N/A":
        return None
    return _whole(tok, "#wrong", lineno, raw)


def _check_size(size: int, count: int, where: str, lineno: int = 0, raw: str = "") -> None:
    if not (0 <= size <= MAX_SIZE_BYTES and 0 <= count <= MAX_SIZE_BYTES):
        raise ParseError(
            f"{where}size and count must be 0 to {MAX_SIZE_BYTES:,} bytes (1 TiB; no GPU holds "
            f"more), got size {size:,.0f} and count {count:,.0f}",
            lineno,
            raw,
        )


def _is_word(tok: str) -> bool:
    return bool(re.match(r"^[A-Za-z_][\w]*$", tok))


def parse_row(content: str, lineno: int = 0) -> Result:
    """One result row: size count type [redop] [root] time algbw busbw wrong [x4 in-place]."""
    tok = content.split()
    size, count = _whole(tok[0], "size", lineno, content), _whole(tok[1], "count", lineno, content)
    _check_size(size, count, "", lineno, content)
    dtype = tok[2]
    i = 3
    redop = None
    if i < len(tok) and _is_word(tok[i]) and tok[i].upper() != "N/A":
        redop, i = tok[i], i + 1
    rest = tok[i:]
    root = None
    if len(rest) in (5, 9):
        root = _whole(rest[0], "root", lineno, content)
        rest = rest[1:]
    if len(rest) not in (4, 8):
        raise ParseError(
            f"expected time, algbw, busbw and #wrong (out-of-place, then in-place) after the type "
            f"column, found {len(rest)} values",
            lineno,
            content,
        )
    names = ("time", "algbw", "busbw")
    t, alg, bus = (_number(x, n, lineno, content) for x, n in zip(rest[:3], names, strict=True))
    wrong = _wrong(rest[3], lineno, content)
    ip: list[float | None] = [None, None, None]
    if len(rest) == 8:
        ip = [_number(x, n, lineno, content) for x, n in zip(rest[4:7], names, strict=True)]
        _wrong(rest[7], lineno, content)
    return Result(size, count, dtype, redop, root, t, alg, bus, wrong, *ip)


def _check_counts(runs: int, rows: int) -> None:
    if runs > MAX_RUNS:
        raise ParseError(
            f"more than {MAX_RUNS:,} runs in one file; split it, or grade a few runs at a time"
        )
    if rows > MAX_ROWS:
        raise ParseError(f"more than {MAX_ROWS:,} result rows in one file; split it")


class _Builder:
    def __init__(self) -> None:
        self.runs: list[Run] = []
        self.cur = Run()
        self.pending_op: str | None = None

    def finish(self) -> None:
        if self.cur.results:
            self.runs.append(self.cur)
            _check_counts(len(self.runs), 0)
        elif self.runs:
            # metadata after a table (avg, concluded, GDR) belongs to the run just finished
            last = self.runs[-1]
            last.avg_busbw_GBps = last.avg_busbw_GBps or self.cur.avg_busbw_GBps
        self.cur = Run()

    def new_run_if_started(self, lineno: int) -> None:
        if self.cur.results:
            self.finish()
        if not self.cur.first_line:
            self.cur.first_line = lineno

    def meta(self, line: str, lineno: int) -> None:
        run = self.cur
        if _SECTION.match(line):
            # a section header starts a fresh context: notes above it describe no run
            if run.results:
                self.finish()
            else:
                self.cur = Run()
            run = self.cur
            run.label = line.strip("# =").strip()
            run.first_line = run.first_line or lineno
        if re.search(r"#?\s*nThread\s+\d+", line):
            self.new_run_if_started(lineno)
            run = self.cur
        if (m := _RANK.search(line)) and int(m.group(1)) < MAX_RANK:
            rank = int(m.group(1))
            run.nranks = max(run.nranks or 0, rank + 1)
            run.hosts.add(m.group(2))
        if m := _CONCLUDED.search(line):
            target = run if run.results or not self.runs else self.runs[-1]
            target.op = resolve_op(m.group(1))
        elif (m := _OP.search(line)) and run.op is None and not run.results:
            run.op = resolve_op(m.group(1))
        for m in _ENV.finditer(line):
            run.env[m.group(1)] = m.group(2)
        if m := _ENV_INFO.search(line):
            run.env[m.group(1)] = m.group(2).rstrip(".")
        if m := _GDR.search(line):
            run.gdr = (run.gdr is not False) and m.group(1) == "1"
        elif m := _GDR_OLD.search(line):
            run.gdr = (run.gdr is not False) and m.group(1) == "Enabled"
        if m := _NET.search(line):
            devices = m.group(2).split(";")[0]
            run.nics_in_use = max(run.nics_in_use or 0, len(re.findall(r"\[\d+\]", devices)))
            kind = m.group(1).lower()
            run.transport = (
                "socket" if kind == "socket" else ("roce" if "RoCE" in devices else "ib")
            )
        if m := _VERSION.search(line):
            run.nccl_version = m.group(1)
        if m := _AVG.search(line):
            target = run if run.results or not self.runs else self.runs[-1]
            target.avg_busbw_GBps = float(m.group(1))


def parse_text(text: str) -> list[Run]:
    """Every run in nccl-tests text output, in order."""
    return parse_lines(text.splitlines())


def parse_lines(lines: Iterable[str]) -> list[Run]:
    """Every run in nccl-tests text output given line by line (a file is streamed, not read
    whole), in order."""
    b = _Builder()
    rows = 0
    for lineno, raw in enumerate(lines, start=1):
        line = _strip_prefix(raw)
        content = line.lstrip("#").strip() if line.lstrip().startswith("#") else line.strip()
        if not content:
            continue
        if _HEADER.match(content):
            if b.cur.results:
                b.finish()
            b.cur.first_line = b.cur.first_line or lineno
            continue
        if not line.lstrip().startswith("#") and _ROW_START.match(line):
            b.cur.first_line = b.cur.first_line or lineno
            b.cur.results.append(parse_row(line.strip(), lineno))
            rows += 1
            if rows > MAX_ROWS:
                _check_counts(0, rows)
            continue
        b.meta(line, lineno)
    b.finish()
    if not b.runs:
        raise ParseError("no nccl-tests result rows found (expected lines like "
                         "'1048576  262144  float  sum  -1  ...')")  # fmt: skip
    return b.runs


# Characters kept of a JSON run's type and redop labels (nccl-tests writes "float", "sum").
MAX_LABEL_CHARS = 32


def _json_whole(value: Any, what: str) -> int:
    """A JSON count: a whole number, written as an integer, a float or text."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise ParseError(f"{what} should be a whole number")
    return _whole(value, what, 0, "")


def _json_number(value: Any, what: str) -> float:
    """A JSON time or bandwidth: a finite number >= 0, written as a number or text."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ParseError(f"{what} should be a number")
    return _number(str(value), what, 0, "")


def _json_run(obj: dict[str, Any], index: int) -> Run:
    try:
        results = obj["results"]
        if not isinstance(results, list):
            raise TypeError
    except (KeyError, TypeError):
        raise ParseError(f"JSON run {index + 1}: no 'results' list") from None
    run = Run(first_line=0, label=f"JSON run {index + 1}")
    args = " ".join(map(str, obj.get("args") or []))
    if m := _OP.search(args):
        run.op = resolve_op(m.group(1))
    for item in obj.get("env") or []:
        if m := _ENV.search(str(item)):
            run.env[m.group(1)] = m.group(2)
    devices = obj.get("devices") or []
    if isinstance(devices, list) and devices:
        run.nranks = len(devices)
        run.hosts = {str(d.get("hostname")) for d in devices if isinstance(d, dict)}
    if obj.get("nccl_version") is not None:
        run.nccl_version = str(obj["nccl_version"])
    for i, r in enumerate(results):
        where = f"JSON run {index + 1}, result {i + 1}: "
        try:
            oop, ip = r["out_of_place"], r.get("in_place") or {}
            size, count = _json_whole(r["size"], "size"), _json_whole(r["count"], "count")
            root = _json_whole(r["root"], "root") if r.get("root") is not None else None
            wrong = oop.get("nwrong")
            run.results.append(Result(
                size, count, str(r["type"])[:MAX_LABEL_CHARS],
                None if r.get("redop") is None else str(r["redop"])[:MAX_LABEL_CHARS], root,
                _json_number(oop.get("time", oop.get("cpu_time")), "time"),
                _json_number(oop["alg_bw"], "alg_bw"), _json_number(oop["bus_bw"], "bus_bw"),
                None if wrong is None else _json_whole(wrong, "nwrong"),
                _json_number(ip["time"], "time") if "time" in ip else None,
                _json_number(ip["alg_bw"], "alg_bw") if "alg_bw" in ip else None,
                _json_number(ip["bus_bw"], "bus_bw") if "bus_bw" in ip else None,
            ))  # fmt: skip
        except ParseError as exc:
            raise ParseError(where + exc.reason) from None
        except (KeyError, TypeError, ValueError, AttributeError):
            raise ParseError(
                f"{where}expected size, count, type and out_of_place {{time, alg_bw, bus_bw}}"
            ) from None
        _check_size(size, count, where)
    return run


def parse_json(data: Any) -> list[Run]:
    """nccl-tests ``-J`` output: one object, or a list of them."""
    objs = data if isinstance(data, list) else [data]
    if not objs or not all(isinstance(o, dict) for o in objs):
        raise ParseError("JSON input must be an nccl-tests result object or a list of them")
    results = (o.get("results") for o in objs)
    _check_counts(len(objs), sum(len(r) for r in results if isinstance(r, list)))
    # a run without results (nccl-tests killed before its first size) is skipped, as in text
    runs = [run for i, o in enumerate(objs) if (run := _json_run(o, i)).results]
    if not runs:
        raise ParseError("JSON input has no results")
    return runs


def _reject_constant(name: str) -> float:
    raise ParseError(f"invalid JSON: {name} is not a number nccl-tests writes")


def _load_json(text: str) -> Any:
    """``json.loads`` with every failure a ParseError in our words."""
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except ParseError:
        raise
    except json.JSONDecodeError as exc:
        raise ParseError(f"invalid JSON: {exc.msg}", exc.lineno) from None
    except RecursionError:
        # nccl-tests JSON nests four levels; the reader's own limit is about a thousand
        raise ParseError("invalid JSON: nested too deeply for nccl-tests output") from None
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        raise ParseError(f"invalid JSON: a value cannot be read ({str(exc)[:60]})") from None


def parse(text: str) -> list[Run]:
    """Text or JSON, whichever ``text`` is."""
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            data = _load_json(stripped)
        except ParseError as exc:
            if stripped.startswith("{"):
                raise
            try:  # '[' also starts text: mpirun's "[1,0]<stdout>:" prefix
                return parse_text(text)
            except ParseError:
                raise exc from None
        else:
            return parse_json(data)
    return parse_text(text)


def parse_file(
    path: str | Path, *, max_bytes: int = DEFAULT_MAX_LOG_BYTES, raise_with: str = ""
) -> list[Run]:
    """Every run in the nccl-tests log at ``path``, text or JSON. Text is streamed line by
    line; a file over ``max_bytes`` is refused (``raise_with`` names the option that raises
    the cap)."""
    try:
        with open_capped(path, max_bytes, what=str(path), raise_with=raise_with) as lines:
            head: list[str] = []  # blank lines before the first with text
            for line in lines:
                head.append(line)
                if line.strip():
                    break
            if head and head[-1].lstrip().startswith(("{", "[")):  # JSON: one document
                return parse("".join(itertools.chain(head, lines)))
            return parse_lines(itertools.chain(head, lines))
    except InputTooLarge as exc:
        raise ParseError(str(exc)) from None
    except OSError as exc:
        raise ParseError(f"cannot read {path}: {exc.strerror or exc}") from None
