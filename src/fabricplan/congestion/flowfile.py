"""Flow lists: any traffic, given as CSV with the header ``src,dst,bytes`` and an optional
``start_us`` column. ``src`` and ``dst`` are the job's NICs numbered from 0 in the order hosts
are placed (node 0's NICs rail by rail, then node 1's ...)."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REQUIRED = ("src", "dst", "bytes")
OPTIONAL = ("start_us",)
# Input guards, not physical limits: a flow list a case may simulate, and how late a flow may
# start (an hour, in microseconds).
MAX_FLOWS = 5_000_000
MAX_START_US = 3.6e9
MAX_FLOW_BYTES = 2.0**50  # a petabyte: beyond any one transfer


class FlowFileError(ValueError):
    """A flow list that cannot be read; the message names the line, column and value."""


@dataclass(frozen=True, eq=False)
class FlowList:
    """Flows between the job's NICs: indices, bytes and start times (us), one entry a flow.
    Compared and hashed by identity: a case holding one is never cached across lists."""

    src: np.ndarray
    dst: np.ndarray
    size_bytes: np.ndarray
    start_us: np.ndarray
    name: str = "flows"

    def __len__(self) -> int:
        return len(self.src)

    def check(self, nics: int) -> None:
        """Refuse flows that name a NIC outside the job's ``nics`` or send to themselves."""
        for what, idx in (("src", self.src), ("dst", self.dst)):
            bad = np.flatnonzero(idx >= nics)
            if len(bad):
                raise FlowFileError(
                    f"{self.name}: flow {bad[0] + 1}: {what} {idx[bad[0]]} is not a NIC of the "
                    f"job; NICs are numbered 0 to {nics - 1}"
                )
        same = np.flatnonzero(self.src == self.dst)
        if len(same):
            raise FlowFileError(
                f"{self.name}: flow {same[0] + 1}: src and dst are both {self.src[same[0]]}; a "
                "flow must leave its NIC"
            )


def parse_flows(text: str, name: str = "flows") -> FlowList:
    """Read a flow list; every problem is a :class:`FlowFileError` naming line and column."""
    rows = csv.reader(io.StringIO(text))
    header = next(rows, None)
    if header is None:
        raise FlowFileError(f"{name}: empty; the first line is the header src,dst,bytes[,start_us]")
    cols = [h.strip() for h in header]
    missing = [c for c in REQUIRED if c not in cols]
    unknown = [c for c in cols if c not in REQUIRED + OPTIONAL]
    if missing or unknown or len(set(cols)) != len(cols):
        raise FlowFileError(
            f"{name}: line 1: header {','.join(cols)!r} must name src, dst and bytes (and "
            "optionally start_us), each once"
            + (f"; missing {', '.join(missing)}" if missing else "")
            + (f"; unknown {', '.join(unknown)}" if unknown else "")
        )
    at = {c: cols.index(c) for c in cols}
    src, dst, size, start = [], [], [], []
    for line, row in enumerate(rows, start=2):
        if not row or all(not x.strip() for x in row):
            continue
        if len(row) != len(cols):
            raise FlowFileError(
                f"{name}: line {line}: {len(row)} fields, the header has {len(cols)}"
            )
        if len(src) >= MAX_FLOWS:
            raise FlowFileError(f"{name}: more than {MAX_FLOWS:,} flows")
        src.append(_number(row[at["src"]], name, line, "src", integer=True, low=0, high=2**31))
        dst.append(_number(row[at["dst"]], name, line, "dst", integer=True, low=0, high=2**31))
        size.append(_number(row[at["bytes"]], name, line, "bytes", low=1, high=MAX_FLOW_BYTES))
        if "start_us" in at:
            start.append(
                _number(row[at["start_us"]], name, line, "start_us", low=0, high=MAX_START_US)
            )
        else:
            start.append(0.0)
    if not src:
        raise FlowFileError(f"{name}: no flows after the header")
    return FlowList(
        np.array(src, np.int64),
        np.array(dst, np.int64),
        np.array(size, float),
        np.array(start, float),
        name,
    )


def _number(
    text: str, name: str, line: int, column: str, *, integer: bool = False, low: float, high: float
) -> float:
    kind = "a whole number" if integer else "a number"
    try:
        value = float(text.strip())
    except ValueError:
        value = float("nan")
    ok = np.isfinite(value) and low <= value <= high and (not integer or value == int(value))
    if not ok:
        raise FlowFileError(
            f"{name}: line {line}: {column} {text.strip()!r} is not allowed; {kind} from "
            f"{low:g} to {high:g}"
        )
    return int(value) if integer else value


def read_flows(path: str | Path) -> FlowList:
    p = Path(path)
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise FlowFileError(f"{p}: cannot be read ({exc})") from None
    return parse_flows(text, p.name)
