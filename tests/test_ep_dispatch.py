"""Hierarchical expert all-to-alls (ep_dispatch): one copy of a token per destination node."""

from __future__ import annotations

import json
from dataclasses import replace
from math import comb

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabricplan.catalog import default_catalog
from fabricplan.congestion.network_backend import NO_CONGESTION
from fabricplan.workload import Hardware, Plans, training_step
from fabricplan.workload.comm import nccl_sm_share
from fabricplan.workload.ep_dispatch import (
    FLEX_DISPATCHER_SMS,
    _nodes_per_token,
    network_copy_share,
    nodes_per_token,
)
from fabricplan.workload.shapes import shape_of
from test_cli import run

CAT = default_catalog()
DSV3 = shape_of(CAT.model("deepseek-v3"))
MIXTRAL = shape_of(CAT.model("mixtral-8x7b"))


def test_without_groups_a_node_is_missed_as_hypergeometry_says():
    # Mixtral: 8 experts, top-2; over 2 nodes each holds 4, and a token misses one node with
    # probability C(4, 2) / C(8, 2) = 6 / 28
    assert nodes_per_token(MIXTRAL, [2])[0] == pytest.approx(2 * (1 - 6 / 28))
    # one expert a node: every copy goes to a node of its own
    assert nodes_per_token(MIXTRAL, [8])[0] == pytest.approx(2.0)
    assert network_copy_share(MIXTRAL, [8])[0] == pytest.approx(1.0)


def test_deepseek_v3_reaches_at_most_four_nodes():
    # 8 groups of 32 experts, a token uses 4 of them; over 8 nodes (a group a node) a node is
    # missed when its group is not picked (1/2), or picked and none of the 8 experts drawn from
    # the 128 of the 4 groups is among its 32
    miss = 0.5 + 0.5 * comb(96, 8) / comb(128, 8)
    assert nodes_per_token(DSV3, [8])[0] == pytest.approx(8 * (1 - miss))
    assert 3.5 < nodes_per_token(DSV3, [8])[0] < 4.0
    # two groups a node over 4 nodes; a group over 2 nodes over 16: never more than 8 nodes
    # (top-8), and never more nodes than the 4 groups allow where groups hold whole nodes
    assert nodes_per_token(DSV3, [4])[0] < 4.0
    assert nodes_per_token(DSV3, [16])[0] < 8.0
    np.testing.assert_array_equal(nodes_per_token(DSV3, [1, 1]), [1.0, 1.0])


