"""What a resolved scenario amounts to, in numbers that need no performance model.

This is what ``fabricplan scenario show`` prints: the cluster's shape, each compared fabric's
sourced properties at this size, and the workload's size. Later layers add the predictions.
"""

from __future__ import annotations

from typing import Any

from fabricplan.catalog import Catalog, count_params
from fabricplan.catalog.providers import rented_nodes
from fabricplan.scenario.checks import scenario_warnings
from fabricplan.scenario.models import Scenario

SECONDS_PER_DAY = 86_400
# Dense training FLOPs per token per parameter: forward 2 + backward 4 (Kaplan et al., 2020).
TRAIN_FLOPS_PER_PARAM_TOKEN = 6


def _fabric_facts(s: Scenario, cat: Catalog, fabric_id: str) -> dict[str, Any]:
    f = cat.fabric(fabric_id)
    nic = cat.nic(f.default_nic)
    nics = s.cluster.nics_for(fabric_id)
    per_port = f.nic_goodput_GBps.nominal
    pcie_gen = cat.gpu(s.cluster.gpu).node.pcie_gen
    per_port_eff = nic.goodput_GBps(per_port, pcie_gen)
    switch = cat.switch(s.cluster.topology.switch or f.default_switch)
    return {
        "id": f.id,
        "name": f.name,
        "status": f.status,
        "line_rate_gbps": f.line_rate_gbps,
        "goodput_per_port_GBps": per_port_eff,
        "pcie_limited": per_port > nic.pcie_GBps_in(pcie_gen),
        "nics_per_node": nics,
        # the node types that rent this GPU on this fabric with these NICs (a fabric only rented)
        "rented_as": (
            [n.id for n in rented_nodes(s.cluster.gpu, f.id) if n.nics == nics]
            if f.rented_only
            else []
        ),
        "injection_per_node_GBps": per_port_eff * nics,
        "injection_per_gpu_GBps": per_port_eff * nics / (s.cluster.gpus_per_node or 1),
        "rdma_latency_us": [f.rdma_latency_us.low, f.rdma_latency_us.high],
        "rdma_latency_typical_us": f.rdma_latency_us.nominal,
        "switch": switch.id,
        "switch_latency_ns": switch.port_to_port_latency_ns.nominal,
        "flow_control": f.flow_control,
        "lossless": f.lossless,
        "routing": s.cluster.routing or f.default_routing,  # what step and advise simulate
        "congestion_control": list(f.congestion_control),
        "nic": nic.id,
        "roce_quality": s.cluster.roce_quality if f.family == "roce" else None,
    }


def _workload_facts(s: Scenario, cat: Catalog) -> dict[str, Any] | None:
    w = s.workload
    if w is None:
        return None
    m = cat.model(w.model)
    params = count_params(m)
    gpu = cat.gpu(s.cluster.gpu)
    out: dict[str, Any] = {
        "kind": w.kind,
        "model": m.id,
        "params_b": params.total / 1e9,
        "active_params_b": params.active / 1e9,
        "seq_len": w.seq_len,
        "global_batch": w.global_batch,
        "tokens_per_step": (w.global_batch or 0) * (w.seq_len or 0),
        "parallel": w.parallel.model_dump(),
        "precision": w.precision,
    }
    if w.kind == "training" and w.tokens:
        peak = gpu.fp8_dense_tflops if w.precision == "fp8" else gpu.bf16_dense_tflops
        flops = TRAIN_FLOPS_PER_PARAM_TOKEN * params.active * w.tokens
        out |= {
            "tokens": w.tokens,
            "steps": w.tokens / out["tokens_per_step"],
            "train_flops": flops,
            # A floor, not a prediction: every GPU at 100 % of dense peak, no communication.
            "days_at_peak": flops / (s.cluster.gpus * (peak or 1) * 1e12) / SECONDS_PER_DAY,
        }
    else:
        # concurrency is per replica; a replica spans tp x pp GPUs
        replicas = s.cluster.gpus // (w.parallel.tp * w.parallel.pp)
        out["serving"] = {
            **w.serving.model_dump(),
            "replicas": replicas,
            "streams_total": replicas * w.serving.concurrency,
        }
    return out


def summarize(s: Scenario, cat: Catalog) -> dict[str, Any]:
    """A JSON-ready description of resolved scenario ``s``."""
    c = s.cluster
    gpu = cat.gpu(c.gpu)
    return {
        "name": s.name,
        "cluster": {
            "gpu": gpu.id,
            "gpu_name": gpu.name,
            "gpus": c.gpus,
            "nodes": c.nodes,
            "gpus_per_node": c.gpus_per_node,
            "nics_per_node": c.nics_per_node,
            "topology": c.topology.model_dump(),
            "roce_quality": c.roce_quality,
            "placement": c.placement,
        },
        "fabrics": [_fabric_facts(s, cat, f) for f in c.fabrics],
        "workload": _workload_facts(s, cat),
        "organization": s.organization.model_dump(),
        "costs": s.costs.model_dump(),
        "warnings": [p.to_dict() for p in scenario_warnings(s, cat)],
    }
