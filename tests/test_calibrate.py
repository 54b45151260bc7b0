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


def test_a_plugin_limited_fabric_fits_its_channel_goodput():
    """TCPX at 8 channels (the log sets them) made with 5.5 GB/s a channel and the catalog's
    step time: the channels, not the NICs, bound the bandwidth, so the fit returns what one
    channel carries and writes it to channel_goodput_GBps, the NIC's goodput untouched."""
    base = CAT.fabric("tcpx-200g")
    s = build_system("h100", 2, "tcpx-200g", nics_per_node=4, catalog=CAT)
    env = {"NCCL_MIN_NCHANNELS": "8", "NCCL_MAX_NCHANNELS": "8"}
    truth = s.with_(min_ctas=8, max_ctas=8, channel_GBps=5.5)
    t = sweep(SystemArrays.of([truth]), "all_reduce", np.array(SIZES, float)).time_us[0]
    fit = calibrate([(_run(t, env), s, "all_reduce")], base, new_id="tcpx-fit", source="synthetic")
    assert fit.bandwidth == "channel" and fit.nic_identified
    assert fit.nic_GBps == pytest.approx(5.5, rel=0.01)
    assert fit.fabric.channel_goodput_GBps.typical == pytest.approx(5.5, abs=0.01)
    assert fit.fabric.nic_goodput_GBps == base.nic_goodput_GBps
    # the step time it keeps is the plugin's, not written into the wire latency
    assert fit.fabric.plugin_step_us == base.plugin_step_us
    assert fit.rms_log_error_after < 0.01 < fit.rms_log_error_before
