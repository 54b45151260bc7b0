"""Run fuzz cases through the command's entry point, one forked process each, and report.

Each case runs in a child forked from a process that has already imported fabricplan, so a case
costs its own work, not the start-up; the child's time and peak memory (``wait4``'s resource
usage) are the case's. The child runs under an address-space cap and an alarm, so a case that
would take the machine down is stopped and counted instead.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from fuzz.strategies import FuzzCase

# The targets: no run over a minute or 2 GB, no internal error (exit 1) or crash.
TARGET_SECONDS = 60.0
TARGET_BYTES = 2 * 2**30
# A child is killed after this long (seconds) and when its address space passes this (bytes):
# past the targets, so that a miss is measured, not just cut off; numba and the BLAS threads
# reserve address space beyond what they touch.
KILL_AFTER_S = 150
ADDRESS_SPACE_CAP = 6 * 2**30
# Exit codes the README documents for outcomes that are not bugs.
OK_CODES = {0: "ok", 2: "refused", 3: "ok", 130: "interrupted"}
# Messages of a case kept in the report.
TAIL_CHARS = 400


@dataclass(frozen=True)
class Outcome:
    case: FuzzCase
    code: int | None  # None: killed by a signal
    signal: int | None
    seconds: float
    peak_bytes: int
    stderr_tail: str

    @property
    def kind(self) -> str:
        if self.signal is not None:
            return "timeout" if self.signal == signal.SIGALRM else f"signal {self.signal}"
        if "Traceback" in self.stderr_tail or "internal error" in self.stderr_tail:
            return "crash"
        return OK_CODES.get(self.code, "crash") if self.code is not None else "crash"

    @property
    def bad(self) -> bool:
        return self.kind not in ("ok", "refused") or self.over_time or self.over_memory

    @property
    def over_time(self) -> bool:
        return self.seconds > TARGET_SECONDS

    @property
    def over_memory(self) -> bool:
        return self.peak_bytes > TARGET_BYTES


def run_case(case: FuzzCase) -> Outcome:
    """Run one case in a forked child, in a fresh directory holding its files."""
    with tempfile.TemporaryDirectory(prefix="fabricplan-fuzz-") as tmp:
        work = Path(tmp)
        for name, data in case.files.items():
            (work / name).write_bytes(data)
        out, err = work / ".stdout", work / ".stderr"
        start = time.perf_counter()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            _child(case, work, out, err)
        _, status, usage = os.wait4(pid, 0)
        seconds = time.perf_counter() - start
        tail = err.read_text(errors="replace")[-TAIL_CHARS:] if err.exists() else ""
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
    # ru_maxrss is in KiB on Linux
    return Outcome(case, code, sig, seconds, usage.ru_maxrss * 1024, tail)


def _child(case: FuzzCase, work: Path, out: Path, err: Path) -> None:
    code = 1
    try:
        os.chdir(work)
        signal.alarm(KILL_AFTER_S)
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_CAP, ADDRESS_SPACE_CAP))
        fd_out = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        fd_err = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd_out, 1)
        os.dup2(fd_err, 2)
        sys.argv = ["fabricplan", *case.argv]
        from fabricplan.cli import main

        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException as exc:  # anything main() let through is a crash: say so
        os.write(2, f"Traceback: {type(exc).__name__}: {exc}"[:TAIL_CHARS].encode())
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # the stream may be gone; the code tells
                stream.flush()
        os._exit(code)


def warm_up() -> None:
    """Import what the commands import, so that each child inherits it instead of paying it."""
    os.environ.setdefault("COLUMNS", "120")
    import fabricplan.cli.app  # noqa: F401
    from fabricplan.catalog import default_catalog
    from fabricplan.cli.lazy import COMMANDS

    for module, _ in COMMANDS.values():
        __import__(f"fabricplan.cli.{module}")
    default_catalog()


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)

    def add(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)

    @property
    def bad(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.bad]

    def summary(self) -> dict[str, object]:
        kinds = Counter(o.kind for o in self.outcomes)
        families = Counter(o.case.family for o in self.outcomes)
        slowest = max(self.outcomes, key=lambda o: o.seconds, default=None)
        biggest = max(self.outcomes, key=lambda o: o.peak_bytes, default=None)
        return {
            "cases": len(self.outcomes),
            "by_family": dict(families),
            "outcomes": dict(kinds),
            "exit_1_or_crash": sum(1 for o in self.outcomes if o.kind == "crash"),
            "over_60_s": sum(1 for o in self.outcomes if o.over_time),
            "over_2_GB": sum(1 for o in self.outcomes if o.over_memory),
            "slowest_s": round(slowest.seconds, 2) if slowest else None,
            "slowest_case": slowest.case.describe() if slowest else None,
            "peak_memory_MB": round(biggest.peak_bytes / 2**20) if biggest else None,
            "peak_memory_case": biggest.case.describe() if biggest else None,
            "wall_s": round(time.perf_counter() - self.started, 1),
        }


def lines(report: Report) -> Iterable[str]:
    for key, value in report.summary().items():
        yield f"{key}: {value}"
    for o in report.bad:
        yield f"BAD {o.kind} {o.seconds:.1f}s {o.peak_bytes / 2**20:.0f}MB {o.case.describe()}"
        yield "    " + o.stderr_tail.strip().replace("\n", "\n    ")


def explore(
    cases: st.SearchStrategy[FuzzCase],
    count: int,
    seed_value: int,
    after_each: Callable[[Report], None] | None = None,
) -> Report:
    """Draw ``count`` cases (repeatably for ``seed_value``), run each, and report them all:
    every case is recorded, none stops the run, and nothing is shrunk."""
    warm_up()
    report = Report()

    @seed(seed_value)
    @settings(
        max_examples=count,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(cases)
    def one(case: FuzzCase) -> None:
        report.add(run_case(case))
        if after_each is not None:
            after_each(report)

    one()
    return report
