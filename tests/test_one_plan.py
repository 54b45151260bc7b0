"""One plan per call (a planner asking about one plan after another) gives what the same plan
gets inside a large batch: the one-plan path's arithmetic on NumPy scalars (workload.vec), its
kept prices of single collectives, the small-batch path's kept tables (collectives.model.tables'
cache by communicator), its pricing of the ops the model prices alike in one call and its
cheaper small-array steps change no result."""

from __future__ import annotations

import dataclasses
import pickle
from functools import cache

import numpy as np
import pytest

from conftest import EXAMPLES
from fabricplan.catalog import default_catalog
from fabricplan.collectives import build_system
from fabricplan.collectives.model import (
    PRICED_ALIKE,
    TABLE_CACHE_MAX_ROWS,
    SystemArrays,
    _tables,
    tables,
    times,
)
from fabricplan.congestion.network_backend import backend
from fabricplan.scenario import load_scenario
from fabricplan.scenario.yaml_io import parse_yaml
from fabricplan.workload import Hardware, Plans, comm, shape_of, training_step
from fabricplan.workload.plan import hardware_from_scenario, plans_from_scenario

CAT = default_catalog()
# relative agreement asked of a plan alone and the same plan in a batch
REL = 1e-12
FLAGS = {
    "recompute": ["none", "selective", "full"],
    "flash": [True, False],
    "overlap_dp": [True, False],
    "precision": ["bf16", "fp8", "fp16"],
    "grad_accum_fusion": [True, False],
    "grad_reduce_bf16": [True, False],
    "tp_comm_overlap": [True, False],
    "cp_comm": ["p2p", "all_gather"],
    "ep_comm_overlap": [True, False],
    "ep_dispatch": ["alltoall", "hierarchical"],
}


def _random_plans(rng: np.random.Generator, n: int, gpus: int, flags: dict) -> Plans:
    tp = rng.choice([1, 2, 4, 8], n)
    pp = rng.choice([1, 2, 4, 8], n)
    cp = rng.choice([1, 1, 2, 4], n)
    cp = np.where(tp * pp * cp > gpus, 1, cp)
    pp = np.where(tp * pp * cp > gpus, 1, pp)
    dp = gpus // (tp * pp * cp)
    ep = np.array(
        [
            rng.choice([e for e in (1, 2, 4, 8) if d * c % e == 0])
            for d, c in zip(dp, cp, strict=True)
        ]
    )
    mb = rng.choice([1, 2, 4], n)
    return Plans.of(
        tp=tp,
        pp=pp,
        dp=dp,
        cp=cp,
        ep=ep,
        vp=rng.choice([1, 1, 2], n),
        zero=rng.integers(0, 4, n),
        micro_batch=mb,
        global_batch=dp * mb * rng.choice([4, 16, 64], n),
        seq_len=rng.choice([2048, 4096, 8192, 32768], n),
        sp=(tp > 1) & (rng.random(n) < 0.8),
        **flags,
    )


def _arrays(step) -> dict[str, np.ndarray]:
    out = {f.name: getattr(step, f.name) for f in dataclasses.fields(step) if f.name != "memory"}
    for f in dataclasses.fields(step.memory):
        out[f"memory.{f.name}"] = np.broadcast_to(getattr(step.memory, f.name), step.time.shape)
    return out


def _alone_as_in_the_batch(s, plans: Plans, hw: Hardware, net) -> None:
    batch = _arrays(training_step(s, plans, hw, backend=net))
    for i in range(len(plans)):
        alone = _arrays(training_step(s, plans.take(i), hw, backend=net))
        for name, got in alone.items():
            np.testing.assert_allclose(
                got, batch[name][i : i + 1], rtol=REL, atol=0.0, err_msg=f"plan {i}: {name}"
            )


@cache
def _hardware() -> list[tuple[Hardware, str]]:
    return [
        (
            Hardware(
                gpu=CAT.gpu("h100"),
                gpus=64,
                gpus_per_node=8,
                nics_per_node=8,
                fabric="roce-400g",
                roce_quality="default",
            ),
            "flow",
        ),
        (
            Hardware(
                gpu=CAT.gpu("a100"), gpus=128, gpus_per_node=8, nics_per_node=4, fabric="ib-hdr"
            ),
            "none",
        ),
    ]


