"""Hardware facts the seeds quote, serving claims, and claims outside what fabricplan models.

Hardware facts are checked against the catalog, whose entries cite vendor datasheets. Serving
claims run the inference model on the 64-GPU serving example with the replica spread one node,
two nodes by pipeline, or two nodes by tensor parallelism. Market and business claims are
listed so none is silently dropped, with ``holds`` left open.
"""

from __future__ import annotations

from typing import Any

from fabricplan.catalog import Catalog
from fabricplan.claims.result import Case, ClaimResult, source
from fabricplan.claims.scale import EXAMPLES, IB, ROCE
from fabricplan.congestion.network_backend import DEFAULT_BACKEND, NetworkBackend
from fabricplan.scenario import Scenario, load_scenario
from fabricplan.sweep.variants import variant_of

TCP = "tcp-100g"
# "Adequate" for serving: within 5 % of InfiniBand's throughput and inter-token latency, about
# the run-to-run spread of serving benchmarks (an assumption, stated so it can be argued with).
ADEQUATE_SHARE = 0.95
SERVING = "serving-64-h100.yaml"
SERVING_LAYOUTS = (
    (
        "llama3-70b on one node (TP 8)",
        ("workload.model=llama3-70b", "workload.parallel.tp=8", "workload.parallel.pp=1"),
    ),
    (
        "llama3-405b over two nodes (TP 8, PP 2)",
        ("workload.parallel.tp=8", "workload.parallel.pp=2"),
    ),
    ("llama3-405b over two nodes (TP 16)", ("workload.parallel.tp=16", "workload.parallel.pp=1")),
)


def _fact(
    cid: str, seed: str, text: str, claimed: float, unit: str, computed: float, where: str
) -> ClaimResult:
    ok = abs(computed - claimed) <= 1e-9 * max(abs(claimed), 1.0)
    return ClaimResult(
        id=cid,
        claim=text,
        source=source(seed),
        conditions={"catalog": where},
        claimed={"value": claimed, "unit": unit},
        computed={"value": computed, "unit": unit, "summary": f"catalog: {computed:g} {unit}"},
        holds=ok,
        basis="catalog",
        cases=(Case({"catalog": where}, computed, ok),),
    )


def fact_claims(cat: Catalog) -> list[ClaimResult]:
    h100 = cat.gpu("h100")
    return [
        _fact(
            "h100-fp8-1979-tflops",
            "002",
            "An H100 delivers 1,979 TFLOPS of FP8 compute",
            1979,
            "TFLOPS (dense)",
            h100.fp8_dense_tflops or 0.0,
            "gpu h100: fp8_dense_tflops",
        ),
        _fact(
            "h100-nvlink-900-GBps",
            "002",
            "NVLink within an H100 node gives up to 900 GB/s",
            900,
            "GB/s (both directions)",
            h100.scaleup_bidir_GBps,
            "gpu h100: scaleup_bidir_GBps",
        ),
        _fact(
            "ndr-400-gbps",
            "001",
            "Quantum-2 InfiniBand NDR runs 400 Gb/s per port",
            400,
            "Gb/s",
            cat.fabric("ib-ndr").line_rate_gbps,
            "fabric ib-ndr: line_rate_gbps",
        ),
        _fact(
            "hdr-200-gbps",
            "001",
            "InfiniBand HDR runs 200 Gb/s per port",
            200,
            "Gb/s",
            cat.fabric("ib-hdr").line_rate_gbps,
            "fabric ib-hdr: line_rate_gbps",
        ),
    ]


def _serving(cat: Catalog, backend: NetworkBackend) -> list[tuple[str, dict[str, Any] | str]]:
    """Each layout's serving figures by fabric, or why it is not evaluable (sweep engine)."""
    from fabricplan.sweep.engine import evaluate_scenarios

    def build(sets: tuple[str, ...]) -> Scenario:
        sc = load_scenario(EXAMPLES / SERVING, catalog=cat, overrides=list(sets))
        cluster = sc.cluster.model_copy(update={"fabric": (IB, ROCE, TCP)})
        return sc.model_copy(update={"cluster": cluster})

    variants = [
        variant_of(i, {"layout": label}, lambda sets=sets: build(sets))
        for i, (label, sets) in enumerate(SERVING_LAYOUTS)
    ]
    out: list[tuple[str, dict[str, Any] | str]] = []
    for (label, _), rec in zip(
        SERVING_LAYOUTS, evaluate_scenarios(variants, cat, backend), strict=True
    ):
        if not rec.ok:
            out.append((label, (rec.skipped or "refused").splitlines()[0]))
            continue
        out.append((label, {o.fabric: o.detail.figures for o in rec.outcomes if o.detail}))
    return out


