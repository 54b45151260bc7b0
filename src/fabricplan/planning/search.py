"""The fastest plan that fits, from an exhaustive search: every plan of a space evaluated by the
step model in one vectorised pass per batch of scalar flags, ranked by throughput.

Every plan is priced, the ones that do not fit in memory too, so that the answer can say which
faster plans memory rules out. Ranking is by tokens per second (time per token: when the space
resolves the batch per plan, batches differ); equal times keep the order the space lists plans
in (smaller degrees, lower ZeRO stages first), so a tie goes to the simpler plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fabricplan.congestion.network_backend import DEFAULT_BACKEND, NetworkBackend
from fabricplan.planning.space import Flags, Job, SearchSpace, batches
from fabricplan.workload.plan import Hardware, Plans
from fabricplan.workload.shapes import Shape
from fabricplan.workload.step import STEP_PARTS
from fabricplan.workload.training import training_step

# The plan settings each part depends on: an alternative's reason names those that differ.
PART_SETTINGS: dict[str, tuple[str, ...]] = {
    "compute": ("tp", "recompute", "micro_batch", "cp"),
    "overlap_slowdown": ("dp", "cp", "ep", "zero", "overlap_dp"),
    "tp_comm": ("tp", "tp_comm_overlap", "recompute", "micro_batch"),
    "pp_comm": ("pp", "vp", "micro_batch"),
    "ep_comm": ("ep", "ep_comm_overlap", "ep_dispatch", "micro_batch"),
    "cp_comm": ("cp", "cp_comm", "recompute"),
    "dp_comm": ("dp", "ep", "zero", "overlap_dp", "micro_batch"),
    "bubble": ("pp", "vp", "micro_batch"),
    "optimizer": ("zero", "dp", "ep"),
}
# Integer columns of the candidate table, in this order.
INT_COLS = ("tp", "pp", "vp", "cp", "ep", "dp", "micro_batch", "global_batch", "zero")


@dataclass(frozen=True)
class Candidate:
    """One plan and what the step model makes of it on one fabric."""

    tp: int
    pp: int
    vp: int
    cp: int
    ep: int
    dp: int
    micro_batch: int
    global_batch: int
    zero: int
    recompute: str
    overlap_dp: bool
    tp_comm_overlap: bool
    cp_comm: str
    step_time_s: float
    tokens_per_s: float
    memory_GB: float
    fits: bool
    breakdown: dict[str, float]
    ep_comm_overlap: bool = False
    ep_dispatch: str = "alltoall"

    @property
    def sequence_parallel(self) -> bool:
        return self.tp > 1

    @property
    def layout(self) -> tuple[int, ...]:
        return (self.tp, self.pp, self.vp, self.cp, self.ep)

    def label(self) -> str:
        """The plan in a line: its degrees and the options that are on."""
        out = f"tp {self.tp} pp {self.pp}"
        out += f" vp {self.vp}" if self.vp > 1 else ""
        out += f" dp {self.dp}"
        out += "".join(f" {k} {v}" for k, v in (("cp", self.cp), ("ep", self.ep)) if v > 1)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            **{k: getattr(self, k) for k in INT_COLS},
            "sequence_parallel": self.sequence_parallel,
            "recompute": self.recompute,
            "overlap_dp": self.overlap_dp,
            "tp_comm_overlap": self.tp_comm_overlap,
            "cp_comm": self.cp_comm,
            "ep_comm_overlap": self.ep_comm_overlap,
            "ep_dispatch": self.ep_dispatch,
            "step_time_s": self.step_time_s,
            "tokens_per_s": self.tokens_per_s,
            "memory_per_gpu_GB": self.memory_GB,
            "fits": self.fits,
            "breakdown": {f"{k}_s": v for k, v in self.breakdown.items()},
        }


@dataclass(frozen=True)
class Reason:
    """Why a plan loses to the best: a part of the step where it spends ``delta_s`` more, and
    the settings behind it (``detail``); or, with part ``memory``, that it does not fit."""

    part: str
    delta_s: float
    detail: str

    def text(self) -> str:
        if self.part == "memory":
            return f"does not fit: {self.detail}"
        if self.part == "total":
            return f"{self.delta_s:+.3g} s in all ({self.detail})"
        what = self.part.replace("_", " ").replace("comm", "comm.")
        what = {"dp comm.": "exposed DP comm.", "cp comm.": "exposed CP comm."}.get(what, what)
        sign = "+" if self.delta_s >= 0 else "-"
        tail = f" ({self.detail})" if self.detail else ""
        return f"{sign}{abs(self.delta_s):.3g} s {what}{tail}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "part": self.part,
            "delta_s": self.delta_s,
            "detail": self.detail,
            "text": self.text(),
        }


@dataclass(frozen=True)
class Alternative:
    plan: Candidate
    reasons: tuple[Reason, ...]
    # throughput relative to the best plan's (< 1 for a fitting alternative)
    relative: float

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.plan.to_dict(),
            "relative_throughput": self.relative,
            "why": [r.to_dict() for r in self.reasons],
        }


@dataclass
class Table:
    """Every plan evaluated, as columns (one row per plan)."""

    ints: np.ndarray  # (N, len(INT_COLS))
    flags: list[Flags]  # one per batch
    batch: np.ndarray  # (N,) index into flags
    time: np.ndarray
    tokens: np.ndarray
    memory: np.ndarray  # bytes per GPU
    fits: np.ndarray
    parts: dict[str, np.ndarray] = field(default_factory=dict)
    capacity: float = 0.0

    def __len__(self) -> int:
        return len(self.time)

    def per_token(self) -> np.ndarray:
        return self.time / self.tokens

    def candidate(self, i: int) -> Candidate:
        f = self.flags[int(self.batch[i])]
        ints = {k: int(v) for k, v in zip(INT_COLS, self.ints[i], strict=True)}
        t = float(self.time[i])
        return Candidate(
            **ints,
            recompute=f.recompute,
            overlap_dp=f.overlap_dp,
            tp_comm_overlap=f.tp_comm_overlap,
            cp_comm=f.cp_comm,
            ep_comm_overlap=f.ep_comm_overlap,
            ep_dispatch=f.ep_dispatch,
            step_time_s=t,
            tokens_per_s=float(self.tokens[i]) / t,
            memory_GB=float(self.memory[i]) / 1e9,
            fits=bool(self.fits[i]),
            breakdown={p: float(self.parts[p][i]) for p in STEP_PARTS},
        )


def _columns(p: Plans) -> np.ndarray:
    return np.stack([getattr(p, k) for k in INT_COLS], axis=1)


def evaluate(
    s: Shape, job: Job, hw: Hardware, space: SearchSpace, backend: NetworkBackend = DEFAULT_BACKEND
) -> Table:
    """Every plan of ``space`` priced on ``hw``: one ``training_step`` per batch of flags."""
    ints, idx, time, tokens, mem, fits = [], [], [], [], [], []
    parts: dict[str, list[np.ndarray]] = {p: [] for p in STEP_PARTS}
    flags: list[Flags] = []
    capacity = 0.0
    for f, plans in batches(job, space):
        st = training_step(s, plans, hw, backend=backend)
        ints.append(_columns(plans))
        idx.append(np.full(len(plans), len(flags)))
        flags.append(f)
        time.append(st.time)
        tokens.append(np.broadcast_to(st.tokens, st.time.shape))
        mem.append(st.memory.total)
        fits.append(st.memory.fits)
        capacity = st.memory.capacity
        for p in STEP_PARTS:
            parts[p].append(np.broadcast_to(getattr(st, p), st.time.shape))
    if not flags:
        e = np.zeros(0)
        no_parts = {p: e for p in STEP_PARTS}
        return Table(np.zeros((0, len(INT_COLS))), [], e.astype(int), e, e, e, e > 0, no_parts)
    cat = np.concatenate
    return Table(
        ints=cat(ints),
        flags=flags,
        batch=cat(idx),
        time=cat(time),
        tokens=cat(tokens),
        memory=cat(mem),
        fits=cat(fits),
        parts={p: cat(v) for p, v in parts.items()},
        capacity=capacity,
    )


def ranked(table: Table, fitting: bool = True) -> np.ndarray:
    """Row indices of the plans that fit (or, ``fitting=False``, that do not), fastest per
    token first; ties keep the space's order."""
    rows = np.flatnonzero(table.fits if fitting else ~table.fits)
    return rows[np.argsort(table.per_token()[rows], kind="stable")]


