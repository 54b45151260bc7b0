"""Grade a provider's nccl-tests run against what its fabric should deliver.

The verdict rests on two ratios, measured over expected:
- busbw for large messages (>= 64 MiB, or the largest sizes in the run), where the network's
  bandwidth decides;
- time for small messages (<= 64 KiB), where latency decides.
Thresholds sit outside the model's own error on healthy clusters (median under 5 % for large
messages on the validation runs, about 20 % for small-message time), so a `warn` or `fail`
points at the cluster, not the model. Findings name likely causes from the log and the numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fabricplan.collectives import CommSystem
from fabricplan.nccltests.compare import Comparison, env_selection
from fabricplan.nccltests.parse import Quote, Result, Run
from fabricplan.nccltests.sanity import impossible_rows

LARGE_BYTES = 64 * 2**20
SMALL_BYTES = 64 * 2**10
# busbw ratio at or above which a run passes / warns; below WARN it fails.
PASS_BW_RATIO = 0.90
WARN_BW_RATIO = 0.75
# small-message time ratio at or below which a run passes / warns.
PASS_LAT_RATIO = 1.5
WARN_LAT_RATIO = 2.5
# Findings that say the run did not measure the fabric as built: the verdict is `fail` whatever
# the figures, and calibrate will not fit a fabric to such a run without --force.
SETUP_FAULTS = ("impossible_rows", "gdr_off", "socket_transport", "fewer_nics")
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


def _quotes(run: Run, *kinds: str) -> tuple[Quote, ...]:
    return tuple(q for kind in kinds for q in run.evidence.get(kind, []))


@dataclass(frozen=True)
class Grade:
    verdict: str
    bandwidth_ratio: float | None
    latency_ratio: float | None
    comparison: Comparison
    findings: list[Finding] = field(default_factory=list)

    def worst(self, n: int = 3) -> list[int]:
        """Indices of the sizes with the lowest busbw ratio."""
        ratio = np.nan_to_num(self.comparison.busbw_ratio, nan=np.inf)
        return [int(i) for i in np.argsort(ratio)[:n]]


def _median(x: np.ndarray) -> float | None:
    x = x[np.isfinite(x)]
    return float(np.median(x)) if x.size else None


def _large_mask(sizes: np.ndarray) -> np.ndarray:
    large = sizes >= LARGE_BYTES
    if not large.any():  # a run that stops short of 64 MiB: its largest quarter
        large = sizes >= np.quantile(sizes, 0.75)
    return large


def _findings(
    run: Run, system: CommSystem, cmp: Comparison, bw: float | None, lat: float | None
) -> list[Finding]:
    out: list[Finding] = []
    if bad := impossible_rows(run):
        more = f" (and {len(bad) - MAX_NAMED_ROWS} more)" if len(bad) > MAX_NAMED_ROWS else ""
        out.append(
            Finding(
                "impossible_rows",
                "fail",
                f"{len(bad)} row(s) no GPU could have measured: "
                + "; ".join(bad[:MAX_NAMED_ROWS])
                + more
                + ". The log was edited or cut; rerun nccl-tests.",
            )
        )
    if run.gdr is False:
        out.append(
            Finding(
                "gdr_off",
                "fail",
                "GPUDirect RDMA is off ('GDR 0' in the log): every transfer bounces through host "
                "memory. Check that the nvidia-peermem (or dma-buf) module is loaded, and "
                "NCCL_NET_GDR_LEVEL and ACS settings on the PCIe switches.",
                _quotes(run, "gdr"),
            )
        )
    if run.transport == "socket" and system.transport == "rdma":
        out.append(
            Finding(
                "socket_transport",
                "fail",
                "NCCL fell back to TCP sockets (NET/Socket in the log) on an RDMA fabric: the RDMA "
                "devices were not found or usable (NCCL_IB_HCA, drivers, NCCL_NET).",
                _quotes(run, "net"),
            )
        )
    if run.nics_in_use is not None and run.nics_in_use < system.nics_per_node:
        out.append(
            Finding(
                "fewer_nics",
                "fail",
                f"NCCL uses {run.nics_in_use} NIC(s) per node but the node has "
                f"{system.nics_per_node}: check NCCL_IB_HCA, link state (ibstat) and GPU-NIC "
                "affinity.",
                _quotes(run, "net", "NCCL_IB_HCA"),
            )
        )
    if cmp.forced_algorithms:
        out.append(
            Finding(
                "algorithm_forced",
                "info",
                f"NCCL_ALGO limits NCCL to {', '.join(cmp.forced_algorithms)}; "
                "expected figures are computed under the same limit. Default settings "
                "would be faster where the model shows another algorithm winning.",
                _quotes(run, "NCCL_ALGO"),
            )
        )
    _, protocols = env_selection(run.env)
    if protocols:
        out.append(
            Finding(
                "protocol_forced",
                "info",
                f"NCCL_PROTO limits NCCL to {', '.join(protocols)}; expected figures are "
                "computed under the same limit. Forcing Simple costs small messages their "
                "latency, forcing LL or LL128 costs large ones their bandwidth.",
                _quotes(run, "NCCL_PROTO"),
            )
        )
    out += _pcie_findings(run, system)
    large = _large_mask(cmp.sizes)
    if spread := _inplace_spread(run, large):
        out.append(spread)
    measured = cmp.measured_busbw_GBps[large]
    if bw is not None and bw < PASS_BW_RATIO and measured.size and run.gdr is not False:
        plateau = float(np.max(cmp.measured_busbw_GBps))
        per_nic = system.nic_GBps
        nic_equiv = plateau / per_nic
        if system.nodes > 1 and nic_equiv < WARN_BW_RATIO * system.nics_per_node:
            out.append(
                Finding(
                    "nic_bandwidth",
                    "fail" if bw < WARN_BW_RATIO else "warn",
                    f"Peak busbw {plateau:.0f} GB/s is what {nic_equiv:.1f} of the node's "
                    f"{system.nics_per_node} NICs deliver at {per_nic:.0f} GB/s each: NICs idle or "
                    "missing from NCCL_IB_HCA, links trained at a lower rate, or a PCIe bottleneck "
                    "(NICs behind a Gen4 or x8 link, ACS forcing traffic through the CPU).",
                )
            )
        last = float(measured[-1])
        best = float(np.max(measured))
        if best > 0 and last < (1 - DROP_FRACTION) * best:
            out.append(
                Finding(
                    "large_message_drop",
                    "warn",
                    f"busbw falls from {best:.0f} to {last:.0f} GB/s as messages grow: "
                    "congestion in the fabric (oversubscribed uplinks, ECMP hash collisions, "
                    "adaptive routing off"
                    + (
                        ", PFC pause storms or ECN/DCQCN thresholds"
                        if system.family == "roce"
                        else ""
                    )
                    + ").",
                )
            )
        if system.nodes > 2 and bw >= WARN_BW_RATIO:
            out.append(
                Finding(
                    "congestion",
                    "warn",
                    f"busbw is {bw:.0%} of expected across {system.nodes} nodes: typical of flow "
                    "collisions on a multi-tier fabric; try NCCL_IB_QPS_PER_CONNECTION=2-4 "
                    "and check that adaptive routing is enabled.",
                )
            )
        if system.family == "roce" and bw < WARN_BW_RATIO:
            out.append(
                Finding(
                    "roce_config",
                    "warn",
                    "On RoCE a shortfall this large usually means a lossless misconfiguration: PFC "
                    "off or on the wrong priority, ECN/DCQCN thresholds, or mismatched MTU.",
                )
            )
    if lat is not None and lat > PASS_LAT_RATIO:
        out.append(
            Finding(
                "high_latency",
                "fail" if lat > WARN_LAT_RATIO else "warn",
                f"Small messages take {lat:.1f}x the expected time: extra switch hops, TCP or host "
                "staging, CPU power saving on the proxy thread, or a busy host.",
            )
        )
    return out


def _pcie_findings(run: Run, system: CommSystem) -> list[Finding]:
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


def _inplace_spread(run: Run, large: np.ndarray) -> Finding | None:
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
                tuple(_row_quote(r) for r, _ in worst),
            )
    return None


def _row_quote(r: Result) -> Quote:
    ip = r.inplace_busbw_GBps
    cv = f", times spread {r.cv_pct:g} %" if r.cv_pct is not None else ""
    text = f"{r.size_bytes} B: busbw {r.busbw_GBps:g} GB/s" + (
        f", in-place {ip:g}" if ip is not None else ""
    )
    return Quote(f"line {r.line}" if r.line else "JSON row", text + cv)


def _same_cluster(a: Run, b: Run) -> bool:
    """Whether two runs of one file may be on the same machines: a file often collects
    several clusters' logs; runs whose listed hosts do not overlap are not compared."""
    return not (a.hosts and b.hosts and not (a.hosts & b.hosts))


