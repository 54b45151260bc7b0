"""calibrate on synthetic runs made by the model itself: a known latency shift must come back."""

from __future__ import annotations

import numpy as np
import pytest

from fabricplan.catalog import default_catalog
from fabricplan.collectives import SystemArrays, build_system, sweep
from fabricplan.nccltests.calibrate import calibrate
from fabricplan.nccltests.parse import Result, Run

CAT = default_catalog()
SIZES = [2**k for k in range(3, 17)] + [2**k for k in range(26, 31)]  # 8 B-64 KiB, 64M-1G


def _run(times_us: np.ndarray, env: dict[str, str] | None = None) -> Run:
    results = [
        Result(
            size_bytes=s,
            count=s // 4,
            dtype="float",
            redop="sum",
            root=None,
            time_us=float(t),
            algbw_GBps=s / t / 1e3,
            busbw_GBps=s / t / 1e3,
            wrong=0,
        )
        for s, t in zip(SIZES, times_us, strict=True)
    ]
    return Run(op="all_reduce", env=env or {}, results=results)


def test_a_latency_shift_is_recovered_across_hop_counts():
    """Runs through 1 and 3 switch hops, made with the fabric's latency 3 us higher than the
    catalog's: the fit must find +3 us for both at once, which one latency for all runs could
    not (their step latencies differ by the extra hops)."""
    shift = 3.0
    base = CAT.fabric("roce-400g")
    runs, made = [], []
    for nodes in (2, 512):
        s = build_system("h100", nodes, "roce-400g", catalog=CAT)
        truth = s.with_(net_step_delta_us=s.net_step_delta_us + shift)
        t = sweep(SystemArrays.of([truth]), "all_reduce", np.array(SIZES, float)).time_us[0]
        runs.append((_run(t), s, "all_reduce"))
        made.append(s)
    assert made[0].switch_hops != made[1].switch_hops
    fit = calibrate(runs, base, new_id="roce-shifted", source="synthetic")
    assert fit.latency_identified
    assert fit.step_delta_us - made[0].net_step_delta_us == pytest.approx(shift, abs=0.1)
    assert fit.fabric.rdma_latency_us.typical == pytest.approx(
        base.rdma_latency_us.nominal + shift, abs=0.1
    )
    assert fit.rms_log_error_after < 0.01 < fit.rms_log_error_before


def test_the_fit_predicts_under_the_logs_channel_limits():
    """A run whose log caps NVLS channels (NCCL_MIN_CTAS) is fitted under that cap, as grade
    compares it: made by the model with the cap, it fits before anything moves."""
    s = build_system("h100", 2, "ib-ndr", catalog=CAT)
    env = {"NCCL_MIN_CTAS": "24"}
    capped = s.with_(min_ctas=24)
    t = sweep(SystemArrays.of([capped]), "all_reduce", np.array(SIZES, float)).time_us[0]
    fit = calibrate(
        [(_run(t, env), s, "all_reduce")], CAT.fabric("ib-ndr"), new_id="x", source="synthetic"
    )
    assert fit.rms_log_error_before < 1e-9