def serving_claims(cat: Catalog, backend: NetworkBackend = DEFAULT_BACKEND) -> list[ClaimResult]:
    rows = _serving(cat, backend)
    out = []
    for cid, seed, text, fabric in (
        (
            "serving-ethernet-adequate",
            "000",
            "A well-tuned Ethernet fabric is perfectly adequate for serving, even at hundreds of "
            "GPUs: each request stays on one node or a small tensor-parallel group",
            ROCE,
        ),
        (
            "serving-network-rarely-bottleneck",
            "002",
            "For serving, networking speed is rarely the bottleneck unless a model such as a 405B "
            "spans several nodes",
            TCP,
        ),
    ):
        cases = []
        for label, res in rows:
            cond = {"layout": label, "fabric": fabric, "versus": IB}
            if isinstance(res, str):
                cases.append(Case(cond, None, None, f"not evaluable: {res}"))
                continue
            share = res[fabric].tokens_per_s / res[IB].tokens_per_s
            itl = res[fabric].itl_s / res[IB].itl_s
            net = res[fabric].network_fraction
            cases.append(
                Case(
                    cond,
                    share,
                    share >= ADEQUATE_SHARE and 1 / itl >= ADEQUATE_SHARE,
                    f"inter-token latency x{itl:.3f}; network {net:.1%} of a decode step",
                )
            )
        first = cases[0]
        multi = [c for c in cases[1:] if c.value is not None]
        worst = min(multi, key=lambda c: c.value or 0.0) if multi else first
        out.append(
            ClaimResult(
                id=cid,
                claim=text,
                source=source(seed),
                conditions={
                    "scenario": SERVING,
                    "fabric": fabric,
                    "versus": IB,
                    "layout": SERVING_LAYOUTS[0][0],
                    "adequate": f"throughput and latency within {1 - ADEQUATE_SHARE:.0%}",
                },
                claimed={"value": ADEQUATE_SHARE, "unit": f"{fabric} / {IB} tokens/s, at least"},
                computed={
                    "value": first.value,
                    "unit": f"{fabric} / {IB} tokens/s",
                    "summary": f"one node: {(first.value or 0):.1%} of IB ({first.note}); "
                    f"worst multi-node layout: {(worst.value or 0):.1%} "
                    f"({worst.conditions['layout']}; {worst.note})",
                },
                holds=first.holds,
                basis="model",
                cases=tuple(cases),
            )
        )
    return out


def outside_claims() -> list[ClaimResult]:
    rows = (
        (
            "ib-80pct-share-2023",
            "004",
            "InfiniBand held about 80 % of AI training cluster "
            "deployments in 2023; Ethernet overtook it in new AI back-end deployments by mid-2025",
            "market share",
        ),
        (
            "mellanox-6.9b",
            "001",
            "NVIDIA acquired Mellanox in 2020 for $6.9 billion",
            "corporate history",
        ),
        (
            "uec-formed-2023",
            "001",
            "The Ultra Ethernet Consortium formed in 2023; production "
            "deployments at scale remain limited as of mid-2025",
            "standards and market",
        ),
        (
            "meta-24k-roce-cluster",
            "004",
            "Meta ran two 24,000-GPU clusters, one InfiniBand and "
            "one RoCEv2; the RoCEv2 one trained Llama 3.1 405B",
            "a published deployment",
        ),
        (
            "voltage-park-ib-tier",
            "002",
            "Voltage Park charges $2.49/hr for its InfiniBand tier",
            "a provider price (recorded in the providers catalog as the seed states it)",
        ),
    )
    return [
        ClaimResult(
            id=cid,
            claim=text,
            source=source(seed),
            conditions={},
            claimed={"kind": kind},
            computed={"summary": f"outside the model ({kind})"},
            holds=None,
            basis="outside-model",
        )
        for cid, seed, text, kind in rows
    ]