def _largest_rows(*runs: Run) -> tuple[Quote, ...]:
    """Each run's row at its largest message: the figures a comparison between runs rests on."""
    return tuple(_row_quote(max(r.results, key=lambda x: x.size_bytes)) for r in runs if r.results)


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
                i for i in idx if 2 <= runs[i][1].nodes < n and _same_cluster(runs[i][0], run_j)
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
                evidence = _largest_rows(runs[best][0], run_j)
                out.setdefault(j, []).append(Finding(code, "warn", message, evidence))
    return out


def grade(
    run: Run, system: CommSystem, cmp: Comparison, *, layout_warnings: list[str] | None = None
) -> Grade:
    """Verdict (`pass` / `warn` / `fail`) and findings for one measured run; a flag the log
    contradicts (``layout_warnings``) is a warning, not a cause."""
    large = _large_mask(cmp.sizes)
    small = cmp.sizes <= SMALL_BYTES
    bw = _median(cmp.busbw_ratio[large])
    lat = _median(cmp.time_ratio[small]) if small.any() else None
    shape = _quotes(run, "topology", "ranks")
    findings = [Finding("flag_disagrees_with_log", "warn", w, shape) for w in layout_warnings or []]
    findings += _findings(run, system, cmp, bw, lat)
    verdict = "pass"
    if (bw is not None and bw < PASS_BW_RATIO) or (lat is not None and lat > PASS_LAT_RATIO):
        verdict = "warn"
    if (bw is not None and bw < WARN_BW_RATIO) or (lat is not None and lat > WARN_LAT_RATIO):
        verdict = "fail"
    if any(f.severity == "fail" and f.code in SETUP_FAULTS for f in findings):
        verdict = "fail"
    return Grade(verdict, bw, lat, cmp, findings)
