"""Checks that need the catalog or span several fields.

Each check appends :class:`Problem` objects rather than stopping at the first, so a user fixes a
file in one pass. Warnings are things that work but are probably not what was meant.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fabricplan.catalog import Catalog, Model, UnknownIdError
from fabricplan.catalog.providers import nics_mismatch, rented_nodes

# One plain record from the congestion layer (it imports nothing of its own), so that the
# flow-control rules are written once: there.
from fabricplan.congestion.settings import FlowSettings
from fabricplan.scenario.errors import Problem
from fabricplan.scenario.layout import LayoutError, check_layout
from fabricplan.scenario.models import Cluster, Scenario, Workload


def _known(problems: list[Problem], field: str, kind: str, value: str, ids: list[str]) -> bool:
    if value in ids:
        return True
    err = UnknownIdError(kind, value, ids)
    problems.append(Problem(field, f"unknown {kind}{err.hint}; {err.known_text}", value))
    return False


def _dig(data: Any, *path: str) -> Any:
    for part in path:
        if not isinstance(data, Mapping):
            return None
        data = data.get(part)
    return data


def catalog_id_problems(data: Any, cat: Catalog) -> list[Problem]:
    """Unknown catalog ids in scenario data, validated or raw (wrong types are skipped here:
    structural validation reports those)."""
    problems: list[Problem] = []
    for path, kind in (
        (("cluster", "gpu"), "gpu"),
        (("cluster", "topology", "switch"), "switch"),
        (("workload", "model"), "model"),
    ):
        value = _dig(data, *path)
        if isinstance(value, str):
            _known(problems, ".".join(path), kind, value, cat.ids(kind))
    fabrics = _dig(data, "cluster", "fabric")
    if isinstance(fabrics, str):
        _known(problems, "cluster.fabric", "fabric", fabrics, cat.ids("fabric"))
    elif isinstance(fabrics, list | tuple):
        for i, f in enumerate(fabrics):
            if isinstance(f, str):
                _known(problems, f"cluster.fabric[{i}]", "fabric", f, cat.ids("fabric"))
    return problems


def _divisors_hint(n: int, limit: int = 8) -> str:
    divs = [d for d in range(1, n + 1) if n % d == 0]
    return ", ".join(map(str, divs[:limit])) + (", ..." if len(divs) > limit else "")


def _check_flow_control(c: Cluster, problems: list[Problem]) -> None:
    settings = FlowSettings(**c.flow_control.model_dump())
    for name, value, allowed in settings.problems():
        problems.append(Problem(f"cluster.flow_control.{name}", f"must be {allowed}", value))


def _check_cluster(c: Cluster, cat: Catalog, problems: list[Problem]) -> None:
    fabric_ids = cat.ids("fabric")
    _check_flow_control(c, problems)
    if c.fabric and len(set(c.fabric)) != len(c.fabric):
        problems.append(Problem("cluster.fabric", "lists a fabric more than once", list(c.fabric)))
    for f in c.nics_per_fabric or {}:
        if f not in (c.fabric or ()):
            compared = f" ({', '.join(c.fabric)})" if c.fabric else ""
            problems.append(
                Problem(
                    f"cluster.nics_per_fabric.{f}",
                    f"{f} is not in cluster.fabric{compared}: add it there, or drop this entry",
                    c.nics_per_fabric[f],
                )
            )
    gpn = c.gpus_per_node
    if gpn is None and c.gpu in cat.ids("gpu"):
        gpn = cat.gpu(c.gpu).node.gpus_per_node
    if gpn and c.gpus % gpn:
        lower, upper = (c.gpus // gpn) * gpn, (c.gpus // gpn + 1) * gpn
        options = f"{lower} or {upper}" if lower else str(upper)
        problems.append(
            Problem(
                "cluster.gpus",
                f"must be a multiple of gpus_per_node ({gpn}); use {options}",
                c.gpus,
            )
        )
    sw = c.topology.switch
    if sw is not None and sw in cat.ids("switch"):
        switch = cat.switch(sw)
        for f in c.fabric or ():
            if f not in fabric_ids:
                continue
            fab = cat.fabric(f)
            if fab.link_layer != switch.link_layer:
                problems.append(
                    Problem(
                        "cluster.topology.switch",
                        f"is an {switch.link_layer} switch and cannot carry {f}; "
                        "omit it to use each fabric's default switch",
                        sw,
                    )
                )
            elif switch.radix_at(fab.line_rate_gbps) == 0:
                problems.append(
                    Problem(
                        "cluster.topology.switch",
                        f"has no port fast enough for {f} ({fab.line_rate_gbps:g} Gb/s; "
                        f"its ports run at {switch.port_speed_gbps:g} Gb/s)",
                        sw,
                    )
                )


def _check_parallel(s: Scenario, w: Workload, cat: Catalog, problems: list[Problem]) -> None:
    c, p = s.cluster, w.parallel
    gpn = c.gpus_per_node or (cat.gpu(c.gpu).node.gpus_per_node if c.gpu in cat.ids("gpu") else 8)
    if gpn % p.tp and p.tp % gpn:
        problems.append(
            Problem(
                "workload.parallel.tp",
                f"must divide gpus_per_node ({gpn}) or be a multiple of it; "
                f"try one of {_divisors_hint(gpn)}",
                p.tp,
            )
        )
        return
    field = "workload.parallel.tp_comm_overlap"
    if p.tp_comm_overlap and p.tp > 1 and not p.sequence_parallel:
        why = "userbuffers overlap the sequence-parallel all-gathers and reduce-scatters"
        problems.append(Problem(field, f"needs sequence_parallel: true ({why})", True))
    if p.tp_comm_overlap and p.tp > gpn:
        problems.append(
            Problem(
                field,
                f"needs tp within one node (tp = {p.tp} > gpus_per_node = {gpn}): "
                "userbuffers exchange through NVLink peer memory",
                True,
            )
        )
    model_parallel = p.tp * p.pp * p.cp
    if c.gpus % model_parallel:
        problems.append(
            Problem(
                "workload.parallel",
                f"tp x pp x cp = {model_parallel} does not divide gpus ({c.gpus})",
                {"tp": p.tp, "pp": p.pp, "cp": p.cp},
            )
        )
        return
    dp = c.gpus // model_parallel
    if p.dp != "auto" and p.dp != dp:
        problems.append(
            Problem(
                "workload.parallel.dp",
                f"tp x pp x cp x dp must equal gpus ({c.gpus}); with tp x pp x cp = "
                f"{model_parallel} that is dp = {dp} (or use 'auto')",
                p.dp,
            )
        )
        return
    if (dp * p.cp) % p.ep:
        problems.append(Problem("workload.parallel.ep", f"must divide dp x cp ({dp * p.cp})", p.ep))
    if w.global_batch is not None and w.global_batch % (dp * w.micro_batch):
        problems.append(
            Problem(
                "workload.global_batch",
                f"must be a multiple of dp x micro_batch ({dp} x {w.micro_batch} = "
                f"{dp * w.micro_batch})",
                w.global_batch,
            )
        )


# Fabric families whose NICs offer the RDMA verbs a hierarchical expert dispatcher sends with.
RDMA_FAMILIES = frozenset({"infiniband", "roce"})


def no_rdma_dispatch(cat: Catalog, fabrics: list[str]) -> str | None:
    """Why a hierarchical expert dispatcher cannot run on ``fabrics``, or None: DeepEP and
    HybridEP send with GPU-initiated RDMA (NVSHMEM over InfiniBand verbs, which RoCE offers
    too), which a TCP, SRD or Ultra Ethernet fabric does not."""
    no_rdma = [f for f in fabrics if cat.fabric(f).family not in RDMA_FAMILIES]
    if not no_rdma:
        return None
    names = ", ".join(f"{f} ({cat.fabric(f).family})" for f in no_rdma)
    return f"needs an InfiniBand or RoCE fabric (DeepEP and HybridEP send over RDMA); not {names}"


def _check_recompute_modules(w: Workload, m: Model, problems: list[Problem]) -> None:
    """Megatron-Core's rules for recompute_modules (TransformerConfig.__post_init__, v0.14)."""
    field, mods = "workload.recompute_modules", w.recompute_modules or []
    needs = {
        "mla_up_proj": (m.mla is not None, "needs multi-latent attention"),
        "moe": (m.moe is not None, "needs a MoE model"),
        "moe_act": (m.moe is not None, "needs a MoE model"),
        "shared_experts": (m.moe is not None and m.moe.shared_experts > 0, "needs shared experts"),
    }
    if w.recompute != "selective":
        problems.append(Problem(field, "needs recompute: selective", mods))
    for mod in mods:
        ok, why = needs.get(mod, (True, ""))
        if not ok:
            problems.append(Problem(field, f"{mod} {why}; {m.id} has none", mods))
    if len(set(mods)) != len(mods):
        problems.append(Problem(field, "names a module twice", mods))


