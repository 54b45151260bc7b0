"""Grade a provider's nccl-tests run against what its fabric should deliver.

The verdict rests on two ratios, measured over expected:
- busbw for large messages (>= 64 MiB, or the largest sizes in the run), where the network's
  bandwidth decides: the lower of its median over those sizes and its median over the
  plateau (the sizes whose expected busbw has levelled off), since a shortfall may show in
  either (a misconfiguration from 64 MiB up; congestion, which builds under sustained load,
  often only at the largest sizes);
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
from fabricplan.nccltests.findings import (
    DROP_FRACTION,
    MAX_NAMED_ROWS,
    Finding,
    inplace_spread,
    pcie_findings,
    quotes,
)
from fabricplan.nccltests.parse import Run
from fabricplan.nccltests.sanity import impossible_rows

LARGE_BYTES = 64 * 2**20
SMALL_BYTES = 64 * 2**10
# The plateau: sizes whose expected busbw is at least this share of the run's highest expected
# busbw, i.e. where latency and pipeline fill take under about a tenth of the expected time.
PLATEAU_SHARE = 0.9
# busbw ratio at or above which a run passes / warns; below WARN it fails.
PASS_BW_RATIO = 0.90
WARN_BW_RATIO = 0.75
# small-message time ratio at or below which a run passes / warns.
PASS_LAT_RATIO = 1.5
WARN_LAT_RATIO = 2.5
# Findings that say the run did not measure the fabric as built: the verdict is `fail` whatever
# the figures, and calibrate will not fit a fabric to such a run without --force.
SETUP_FAULTS = ("impossible_rows", "gdr_off", "socket_transport", "fewer_nics")


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


def bandwidth_ratio(cmp: Comparison) -> float | None:
    """Measured over expected busbw for large messages: the lower of the median over the large
    sizes and the median over the plateau (see the module's docstring); None without either."""
    large = _median(cmp.busbw_ratio[_large_mask(cmp.sizes)])
    expected = np.nan_to_num(cmp.expected_busbw_GBps, nan=0.0)
    top = expected.max(initial=0.0)
    plateau = _median(cmp.busbw_ratio[expected >= PLATEAU_SHARE * top]) if top > 0 else None
    found = [r for r in (large, plateau) if r is not None]
    return min(found) if found else None


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
                quotes(run, "gdr"),
            )
        )
    if run.transport == "socket" and system.transport == "rdma":
        out.append(
            Finding(
                "socket_transport",
                "fail",
                "NCCL fell back to TCP sockets (NET/Socket in the log) on an RDMA fabric: the RDMA "
                "devices were not found or usable (NCCL_IB_HCA, drivers, NCCL_NET).",
                quotes(run, "net"),
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
                quotes(run, "net", "NCCL_IB_HCA"),
            )
        )
    # a limit the fabric's own deployment sets (TCPX: Ring and Simple) is no finding
    own_algos = set(system.algorithms or ())
    if cmp.forced_algorithms and set(cmp.forced_algorithms) != own_algos:
        out.append(
            Finding(
                "algorithm_forced",
                "info",
                f"NCCL_ALGO limits NCCL to {', '.join(cmp.forced_algorithms)}; "
                "expected figures are computed under the same limit. Default settings "
                "would be faster where the model shows another algorithm winning.",
                quotes(run, "NCCL_ALGO"),
            )
        )
    _, protocols = env_selection(run.env)
    if protocols and set(protocols) != set(system.protocols or ()):
        out.append(
            Finding(
                "protocol_forced",
                "info",
                f"NCCL_PROTO limits NCCL to {', '.join(protocols)}; expected figures are "
                "computed under the same limit. Forcing Simple costs small messages their "
                "latency, forcing LL or LL128 costs large ones their bandwidth.",
                quotes(run, "NCCL_PROTO"),
            )
        )
    out += pcie_findings(run, system)
    large = _large_mask(cmp.sizes)
    if spread := inplace_spread(run, large):
        out.append(spread)
    measured = cmp.measured_busbw_GBps[large]
    if bw is not None and bw < PASS_BW_RATIO and measured.size and run.gdr is not False:
        plateau = float(np.max(cmp.measured_busbw_GBps))
        per_nic = system.nic_net_GBps
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


def grade(
    run: Run, system: CommSystem, cmp: Comparison, *, layout_warnings: list[str] | None = None
) -> Grade:
    """Verdict (`pass` / `warn` / `fail`) and findings for one measured run; a flag the log
    contradicts (``layout_warnings``) is a warning, not a cause."""
    small = cmp.sizes <= SMALL_BYTES
    bw = bandwidth_ratio(cmp)
    lat = _median(cmp.time_ratio[small]) if small.any() else None
    shape = quotes(run, "topology", "ranks")
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
