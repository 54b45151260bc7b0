"""What a grade finds beyond its two ratios: the record of a finding (its code, severity,
message and the log lines that show it), and the failure patterns that span a run's rows or
several runs of one file: unsteady large messages, narrow PCIe links, busbw falling as nodes
are added, repeated runs that disagree. The verdicts stay in :mod:`.grade`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from fabricplan.collectives import CommSystem
from fabricplan.nccltests.parse import Quote, Result, Run

if TYPE_CHECKING:
    from fabricplan.nccltests.grade import Grade

# Rows a finding names at most; the count says how many more.
MAX_NAMED_ROWS = 3
# a large-message busbw this far below the run's own best means bandwidth collapses as
# messages grow: the signature of congestion (pause storms, hash collisions), not of a slow link
DROP_FRACTION = 0.10
# Assumption: a steady fabric repeats a large-message measurement within a few percent (every
# run of the bundled published logs, broken ones included, has its out-of-place and in-place
# busbw within 1 %, median over sizes >= 64 MiB); a spread beyond this, between the two or
# between repeated runs on the same hosts, is instability run to run (adaptive routing or ECN
# that flaps, other tenants, throttling).
UNSTABLE_SPREAD = 0.10
# A PCIe link into a NIC or GPU this far below its peers' (or below the NIC's own rate) has
# trained at fewer lanes or an older generation: NCCL reports x16 Gen4 as 24 GB/s, Gen5 as 48.
PCIE_SHORTFALL = 0.75


@dataclass(frozen=True)
class Finding:
    code: str
    severity: str  # "fail", "warn" or "info"
    message: str
    evidence: tuple[Quote, ...] = ()  # the log lines that show it


def quotes(run: Run, *kinds: str) -> tuple[Quote, ...]:
    return tuple(q for kind in kinds for q in run.evidence.get(kind, []))


def pcie_findings(run: Run, system: CommSystem) -> list[Finding]:
    """Links into NICs or GPUs that NCCL's topology dump shows narrower than their peers', or
    a NIC's link slower than the NIC."""
    out: list[Finding] = []
    for kind in ("NIC", "GPU"):
        links = [(bw, q) for (_, k, _), (bw, q) in run.pci_links.items() if k == kind]
        if not links:
            continue
        best = max(bw for bw, _ in links)
        floor = PCIE_SHORTFALL * best
        if kind == "NIC":  # a NIC's own rate sets what its link must carry
            floor = max(floor, PCIE_SHORTFALL * system.nic_GBps)
        slow = sorted((x for x in links if x[0] < floor), key=lambda x: x[0])
        if not slow:
            continue
        what = "NICs" if kind == "NIC" else "GPUs"
        out.append(
            Finding(
                "pcie_links",
                "warn",
                f"{len(slow)} of {len(links)} {what} sit behind a PCIe link of "
                f"{slow[0][0]:g} GB/s where the others have {best:g}"
                + (f" and each NIC moves {system.nic_GBps:.0f}" if kind == "NIC" else "")
                + ": a link trained at fewer lanes or an older generation (reseat the card, "
                "check lspci -vv LnkSta against LnkCap, the slot's bifurcation and risers).",
                tuple(q for _, q in slow[:MAX_NAMED_ROWS]),
            )
        )
    return out


def inplace_spread(run: Run, large: np.ndarray) -> Finding | None:
    """Out-of-place and in-place measure the same transfer twice: large messages whose two
    figures disagree by more than ``UNSTABLE_SPREAD``, or whose per-iteration times (``-J``
    with ``-I``) spread that much, show a fabric that is not steady run to run."""
    rows = [r for r, big in zip(run.results, large.tolist(), strict=False) if big]
    pairs = [
        (r, abs(r.busbw_GBps - r.inplace_busbw_GBps) / max(r.busbw_GBps, r.inplace_busbw_GBps))
        for r in rows
        if r.inplace_busbw_GBps and r.busbw_GBps > 0
    ]
    cvs = [(r, r.cv_pct / 100) for r in rows if r.cv_pct is not None]
    checks = (
        (pairs, "out-of-place and in-place busbw differ"),
        (cvs, "per-iteration times spread"),
    )
    for found, how in checks:
        if not found:
            continue
        spread = float(np.median([x for _, x in found]))
        if spread > UNSTABLE_SPREAD:
            worst = sorted(found, key=lambda x: -x[1])[:MAX_NAMED_ROWS]
            return Finding(
                "unstable",
                "warn",
                f"Large messages are not steady: {how} by {spread:.0%} (median over "
                f"{len(found)} sizes, {UNSTABLE_SPREAD:.0%} is the most a healthy fabric "
                "shows). Adaptive routing or ECN settings that flap, other tenants' traffic, or "
                "throttling; repeat the run and compare.",
                tuple(row_quote(r) for r, _ in worst),
            )
    return None