def _distinct_layouts(table: Table, rows: np.ndarray, skip: tuple[int, ...], n: int) -> list[int]:
    """The first ``n`` of ``rows`` whose layout (tp, pp, vp, cp, ep) is new: the best plan of
    each other layout, so that the alternatives are not the winner with another ZeRO stage."""
    seen, out = {skip}, []
    for i in rows:
        key = tuple(int(v) for v in table.ints[i, :5])
        if key in seen:
            continue
        seen.add(key)
        out.append(int(i))
        if len(out) == n:
            break
    return out


def _leanest(table: Table, rows: np.ndarray, picked: list[int]) -> list[int]:
    """For each of ``picked``'s layouts, the plan of ``rows`` with that layout that needs the
    least memory: the closest any variant faster than the best comes to fitting."""
    keys = table.ints[rows, :5]
    out = []
    for i in picked:
        same = rows[(keys == table.ints[i, :5]).all(axis=1)]
        out.append(int(same[np.argmin(table.memory[same])]))
    return out


def _setting(c: Candidate, name: str) -> str:
    v = getattr(c, name)
    if name == "micro_batch":
        return f"micro-batch {v}"
    if isinstance(v, bool):
        short = {
            "overlap_dp": "DP overlap",
            "tp_comm_overlap": "TP overlap",
            "ep_comm_overlap": "EP overlap",
        }[name]
        return f"{short} {'on' if v else 'off'}"
    return f"{name.replace('_', ' ')} {v}"


