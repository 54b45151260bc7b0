"""Tensor-parallel communication behind GEMMs (userbuffers): analytic cases and the step."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabricplan.catalog import default_catalog
from fabricplan.congestion.network_backend import NO_CONGESTION
from fabricplan.workload import Hardware, Plans, shape_of, training_step
from fabricplan.workload.tp_overlap import UB_SPLITS, bulk, pipelined, ring_exchange

CAT = default_catalog()
times = st.floats(min_value=0.0, max_value=10.0, allow_nan=False)


def test_ring_exchange_hides_the_gather_behind_all_but_the_local_chunk():
    # tp = 2: one transfer, behind the local half of the GEMM
    assert ring_exchange(1.0, 1.0, 2) == pytest.approx(0.5)
    assert ring_exchange(1.0, 2.0, 2) == pytest.approx(0.0)
    # tp = 8: 7 transfers of 1/7 each, each behind a 1/8 GEMM chunk
    assert ring_exchange(1.0, 0.8, 8) == pytest.approx(7 * (1 / 7 - 0.1))
    assert ring_exchange(2.0, 0.0, 8) == pytest.approx(2.0)


def test_pipelined_reduce_scatter_leaves_the_last_piece_exposed():
    assert pipelined(1.0, 10.0, 0.0) == pytest.approx(1 / UB_SPLITS)
    assert pipelined(1.0, 0.0, 0.0) == pytest.approx(1.0)
    # 16 of 132 SMs taken while three quarters of the comm run beside the GEMM: the GEMM loses
    # that share of each of those 0.75 s
    share = 16 / 132
    assert pipelined(1.0, 10.0, share) == pytest.approx(0.25 + 0.75 * share)


def test_bulk_shows_only_what_outlasts_the_gemm():
    assert bulk(1.0, 3.0, 0.0) == 0.0
    assert bulk(3.0, 1.0, 0.0) == pytest.approx(2.0)


@given(times, times, st.integers(min_value=2, max_value=8))
def test_overlap_never_costs_more_than_the_collective_alone_without_sm_tax(c, g, tp):
    for exposed in (ring_exchange(c, g, tp), pipelined(c, g, 0.0), bulk(c, g, 0.0)):
        assert 0.0 <= float(exposed) <= c + 1e-12


def _step(overlap: bool, sp: bool = True, tp: int = 8):
    s = shape_of(CAT.model("llama3-70b"))
    hw = Hardware(gpu=CAT.gpu("h100"), gpus=512, gpus_per_node=8, nics_per_node=8, fabric="ib-ndr")
    p = Plans.of(
        tp=tp,
        pp=4,
        dp=512 // (tp * 4),
        global_batch=1024,
        seq_len=8192,
        sp=sp,
        recompute="selective",
        tp_comm_overlap=overlap,
    )
    return training_step(s, p, hw, backend=NO_CONGESTION)


def test_overlap_hides_most_tensor_parallel_time_and_nothing_else():
    off, on = _step(False), _step(True)
    assert 0 < on.tp_comm[0] < 0.5 * off.tp_comm[0]
    assert on.compute[0] == off.compute[0]
    # the gradient reduction hid behind the compute stream's TP waits too: with those hidden
    # in the GEMMs it has less to hide behind, never more
    assert on.dp_comm[0] >= off.dp_comm[0]
    assert on.time[0] < off.time[0]


def test_overlap_needs_sequence_parallelism_and_tp_in_the_node():
    assert _step(True, sp=False).time[0] == _step(False, sp=False).time[0]
    assert _step(True, tp=16).tp_comm[0] == _step(False, tp=16).tp_comm[0]
    # per plan in a vectorised call: only the plans that qualify change
    s = shape_of(CAT.model("llama3-70b"))
    hw = Hardware(gpu=CAT.gpu("h100"), gpus=512, gpus_per_node=8, nics_per_node=8, fabric="ib-ndr")
    tp = np.array([8, 16])
    both = [
        training_step(
            s,
            Plans.of(
                tp=tp, pp=4, dp=512 // (tp * 4), global_batch=1024, seq_len=8192, tp_comm_overlap=o
            ),
            hw,
            backend=NO_CONGESTION,
        )
        for o in (False, True)
    ]
    assert both[1].tp_comm[0] < both[0].tp_comm[0]
    assert both[1].tp_comm[1] == both[0].tp_comm[1]
