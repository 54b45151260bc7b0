"""A scenario's workload on each of its fabrics: the numbers ``fabricplan step`` prints."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import replace
from typing import Any

import numpy as np

from fabricplan.catalog import Catalog
from fabricplan.catalog.reliability import HOURS_PER_DAY, load_reliability
from fabricplan.congestion.network_backend import DEFAULT_BACKEND, NetworkBackend
from fabricplan.scenario import Scenario
from fabricplan.scenario.checks import no_rdma_dispatch
from fabricplan.scenario.summary import SECONDS_PER_DAY
from fabricplan.validation.envelope import validation_of
from fabricplan.workload.errors import WorkloadError
from fabricplan.workload.inference import serve, serving_rates
from fabricplan.workload.interruptions import ExpectedRun, checkpoint_bytes, expected_run
from fabricplan.workload.memo import MEMO
from fabricplan.workload.memory import describe, memory, usable_bytes
from fabricplan.workload.plan import Hardware, Plans, hardware_from_scenario, plans_from_scenario
from fabricplan.workload.result import FabricResult, ServingFigures, TrainingFigures
from fabricplan.workload.shapes import Shape, shape_of, weight_flops_per_token
from fabricplan.workload.training import training_step

__all__ = ["FabricResult", "WorkloadError", "evaluate_scenario"]


def _alternatives(s: Shape, p: Plans, hw: Hardware) -> list[str]:
    """Nearby plans that fit: more recomputation, deeper ZeRO, more tensor or pipeline split."""
    tp, pp, cp = int(p.tp[0]), int(p.pp[0]), int(p.cp[0])
    options: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    if p.recompute != "full":
        options.append(("recompute: full", {}, {"recompute": "full"}))
    for z in range(int(p.zero[0]) + 1, 4):
        options.append((f"zero: {z}", {"zero": z}, {}))
    for f in (2, 4, 8, 16):
        if tp * f <= hw.gpus_per_node and s.heads % (tp * f) == 0:
            options.append((f"tp: {tp * f}", {"tp": tp * f}, {}))
        if pp * f <= s.layers:
            options.append((f"pp: {pp * f}", {"pp": pp * f}, {}))
    out = []
    ep, vp = int(p.ep[0]), int(p.vp[0])
    for label, arrays, flags in options:
        new_tp, new_pp = arrays.get("tp", tp), arrays.get("pp", pp)
        if hw.gpus % (new_tp * new_pp * cp):
            continue
        dp = hw.gpus // (new_tp * new_pp * cp)
        mb = int(p.micro_batch[0])
        # the scenario's own rules: batch, expert groups, interleaved chunks
        if (
            int(p.global_batch[0]) % (dp * mb)
            or (dp * cp) % ep
            or (vp > 1 and new_pp * vp > s.layers)
        ):
            continue
        # the plan as the user would write it; with TP, sequence parallelism is worth naming
        # when the plan has it off and only fits with it
        sps = [bool(p.sp[0])] + ([True] if new_tp > 1 and not p.sp[0] else [])
        one = {"tp": new_tp, "pp": new_pp, "dp": dp, "zero": arrays.get("zero", p.zero[0])}
        for sp in sps:
            q = replace(
                p,
                **{k: np.full(1, float(v)) for k, v in one.items()},
                sp=np.array([sp]),
                recompute=flags.get("recompute", p.recompute),
            )
            mem = memory(s, q, hw)
            if mem.fits[0]:
                with_sp = ", sequence_parallel: true" if sp and not p.sp[0] else ""
                out.append(f"{label}{with_sp} ({mem.total[0] / 1e9:.0f} GB)")
                break
    return out[:4]


def _expected(
    s: Shape, sc: Scenario, cat: Catalog, hw: Hardware, ideal_days: float
) -> tuple[ExpectedRun | None, str | None]:
    """The training run with its checkpoints and interruptions, or why it never finishes."""
    try:
        run = expected_run(
            ideal_days * HOURS_PER_DAY,
            hw.gpus,
            checkpoint_bytes(s),
            load_reliability(),
            cat.fabric(hw.fabric).family,
            sc.organization.network_maturity,
        )
    except WorkloadError as exc:
        return None, str(exc)
    return run, None


def _training(s: Shape, sc: Scenario, hw: Hardware, backend: NetworkBackend) -> TrainingFigures:
    p = plans_from_scenario(sc)
    mem = memory(s, p, hw)  # before the step: a plan that does not fit needs no simulation
    if not mem.fits[0]:
        alt = _alternatives(s, p, hw)
        hint = f"; fits with {', or '.join(alt)}" if alt else "; no nearby plan fits: use more GPUs"
        raise WorkloadError(
            f"workload.parallel: the plan needs {describe(mem)} but {hw.gpu.id} offers "
            f"{mem.capacity / 1e9:.0f} GB usable{hint}"
        )
    st = training_step(s, p, hw, backend=backend, plan_memory=mem)
    w = sc.workload
    assert w is not None and w.tokens is not None
    t = float(st.time[0])
    tokens_per_s = float(st.tokens[0]) / t
    gpus = hw.gpus
    peak = hw.gpu.bf16_dense_tflops * 1e12
    train_s = w.tokens / tokens_per_s
    return TrainingFigures(
        step_time_s=t,
        tokens_per_s=tokens_per_s,
        tflops_per_gpu=float(st.model_flops[0]) / t / gpus / 1e12,
        hw_tflops_per_gpu=float(st.hw_flops[0]) / t / gpus / 1e12,
        mfu=float(st.model_flops[0]) / t / gpus / peak,
        comm_exposed_fraction=float(st.comm_exposed[0]) / t,
        time_to_train_days=train_s / SECONDS_PER_DAY,
        gpu_hours=train_s * gpus / 3600.0,
        memory_per_gpu_GB=float(mem.total[0]) / 1e9,
        breakdown={**st.breakdown(), "dp_comm_total_s": float(st.dp_comm_total[0])},
    )


def _inference(s: Shape, sc: Scenario, hw: Hardware, backend: NetworkBackend) -> ServingFigures:
    w = sc.workload
    assert w is not None
    p, sv = w.parallel, w.serving
    r = serve(
        s,
        hw,
        tp=p.tp,
        pp=p.pp,
        prompt=sv.prompt_tokens,
        output=sv.output_tokens,
        batch=sv.concurrency,
        disaggregated=sv.disaggregated,
        precision=w.precision,
        backend=backend,
    )
    cap = usable_bytes(hw.gpu)  # same headroom as training
    need = r.weights_per_gpu + r.kv_per_gpu
    if need > cap:
        raise WorkloadError(
            f"workload.parallel: one replica (tp {p.tp} x pp {p.pp}) needs "
            f"{need / 1e9:.0f} GB per GPU (weights {r.weights_per_gpu / 1e9:.0f}, KV cache "
            f"{r.kv_per_gpu / 1e9:.0f}) but {hw.gpu.id} has {cap / 1e9:.0f} GB usable; raise tp "
            f"or pp, serve in fp8 or lower serving.concurrency"
        )
    rates = serving_rates(
        r,
        replicas=hw.gpus // (p.tp * p.pp),
        streams=sv.concurrency,
        prompt=sv.prompt_tokens,
        output=sv.output_tokens,
    )
    tokens_per_s = rates.output_tokens_per_s_total
    flops = weight_flops_per_token(s) * tokens_per_s
    return ServingFigures(
        step_time_s=r.itl,
        ttft_s=r.ttft,
        itl_s=r.itl,
        tokens_per_s=tokens_per_s,  # output tokens, all replicas (= output_tokens_per_s_total)
        rates=rates,
        tflops_per_gpu=flops / hw.gpus / 1e12,
        mfu=flops / hw.gpus / (hw.gpu.bf16_dense_tflops * 1e12),
        comm_exposed_fraction=(r.parts["tp_comm_s"] + r.parts["pp_comm_s"]) / r.itl,
        network_fraction=r.network_fraction,
        memory_per_gpu_GB=need / 1e9,
        breakdown=r.parts,
    )


def evaluate_scenario(
    sc: Scenario,
    cat: Catalog,
    fabrics: list[str] | None = None,
    *,
    backend: NetworkBackend = DEFAULT_BACKEND,
    tick: Callable[[str], None] | None = None,
    adjust: Callable[[Hardware], Hardware] | None = None,
    adjust_key: Hashable | None = None,
) -> list[FabricResult]:
    """Step time (training) or latency and throughput (inference) on each fabric, the network's
    congestion priced by ``backend``; ``tick`` is called with each fabric's id once it is done
    (for a progress bar); ``adjust`` changes each fabric's hardware first (a variant of it),
    ``adjust_key`` names that variant (equal for equal variants).

    Without ``tick``, a result is kept for later calls with the same inputs (an adjusted one
    only when named): see :mod:`fabricplan.workload.memo`."""
    w = sc.workload
    if w is None:
        raise WorkloadError("workload: the scenario has no workload; add one to compute a step")
    fabrics = list(fabrics or sc.cluster.fabrics)
    check_dispatch_fabrics(sc, cat, fabrics)
    key = None
    if tick is None and (adjust is None or adjust_key is not None):
        key = MEMO.key(sc, cat, fabrics, backend, adjust_key)
        found = MEMO.get(key)
        if found is not None:
            return found
    out = _evaluate(sc, cat, fabrics, backend, tick, adjust)
    if key is not None:
        MEMO.put(key, out, keep=cat)  # the key holds the catalog's id
    return out


def check_dispatch_fabrics(sc: Scenario, cat: Catalog, fabrics: list[str]) -> None:
    """A hierarchical expert dispatcher on a fabric without RDMA (asked for by id, past the
    scenario's own checks) is the scenario's error, as the checks word it."""
    w = sc.workload
    if w is None or w.kind != "training" or w.parallel.ep_dispatch != "hierarchical":
        return
    why = no_rdma_dispatch(cat, fabrics)
    if why:
        raise WorkloadError(f"workload.parallel.ep_dispatch: {why}")


def _evaluate(
    sc: Scenario,
    cat: Catalog,
    fabrics: list[str],
    backend: NetworkBackend,
    tick: Callable[[str], None] | None,
    adjust: Callable[[Hardware], Hardware] | None,
) -> list[FabricResult]:
    w = sc.workload
    assert w is not None
    s = shape_of(cat.model(w.model))
    out = []
    for fab in fabrics:
        hw = hardware_from_scenario(sc, cat, fab)
        if adjust is not None:
            hw = adjust(hw)
        validation = validation_of(sc, cat, fab)
        if w.kind == "training":
            figures = _training(s, sc, hw, backend)
            expected, note = _expected(s, sc, cat, hw, figures.time_to_train_days)
            out.append(FabricResult(fab, figures, expected, note, validation))
        else:
            out.append(FabricResult(fab, _inference(s, sc, hw, backend), validation=validation))
        if tick is not None:
            tick(fab)
    return out