def _detail(alt: Candidate, best: Candidate, part: str) -> str:
    names = [n for n in PART_SETTINGS[part] if getattr(alt, n) != getattr(best, n)]
    if not names:
        return ""
    mine = ", ".join(_setting(alt, n) for n in names)
    theirs = ", ".join(_setting(best, n) for n in names)
    return f"{mine}; best: {theirs}"


# A part counts as a reason when the alternative spends this much more on it: 0.5 % of the best
# step, or 0.1 ms, whichever is larger (smaller differences are rounding, not a cause).
REASON_SHARE = 0.005
REASON_FLOOR_S = 1e-4
# Reasons given per alternative, largest first.
MAX_REASONS = 3


def reasons(alt: Candidate, best: Candidate) -> tuple[Reason, ...]:
    """Why a fitting ``alt`` loses to ``best``: the parts of its step that take longer, scaled
    to the best plan's batch (so that plans of different batches compare), largest first."""
    scale = (best.tokens_per_s * best.step_time_s) / (alt.tokens_per_s * alt.step_time_s)
    floor = max(REASON_SHARE * best.step_time_s, REASON_FLOOR_S)
    deltas = [(p, alt.breakdown[p] * scale - best.breakdown[p]) for p in STEP_PARTS]
    slower = sorted((d for d in deltas if d[1] > floor), key=lambda d: -d[1])
    if not slower:  # a near tie: no part stands out, the difference is spread over them
        total = alt.step_time_s * scale - best.step_time_s
        return (Reason("total", total, "spread over the parts"),)
    return tuple(Reason(p, d, _detail(alt, best, p)) for p, d in slower[:MAX_REASONS])


@dataclass(frozen=True)
class SearchResult:
    """The best plan on one fabric, the runners-up and the faster plans memory rules out."""

    fabric: str
    best: Candidate | None
    alternatives: tuple[Alternative, ...]
    faster_unfit: tuple[Alternative, ...]
    evaluated: int
    fitting: int
    capacity_GB: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "fabric": self.fabric,
            "best": None if self.best is None else self.best.to_dict(),
            "alternatives": [a.to_dict() for a in self.alternatives],
            "faster_but_does_not_fit": [a.to_dict() for a in self.faster_unfit],
            "plans_evaluated": self.evaluated,
            "plans_fitting": self.fitting,
            "usable_memory_per_gpu_GB": self.capacity_GB,
        }


def summarize(table: Table, fabric: str, top: int) -> SearchResult:
    """The best fitting plan of ``table``, the best plan of each of the next ``top`` layouts,
    and up to ``top`` layouts faster than the best that do not fit."""
    order = ranked(table)
    cap = table.capacity / 1e9
    if not len(order):
        unfit = _distinct_layouts(table, ranked(table, fitting=False), (), top)
        alts = tuple(alternative(table.candidate(i), None, cap) for i in unfit)
        return SearchResult(fabric, None, (), alts, len(table), 0, cap)
    best = table.candidate(int(order[0]))
    runners = _distinct_layouts(table, order[1:], best.layout, top)
    per_token = table.per_token()
    faster = ranked(table, fitting=False)
    faster = faster[per_token[faster] < per_token[order[0]]]
    unfit = _leanest(table, faster, _distinct_layouts(table, faster, best.layout, top))
    return SearchResult(
        fabric,
        best,
        tuple(alternative(table.candidate(i), best, cap) for i in runners),
        tuple(alternative(table.candidate(i), best, cap) for i in unfit),
        len(table),
        len(order),
        cap,
    )


def alternative(c: Candidate, best: Candidate | None, cap_GB: float) -> Alternative:
    """``c`` against ``best``: its throughput relative to it and why it loses (or that it
    does not fit in ``cap_GB``)."""
    rel = 0.0 if best is None else c.tokens_per_s / best.tokens_per_s
    if not c.fits:
        detail = f"{c.memory_GB:.1f} GB per GPU > {cap_GB:.1f} GB usable"
        return Alternative(c, (Reason("memory", 0.0, detail),), rel)
    assert best is not None
    return Alternative(c, reasons(c, best), rel)