@given(
    experts_log=st.integers(1, 9),
    top_k=st.integers(1, 16),
    groups_log=st.integers(0, 4),
    used=st.integers(1, 16),
    nodes_log=st.integers(0, 8),
)
def test_a_token_reaches_no_more_nodes_than_copies_or_nodes(
    experts_log, top_k, groups_log, used, nodes_log
):
    experts, groups, nodes = 2**experts_log, 2**groups_log, 2**nodes_log
    if groups > experts or used > groups or top_k > used * experts // groups or nodes > experts:
        return
    n = _nodes_per_token(experts, top_k, groups, used, nodes)
    assert 1.0 - 1e-9 <= n <= min(top_k, nodes) + 1e-9
    if nodes > 1:  # more nodes never gather a token's experts on fewer of them
        assert _nodes_per_token(experts, top_k, groups, used, nodes // 2) <= n + 1e-9


def _plans(**kw):
    return Plans.of(tp=2, pp=1, dp=128, ep=8, global_batch=1024, seq_len=4096, **kw)


def test_one_copy_a_node_cuts_the_network_bytes_and_nothing_else():
    hw = Hardware(gpu=CAT.gpu("h100"), gpus=256, gpus_per_node=8, nics_per_node=8, fabric="ib-ndr")
    p = _plans()
    per_copy = training_step(MIXTRAL, p, hw, backend=NO_CONGESTION)
    by_node = training_step(
        MIXTRAL, replace(p, ep_dispatch="hierarchical"), hw, backend=NO_CONGESTION
    )
    # EP 8 at TP 2 spans 2 nodes: a token reaches 1.57 of them, not its 2 copies
    assert by_node.ep_comm_total[0] < per_copy.ep_comm_total[0]
    assert by_node.time[0] < per_copy.time[0]
    assert by_node.compute[0] == per_copy.compute[0] and by_node.dp_comm[0] == per_copy.dp_comm[0]
    # inside one node NVLink carries every copy either way
    p1 = Plans.of(tp=1, pp=1, dp=256, ep=8, global_batch=1024, seq_len=4096)
    same = [
        training_step(MIXTRAL, replace(p1, ep_dispatch=d), hw, backend=NO_CONGESTION).time[0]
        for d in ("alltoall", "hierarchical")
    ]
    assert same[0] == same[1]


def test_a_dense_model_is_unchanged_bit_for_bit():
    s = shape_of(CAT.model("llama3-8b"))
    hw = Hardware(gpu=CAT.gpu("h100"), gpus=64, gpus_per_node=8, nics_per_node=8, fabric="ib-ndr")
    p = Plans.of(tp=1, pp=1, dp=64, global_batch=256, seq_len=8192)
    off = training_step(s, p, hw, backend=NO_CONGESTION)
    on = training_step(s, replace(p, ep_dispatch="hierarchical"), hw, backend=NO_CONGESTION)
    assert on.time[0] == off.time[0] and on.breakdown() == off.breakdown()


def test_step_takes_the_dispatch_from_the_scenario():
    args = ("step", "examples/256-gpu-moe.yaml", "--json")
    copies = {r["fabric"]: r for r in json.loads(run(*args).stdout)}
    nodes = run(*args, "--set", "workload.parallel.ep_dispatch=hierarchical")
    assert nodes.returncode == 0, nodes.stderr
    by_node = {r["fabric"]: r for r in json.loads(nodes.stdout)}
    for fabric in ("ib-ndr", "roce-400g"):
        a, b = copies[fabric]["breakdown"], by_node[fabric]["breakdown"]
        assert b["ep_comm_s"] < a["ep_comm_s"]
        assert b["compute_s"] == a["compute_s"]


def test_the_dispatch_asks_for_expert_parallelism():
    out = run(
        "step",
        "examples/256-gpu-moe.yaml",
        "--set",
        "workload.parallel.ep_dispatch=hierarchical",
        "--set",
        "workload.parallel.ep=1",
    )
    assert out.returncode == 2
    assert "workload.parallel.ep_dispatch" in out.stderr and "needs ep > 1" in out.stderr
    assert "Traceback" not in out.stderr
    bad = run("step", "examples/256-gpu-moe.yaml", "--set", "workload.parallel.ep_dispatch=nvl")
    assert bad.returncode == 2 and "ep_dispatch" in bad.stderr and "Traceback" not in bad.stderr


def test_a_hierarchical_dispatcher_beside_compute_holds_its_own_sms():
    # EP 8 inside one node: the same bytes either way, so the same all-to-alls hide; beside the
    # compute NCCL holds a block per channel, DeepEP its 20 SMs
    hw = Hardware(gpu=CAT.gpu("h100"), gpus=256, gpus_per_node=8, nics_per_node=8, fabric="ib-ndr")
    p = Plans.of(tp=1, pp=1, dp=256, ep=8, global_batch=2048, seq_len=4096, ep_comm_overlap=True)
    nccl = training_step(MIXTRAL, p, hw, backend=NO_CONGESTION)
    flex = training_step(MIXTRAL, replace(p, ep_dispatch="hierarchical"), hw, backend=NO_CONGESTION)
    assert flex.ep_comm_total[0] == nccl.ep_comm_total[0] and flex.ep_comm[0] == nccl.ep_comm[0]
    hidden = nccl.ep_comm_total[0] - nccl.ep_comm[0]
    assert hidden > 0
    extra = flex.overlap_slowdown[0] - nccl.overlap_slowdown[0]
    channels = nccl_sm_share(hw, 8, 1) * hw.gpu.sm_count
    want = (FLEX_DISPATCHER_SMS - channels) / hw.gpu.sm_count * hidden
    assert extra == pytest.approx(want, rel=1e-9)
    assert flex.time[0] - nccl.time[0] == pytest.approx(extra, rel=1e-9)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"groups": 3}, "groups (3) must divide experts (256)"),
        ({"groups": 8, "group_top_k": 9}, "group_top_k (9) exceeds groups (8)"),
        ({"groups": 64, "group_top_k": 1}, "top_k (8) exceeds the experts of 1 groups"),
    ],
)
def test_routing_groups_are_checked(extra, message):
    from pydantic import ValidationError

    from fabricplan.catalog.transformer import Moe

    base = {"experts": 256, "top_k": 8, "expert_ffn_hidden": 2048}
    assert Moe.model_validate(base).routing_groups == 1
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Moe.model_validate({**base, **extra})