def _check_workload(s: Scenario, w: Workload, cat: Catalog, problems: list[Problem]) -> None:
    _check_parallel(s, w, cat, problems)
    if w.model not in cat.ids("model"):
        return
    m = cat.model(w.model)
    p = w.parallel
    if m.heads % p.tp:
        problems.append(
            Problem(
                "workload.parallel.tp", f"must divide {m.id}'s attention heads ({m.heads})", p.tp
            )
        )
    if p.ep > 1:
        if m.moe is None:
            problems.append(
                Problem(
                    "workload.parallel.ep",
                    f"expert parallelism needs an MoE model; {m.id} is dense",
                    p.ep,
                )
            )
        elif m.moe.experts % p.ep:
            problems.append(
                Problem(
                    "workload.parallel.ep", f"must divide {m.id}'s experts ({m.moe.experts})", p.ep
                )
            )
    if p.ep_dispatch == "hierarchical":
        field = "workload.parallel.ep_dispatch"
        if p.ep == 1:
            why = "it moves the expert all-to-alls, which ep = 1 does not make"
            problems.append(Problem(field, f"needs ep > 1 ({why})", p.ep_dispatch))
        known = [f for f in s.cluster.fabrics if f in cat.ids("fabric")]
        why = no_rdma_dispatch(cat, known)
        if why:
            problems.append(Problem(field, why, p.ep_dispatch))
    if p.ep_comm_overlap:
        field = "workload.parallel.ep_comm_overlap"
        if p.ep == 1:
            why = "it hides the expert all-to-alls, which ep = 1 does not make"
            problems.append(Problem(field, f"needs ep > 1 ({why})", True))
        if p.pp > 1 and p.vp == 1:
            why = "Megatron-Core pairs passes only in an interleaved pipeline"
            problems.append(Problem(field, f"needs vp > 1 when pp > 1 ({why})", True))
    if p.pp > m.layers:
        problems.append(
            Problem("workload.parallel.pp", f"exceeds {m.id}'s layers ({m.layers})", p.pp)
        )
    elif p.vp > 1 and (p.pp == 1 or p.pp * p.vp > m.layers):
        problems.append(
            Problem(
                "workload.parallel.vp",
                f"interleaving needs pp > 1 and pp x vp <= {m.id}'s layers ({m.layers})",
                p.vp,
            )
        )
    if p.pipeline_engine == "deepspeed":
        field, why = "workload.parallel.pipeline_engine", "DeepSpeed's PipelineEngine has no"
        if p.vp > 1:
            problems.append(Problem(field, f"needs vp = 1 ({why} interleaved schedule)", p.vp))
        if p.pipeline_layout is not None:
            problems.append(
                Problem(
                    field,
                    f"takes no pipeline_layout ({why} Megatron-Core layouts)",
                    p.pipeline_layout,
                )
            )
    if w.recompute_modules is not None:
        _check_recompute_modules(w, m, problems)
    if p.pipeline_layout is not None:
        try:
            check_layout(p.pipeline_layout, m.layers, w.mtp_layers, p.pp, p.vp)
        except LayoutError as exc:
            field = "workload.parallel.pipeline_layout"
            problems.append(Problem(field, f"{exc} ({m.id})", p.pipeline_layout))
    if w.fp8_recipe != "delayed" and w.precision != "fp8":
        problems.append(
            Problem("workload.fp8_recipe", "scales FP8 tensors: needs precision fp8", w.fp8_recipe)
        )
    if w.precision == "fp8" and s.cluster.gpu in cat.ids("gpu"):
        gpu = cat.gpu(s.cluster.gpu)
        if gpu.fp8_dense_tflops is None:
            problems.append(
                Problem("workload.precision", f"{gpu.id} has no FP8 tensor cores; use bf16", "fp8")
            )


