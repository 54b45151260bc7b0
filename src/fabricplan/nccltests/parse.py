"""Parse nccl-tests output as people really paste it.

Handled: the classic table with ``#`` headers, with or without the ``root`` (and ``redop``)
columns; ``#wrong`` as ``N/A``; output pasted without the leading ``#``; lines prefixed by Slurm
(``0: ``), ``mpirun --tag-output`` (``[1,0]<stdout>:``) or pdsh (``host: ``); NCCL INFO lines mixed
in; several runs in one file; and nccl-tests JSON (``-J``, read by ``json_log``). Anything that
looks like a result row but is not one raises :class:`ParseError` naming the line.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from fabricplan.collectives.busbw import OPS, resolve_op
from fabricplan.inputs import MIB, RAISE_LIMITS, InputTooLarge, open_capped, scaled

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
    line: int = 0  # the row's line in a text log (0: JSON)
    cv_pct: float | None = None  # spread of per-iteration times, % of their mean (-J with -I)


# Log lines a finding may quote, per kind, and the characters kept of each: three show a
# pattern (one line per rank would repeat it thousands of times), and a quote fits one line.
MAX_QUOTES = 3
MAX_QUOTE_CHARS = 160
# PCIe links kept per run: every NIC and GPU of a few thousand nodes
MAX_PCI_LINKS = 65536


class Quote(NamedTuple):
    """A line of the log that shows something about the run, and where it is."""

    where: str  # "line 8", or "JSON env" for a -J file
    text: str

    def __str__(self) -> str:
        return f"{self.where}: {self.text}"


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
    # what NCCL's own init line says ("nRanks 2 nNodes 2 localRanks 1"), when the log has it
    header_nranks: int | None = None
    header_nnodes: int | None = None
    local_ranks: int | None = None
    rank_hosts: dict[int, str] = field(default_factory=dict)  # from the "Rank N ... on HOST" lines
    # (host, NIC|GPU, device) -> the PCIe GB/s NCCL's topology dump shows for its link, and
    # the line that shows it
    pci_links: dict[tuple[str, str, str], tuple[float, Quote]] = field(default_factory=dict)
    # lines that show the setup, by kind ("gdr", "net", "topology", "NCCL_ALGO", ...)
    evidence: dict[str, list[Quote]] = field(default_factory=dict)

    @property
    def nodes(self) -> int | None:
        return len(self.hosts) or None

    def quote(self, kind: str, where: str, text: str) -> None:
        """Keep ``text`` as evidence of ``kind`` (the first MAX_QUOTES lines of each kind)."""
        kept = self.evidence.setdefault(kind, [])
        if len(kept) < MAX_QUOTES:
            kept.append(Quote(where, text.strip()[:MAX_QUOTE_CHARS]))

    def gpus_per_host(self) -> int | None:
        """Most ranks the rank lines place on one host."""
        if not self.rank_hosts:
            return None
        counts: dict[str, int] = {}
        for host in self.rank_hosts.values():
            counts[host] = counts.get(host, 0) + 1
        return max(counts.values())

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
# NCCL's init line: "comm 0x... rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0"
# (2.19 on); older releases print only "rank 0 nranks 16 cudaDev 0 ... Init COMPLETE"
_INIT = re.compile(r"\bnRanks\s+(\d{1,9})\s+nNodes\s+(\d{1,9})\s+localRanks\s+(\d{1,9})")
_INIT_OLD = re.compile(r"\brank\s+\d+\s+nranks\s+(\d{1,9})\s+cudaDev\b")
# NCCL's topology dump (NCCL_DEBUG=INFO): "host:pid:tid [5] NCCL INFO   + PCI[48.0] - NIC/0-67000",
# the PCIe bandwidth (GB/s) NCCL reads for the link into a NIC or GPU
_PCI = re.compile(r"^(\S+?):\d+:\d+\b.*?\+\s*PCI\[(\d{1,6}(?:\.\d{1,3})?)\]\s*-\s*(NIC|GPU)/(\S+)")


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


_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_CLOCK = re.compile(r"^\d{2}:\d{2}:\d{2}$")


def _is_word(tok: str) -> bool:
    return bool(re.match(r"^[A-Za-z_][\w]*$", tok))


def parse_row(content: str, lineno: int = 0, *, line: int = 0) -> Result:
    """One result row: size count type [redop] [root], then out-of-place and in-place each as
    time algbw busbw #wrong, with -I (per-iteration timing) followed by i_min i_max i_p99 i_cv%,
    and with -S a timestamp at the end (nccl-tests src/util.cu, writeResultHeader)."""
    tok = content.split()
    if len(tok) > 2 and _DATE.match(tok[-2]) and _CLOCK.match(tok[-1]):
        tok = tok[:-2]  # -S: the time the row was written
    size, count = _whole(tok[0], "size", lineno, content), _whole(tok[1], "count", lineno, content)
    _check_size(size, count, "", lineno, content)
    dtype = tok[2]
    i = 3
    redop = None
    if i < len(tok) and _is_word(tok[i]) and tok[i].upper() != "N/A":
        redop, i = tok[i], i + 1
    rest = tok[i:]
    root = None
    if len(rest) in (5, 9, 17):
        root = _whole(rest[0], "root", lineno, content)
        rest = rest[1:]
    cv = None
    if len(rest) == 16:  # -I: each half's four figures, then its per-iteration summary
        cv = _number(rest[7], "i_cv%", lineno, content)
        rest = rest[:4] + rest[8:12]
    if len(rest) not in (4, 8):
        raise ParseError(
            f"expected time, algbw, busbw and #wrong (out-of-place, then in-place; with -I each "
            f"followed by i_min, i_max, i_p99 and i_cv%) after the type column, found "
            f"{len(rest)} values",
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
    return Result(size, count, dtype, redop, root, t, alg, bus, wrong, *ip, line=line, cv_pct=cv)


def _check_counts(runs: int, rows: int) -> None:
    if runs > scaled(MAX_RUNS):
        raise ParseError(
            f"more than {scaled(MAX_RUNS):,} runs in one file; split it, grade a few runs at a "
            f"time, or {RAISE_LIMITS}"
        )
    if rows > scaled(MAX_ROWS):
        raise ParseError(
            f"more than {scaled(MAX_ROWS):,} result rows in one file; split it, or {RAISE_LIMITS}"
        )


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
        where = f"line {lineno}"
        if (m := _RANK.search(line)) and int(m.group(1)) < MAX_RANK:
            rank = int(m.group(1))
            run.nranks = max(run.nranks or 0, rank + 1)
            run.hosts.add(m.group(2))
            run.rank_hosts[rank] = m.group(2)
            run.quote("ranks", where, line)
        if (m := _INIT.search(line)) and max(map(int, m.groups())) < MAX_RANK:
            ranks, nodes, local = map(int, m.groups())
            run.header_nranks = max(run.header_nranks or 0, ranks)
            run.header_nnodes = max(run.header_nnodes or 0, nodes)
            run.local_ranks = max(run.local_ranks or 0, local)
            run.quote("topology", where, line)
        elif (m := _INIT_OLD.search(line)) and int(m.group(1)) < MAX_RANK:
            run.header_nranks = max(run.header_nranks or 0, int(m.group(1)))
            run.quote("topology", where, line)
        if m := _CONCLUDED.search(line):
            target = run if run.results or not self.runs else self.runs[-1]
            target.op = resolve_op(m.group(1))
        elif (m := _OP.search(line)) and run.op is None and not run.results:
            run.op = resolve_op(m.group(1))
        for m in _ENV.finditer(line):
            run.env[m.group(1)] = m.group(2)
            run.quote(m.group(1), where, line)
        if m := _ENV_INFO.search(line):
            run.env[m.group(1)] = m.group(2).rstrip(".")
            run.quote(m.group(1), where, line)
        if m := _GDR.search(line):
            run.gdr = (run.gdr is not False) and m.group(1) == "1"
            run.quote("gdr", where, line)
        elif m := _GDR_OLD.search(line):
            run.gdr = (run.gdr is not False) and m.group(1) == "Enabled"
            run.quote("gdr", where, line)
        if m := _NET.search(line):
            run.quote("net", where, line)
            devices = m.group(2).split(";")[0]
            run.nics_in_use = max(run.nics_in_use or 0, len(re.findall(r"\[\d+\]", devices)))
            kind = m.group(1).lower()
            run.transport = (
                "socket" if kind == "socket" else ("roce" if "RoCE" in devices else "ib")
            )
        if (m := _PCI.search(line)) and len(run.pci_links) < MAX_PCI_LINKS:
            key = (m.group(1), m.group(3), m.group(4))
            if key not in run.pci_links:
                quote = Quote(where, line.strip()[:MAX_QUOTE_CHARS])
                run.pci_links[key] = (float(m.group(2)), quote)
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
            b.cur.results.append(parse_row(line.strip(), lineno, line=lineno))
            rows += 1
            if rows > MAX_ROWS:  # checked against the scaled limit there
                _check_counts(0, rows)
            continue
        b.meta(line, lineno)
    b.finish()
    if not b.runs:
        raise ParseError(
            "no nccl-tests result rows found (expected lines like "
            "'1048576  262144  float  sum  -1  ...')"
        )
    return b.runs


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
            from fabricplan.nccltests.json_log import parse_json  # it builds on this module

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
            return parse_stream(lines)
    except InputTooLarge as exc:
        raise ParseError(str(exc)) from None
    except OSError as exc:
        raise ParseError(f"cannot read {path}: {exc.strerror or exc}") from None


def parse_stream(lines: Iterable[str]) -> list[Run]:
    """Every run in a log given as its lines, each with its line end (a file streamed by
    :func:`parse_file`, or an upload read the same way), text or JSON."""
    lines = iter(lines)
    head: list[str] = []  # blank lines before the first with text
    for line in lines:
        head.append(line)
        if line.strip():
            break
    if head and head[-1].lstrip().startswith(("{", "[")):  # JSON: one document
        return parse("".join(itertools.chain(head, lines)))
    return parse_lines(itertools.chain(head, lines))