@pytest.mark.parametrize(
    "args",
    [
        ("step", "--set", "cluster.fabric=tcp-100g"),  # the scenario's own checks
        ("step", "--fabric", "tcp-100g"),  # asked for past them
        ("plan", "--fabric", "efa-gen4-400g"),
    ],
)
def test_the_dispatch_asks_for_an_rdma_fabric(args):
    cmd, *rest = args
    out = run(
        cmd,
        "examples/256-gpu-moe.yaml",
        "--set",
        "workload.parallel.ep_dispatch=hierarchical",
        *rest,
    )
    assert out.returncode == 2, out.stdout
    assert "workload.parallel.ep_dispatch" in out.stderr
    assert "needs an InfiniBand or RoCE fabric" in out.stderr
    assert "Traceback" not in out.stderr


def test_the_plan_search_tries_one_copy_a_node_only_where_it_can_differ():
    from fabricplan.planning import SearchSpace, batches, job_of, search_scenario
    from fabricplan.scenario import load_scenario

    sc = load_scenario("examples/256-gpu-moe.yaml", catalog=CAT)
    job = job_of(sc, CAT)
    tried = 0
    for flags, plans in batches(job, SearchSpace()):
        assert plans.ep_dispatch == flags.ep_dispatch
        if flags.ep_dispatch == "hierarchical":
            # EP groups over more than one node: inside one the bytes are the same
            assert ((plans.ep > 1) & (plans.ep * plans.tp * plans.cp > 8)).all()
            tried += len(plans)
    assert tried > 0
    # on a fabric without RDMA the search leaves it out; on InfiniBand the best plan takes it
    ib, tcp = search_scenario(sc, CAT, ["ib-ndr", "tcp-100g"], backend=NO_CONGESTION)
    assert ib.result.best is not None and tcp.result.best is not None
    assert ib.result.best.ep_dispatch == "hierarchical"
    assert tcp.result.best.ep_dispatch == "alltoall"
    assert all(a.plan.ep_dispatch == "alltoall" for a in tcp.result.alternatives)


def test_auto_takes_one_copy_a_node_where_the_fabric_has_rdma():
    args = ("step", "examples/256-gpu-moe.yaml", "--json", "--fabric", "ib-ndr")
    by_fabric = {}
    for dispatch in ("alltoall", "hierarchical", "auto"):
        out = run(
            *args, "--fabric", "tcp-100g", "--set", f"workload.parallel.ep_dispatch={dispatch}"
        )
        if dispatch == "hierarchical":  # TCP cannot run it: refused by name
            assert out.returncode == 2 and "tcp-100g (tcp)" in out.stdout  # --json: on stdout
            out = run(*args, "--set", f"workload.parallel.ep_dispatch={dispatch}")
        assert out.returncode == 0, out.stderr
        by_fabric[dispatch] = {r["fabric"]: r["step_time_s"] for r in json.loads(out.stdout)}
    auto = by_fabric["auto"]
    assert auto["ib-ndr"] == by_fabric["hierarchical"]["ib-ndr"] < by_fabric["alltoall"]["ib-ndr"]
    assert auto["tcp-100g"] == by_fabric["alltoall"]["tcp-100g"]