def row_quote(r: Result) -> Quote:
    ip = r.inplace_busbw_GBps
    cv = f", times spread {r.cv_pct:g} %" if r.cv_pct is not None else ""
    text = f"{r.size_bytes} B: busbw {r.busbw_GBps:g} GB/s" + (
        f", in-place {ip:g}" if ip is not None else ""
    )
    return Quote(f"line {r.line}" if r.line else "JSON row", text + cv)


def same_cluster(a: Run, b: Run) -> bool:
    """Whether two runs of one file may be on the same machines: a file often collects
    several clusters' logs; runs whose listed hosts do not overlap are not compared."""
    return not (a.hosts and b.hosts and not (a.hosts & b.hosts))


def largest_rows(*runs: Run) -> tuple[Quote, ...]:
    """Each run's row at its largest message: the figures a comparison between runs rests on."""
    return tuple(row_quote(max(r.results, key=lambda x: x.size_bytes)) for r in runs if r.results)


def across_runs(runs: list[tuple[Run, CommSystem, Grade]]) -> dict[int, list[Finding]]:
    """Findings no single run shows, by the index of the run they are about: busbw (measured
    over expected) falling as nodes are added, and repeated runs on the same hosts that
    disagree. Only runs of one collective, node shape, fabric and NCCL settings are compared."""
    out: dict[int, list[Finding]] = {}
    groups: dict[tuple, list[int]] = {}
    for i, (run, system, g) in enumerate(runs):
        if g.bandwidth_ratio is not None:
            shape = (system.gpus_per_node, system.nics_per_node, system.fabric)
            key = (g.comparison.op, *shape, tuple(sorted(run.env.items())))
            groups.setdefault(key, []).append(i)

    def ratio(k: int) -> float:
        return runs[k][2].bandwidth_ratio or 0.0

    for idx in groups.values():
        for j in idx:
            run_j, sys_j, g_j = runs[j]
            op, n = g_j.comparison.op, sys_j.nodes
            fewer = [
                i for i in idx if 2 <= runs[i][1].nodes < n and same_cluster(runs[i][0], run_j)
            ]
            repeats = [i for i in idx if i != j and run_j.hosts and runs[i][0].hosts == run_j.hosts]
            for candidates, share, code in (
                (fewer, DROP_FRACTION, "busbw_falls_with_nodes"),
                (repeats, UNSTABLE_SPREAD, "unstable"),
            ):
                best = max(candidates, key=ratio, default=None)
                if best is None or ratio(j) >= (1 - share) * ratio(best):
                    continue
                was, now = f"{ratio(best):.0%}", f"{ratio(j):.0%}"
                if code == "unstable":
                    message = (
                        f"Repeated {op} runs on the same {n} hosts disagree: {was} and {now} of "
                        "expected busbw. A steady fabric repeats within a few percent; look for "
                        "flapping adaptive routing or ECN, other tenants' traffic, or throttling."
                    )
                else:
                    message = (
                        f"{op} busbw falls as nodes are added: {was} of expected on "
                        f"{runs[best][1].nodes} nodes, {now} on {n}. The expected figures already "
                        "count what more nodes cost; the rest is the fabric between them (spine "
                        "uplinks, ECMP collisions, adaptive routing off)."
                    )
                evidence = largest_rows(runs[best][0], run_j)
                out.setdefault(j, []).append(Finding(code, "warn", message, evidence))
    return out