@pytest.mark.parametrize("which", range(2))
@pytest.mark.parametrize("model", ["llama3-70b", "mixtral-8x7b"])
def test_a_plan_alone_gets_what_it_gets_in_a_batch(which, model):
    """A few hundred random plans, each alone and all in a batch large enough to take the
    batch paths (tables computed for all rows, equal collectives priced once, each op in its
    own call)."""
    hw, net = _hardware()[which]
    s = shape_of(CAT.model(model))
    rng = np.random.default_rng(2026 + which)
    for _ in range(2):
        flags = {k: v[rng.integers(len(v))] for k, v in FLAGS.items()}
        flags = {k: v.item() if isinstance(v, np.generic) else v for k, v in flags.items()}
        plans = _random_plans(rng, 40, hw.gpus, flags)
        # the same plans repeated: more than the batch paths' thresholds
        most = max(comm.DISTINCT_MIN_ROWS, comm.ALIKE_MAX_PLANS)
        big = Plans.stack([plans] * (most // len(plans) + 1))
        batch = _arrays(training_step(s, big, hw, backend=backend(net)))
        for i in range(len(plans)):
            alone = _arrays(training_step(s, plans.take(i), hw, backend=backend(net)))
            for name, got in alone.items():
                np.testing.assert_allclose(
                    got, batch[name][i : i + 1], rtol=REL, atol=0.0, err_msg=f"{i}: {name}"
                )


# the examples that train (serving has no plan batch)
TRAINING_EXAMPLES = [
    p
    for p in EXAMPLES
    if (parse_yaml(p.read_text()).get("workload") or {}).get("kind") == "training"
]


@pytest.mark.parametrize("path", TRAINING_EXAMPLES, ids=lambda p: p.stem)
def test_an_example_s_plan_alone_gets_what_it_gets_among_others(path):
    sc = load_scenario(path, catalog=CAT)
    assert sc.workload is not None and sc.workload.kind == "training"
    one = plans_from_scenario(sc)
    hw = hardware_from_scenario(sc, CAT, sc.cluster.fabrics[0])
    s = shape_of(CAT.model(sc.workload.model))
    # the example's plan first, then plans like it with other micro-batches and ZeRO stages
    others = [
        dataclasses.replace(one, micro_batch=one.micro_batch * m, zero=np.full(1, float(z)))
        for m in (1, 2)
        for z in range(4)
    ]
    _alone_as_in_the_batch(s, Plans.stack([one, *others]), hw, backend("flow"))


def test_kept_tables_are_the_tables():
    """Tables read from the cache by communicator are those computed for all rows at once,
    and cannot be written into."""
    systems = [
        build_system(gpu, nodes, fabric, gpus_per_node=k, nics_per_node=m)
        for gpu, fabric in (("h100", "roce-400g"), ("a100", "ib-hdr"), ("b200", "ib-xdr"))
        for nodes in (1, 2, 3, 16)
        for k, m in ((8, 8), (8, 4), (1, 1), (4, 2))
        if nodes * k > 1
    ]
    sa = SystemArrays.of(systems)
    assert len(sa) > TABLE_CACHE_MAX_ROWS
    for op in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"):
        for delta, tuner in ((None, False), (sa.tuner_delta, True)):
            whole = _tables(sa, op, sa.delta if delta is None else delta, tuner)
            for start in range(0, len(sa), 5):
                rows = np.arange(start, min(start + 5, len(sa)))
                part = sa.take(rows)
                kept = tables(part, op, None if delta is None else delta[rows], tuner)
                for a, b in zip(kept, whole, strict=True):
                    assert np.array_equal(a, b[rows])
        single = tables(sa.take(np.array([0])), "all_reduce")
        with pytest.raises(ValueError):
            single[0][0, 0, 0] = 1.0


def test_the_ops_priced_alike_are_priced_alike():
    sa = SystemArrays.of(
        [build_system("h100", n, "roce-400g") for n in (1, 2, 4, 32)]
        + [build_system("a100", n, "ib-hdr", gpus_per_node=1, nics_per_node=1) for n in (2, 8)]
    )
    sizes = np.logspace(3, 10, 15)
    for op, like in PRICED_ALIKE.items():
        assert np.array_equal(times(sa, op, sizes), times(sa, like, sizes))
        for a, b in zip(tables(sa, op), tables(sa, like), strict=True):
            assert np.array_equal(a, b)


def test_a_plan_asked_again_gets_the_same_from_the_kept_prices():
    """One plan's collectives are kept by hardware and backend: asked again, on other
    hardware or with another backend, each gets what it gets priced afresh."""
    hw, _ = _hardware()[0]
    ib = dataclasses.replace(hw, fabric="ib-ndr")
    s = shape_of(CAT.model("llama3-70b"))
    plan = Plans.of(
        tp=np.array([8]),
        pp=np.array([2]),
        dp=np.array([4]),
        zero=np.array([1]),
        micro_batch=np.array([1]),
        global_batch=np.array([64]),
        seq_len=np.array([8192]),
        sp=np.array([True]),
    )
    cases = [(hw, "flow"), (ib, "flow"), (hw, "none")]
    comm.forget_one_plan_prices()
    fresh = []
    for h, net in cases:
        fresh.append(_arrays(training_step(s, plan, h, backend=backend(net))))
        comm.forget_one_plan_prices()
    # the data-parallel traffic crosses nodes: the fabric shows
    assert fresh[0]["dp_comm"][0] != fresh[1]["dp_comm"][0]
    for _ in range(2):  # the second round answered from the kept prices
        for (h, net), want in zip(cases, fresh, strict=True):
            got = _arrays(training_step(s, plan, h, backend=backend(net)))
            for name, value in got.items():
                assert np.array_equal(value, want[name]), name
    assert len(comm._one_memo) == len(cases)


def test_hardware_hashes_once_and_not_across_processes():
    """The hash kept on a Hardware is its fields' hash, and a pickled copy (a worker in
    another process) does not carry it."""
    hw, _ = _hardware()[1]
    assert hash(hw) == hash(tuple(getattr(hw, f.name) for f in dataclasses.fields(hw)))
    copy = pickle.loads(pickle.dumps(hw))
    assert "_hash" not in vars(copy)
    assert copy == hw and hash(copy) == hash(hw)
    other = dataclasses.replace(hw, gpus=256)
    assert other != hw and "_hash" not in vars(other)