def check_scenario(s: Scenario, cat: Catalog) -> list[Problem]:
    """Every problem that stops ``s`` from being a usable scenario."""
    problems = catalog_id_problems(s.model_dump(), cat)
    _check_cluster(s.cluster, cat, problems)
    if s.workload is not None:
        _check_workload(s, s.workload, cat, problems)
    g = s.organization.growth
    if g is not None and g.target_gpus < s.cluster.gpus:
        problems.append(
            Problem(
                "organization.growth.target_gpus",
                f"must be at least cluster.gpus ({s.cluster.gpus})",
                g.target_gpus,
            )
        )
    return problems


def scenario_warnings(s: Scenario, cat: Catalog) -> list[Problem]:
    """Things that load but are probably unintended. ``s`` must be resolved."""
    out: list[Problem] = []
    w = s.workload
    if w is not None:
        m = cat.model(w.model)
        if w.seq_len is not None and w.seq_len > m.max_seq_len:
            out.append(
                Problem(
                    "workload.seq_len",
                    f"longer than {m.id}'s trained context ({m.max_seq_len})",
                    w.seq_len,
                )
            )
        if m.layers % w.parallel.pp and w.parallel.pipeline_layout is None:
            out.append(
                Problem(
                    "workload.parallel.pp",
                    f"does not divide {m.id}'s {m.layers} layers; stages will be uneven",
                    w.parallel.pp,
                )
            )
        if m.kv_heads % w.parallel.tp and m.attention != "mla":
            out.append(
                Problem(
                    "workload.parallel.tp",
                    f"exceeds {m.id}'s KV heads ({m.kv_heads}); KV projections are replicated",
                    w.parallel.tp,
                )
            )
        if w.kind == "inference" and s.workload and w.tokens is not None:
            out.append(Problem("workload.tokens", "ignored for inference", w.tokens))
    no_roce = not any(cat.fabric(f).family == "roce" for f in s.cluster.fabrics)
    if s.cluster.roce_quality != "tuned" and no_roce:
        out.append(
            Problem(
                "cluster.roce_quality",
                "has no effect: no RoCE fabric is compared",
                s.cluster.roce_quality,
            )
        )
    asked = s.cluster.routing
    if asked is not None:
        # the catalog's names: per-packet spraying is 'packet-spray'; InfiniBand's static
        # per-destination tables spread flows as a hash does
        named = {"spray": ("packet-spray",), "ecmp": ("ecmp", "static")}.get(asked, (asked,))
        for f in s.cluster.fabrics:
            can = cat.fabric(f).routing
            if not set(named) & set(can):
                out.append(
                    Problem(
                        "cluster.routing",
                        f"is not among {f}'s routings ({', '.join(can)}); it is simulated as asked",
                        asked,
                    )
                )
    # a fabric only rented on node types with other NIC counts (A3 High: TCPX over 4 NICs),
    # compared on the NICs the scenario gives it, which no provider rents
    for f in s.cluster.fabrics:
        nics = s.cluster.nics_for(f)
        listed = cat.fabric(f).rented_only and nics_mismatch(s.cluster.gpu, f, nics)
        if listed:
            own = f in (s.cluster.nics_per_fabric or {})
            out.append(
                Problem(
                    f"cluster.nics_per_fabric.{f}" if own else "cluster.nics_per_node",
                    f"{f} with {s.cluster.gpu} is rented as {listed}; it is compared on "
                    f"this scenario's {nics} NICs a node",
                    nics,
                )
            )
    # owning a fabric that only comes as a cloud's node types: its capex prices stand-in parts
    rented = [f for f in s.cluster.fabrics if cat.fabric(f).rented_only]
    if s.costs.mode == "own" and rented:
        named = ", ".join(
            f"{f} ({', '.join(n.id for n in rented_nodes(s.cluster.gpu, f)) or 'no node type'})"
            for f in rented
        )
        out.append(
            Problem(
                "costs.mode",
                f"only rented, as these node types with {s.cluster.gpu}: {named}; an owned "
                "cluster cannot have them, so their capex and opex price the catalog's stand-in "
                "switches and NICs: use costs.mode rent to compare what renting costs",
                s.costs.mode,
            )
        )
    flow = s.cluster.flow_control.model_dump(exclude_none=True)
    if flow and no_roce:
        out.append(
            Problem("cluster.flow_control", "has no effect: no RoCE fabric is compared", flow)
        )
    return out
