"""The network backends the workload layer is handed (congestion.network_backend): what each
answers, when the closed form refuses, and the one cache of answers."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fabricplan.catalog import default_catalog
from fabricplan.congestion import backends as collective_backends
from fabricplan.congestion.network_backend import (
    BACKEND_NAMES,
    DEFAULT_BACKEND,
    NO_CONGESTION,
    ClosedFormBackend,
    FlowBackend,
    NetworkSpec,
    NotCovered,
    backend,
    network_factor,
)
from fabricplan.congestion.settings import FlowSettings

CAT = default_catalog()


def test_the_backends_by_name():
    assert BACKEND_NAMES == ("none", "closed-form", "flow")
    assert [backend(n).name for n in BACKEND_NAMES] == list(BACKEND_NAMES)
    assert backend("flow") == DEFAULT_BACKEND == FlowBackend()
    assert backend("none") == NO_CONGESTION
    with pytest.raises(ValueError, match="known: none, closed-form, flow"):
        backend("packet")


@pytest.mark.parametrize(
    ("pattern", "change", "expect"),
    [
        ("pipeline", {}, "not pipeline"),
        ("alltoall", {}, "not alltoall"),
        ("ring-allreduce", {"design": "dragonfly"}, "not dragonfly"),
        ("ring-allreduce", {"placement": "fragmented"}, "not fragmented"),
        ("ring-allreduce", {"fabric": "ib-ndr"}, "not ib-ndr's adaptive routing"),
        ("tree-allreduce", {"routing": "spray"}, "not roce-400g's spray routing"),
    ],
)
def test_closed_form_names_what_its_law_does_not_cover(pattern, change, expect):
    net = replace(NetworkSpec("h100", "roce-400g", 8, 8, design="fat-tree"), **change)
    with pytest.raises(NotCovered) as err:
        ClosedFormBackend().factor(net, pattern, 4)
    assert expect in err.value.reason and err.value.instead == "flow"


def test_closed_form_prices_infiniband_under_hashed_routing():
    net = NetworkSpec("h100", "ib-ndr", 8, 8, design="fat-tree", routing="ecmp")
    assert ClosedFormBackend().factor(net, "ring-allreduce", 64) > 1.2


def test_the_cache_keys_on_the_backend_and_the_network(monkeypatch):
    """Equal backends and equal networks share one simulated run; another backend, backend
    setting or network setting gets its own. The network's routing and flow-control settings
    reach the simulated case."""
    runs = []
    real = collective_backends.run_case

    def counted(case, catalog=None):
        runs.append(case)
        return real(case, catalog)

    monkeypatch.setattr(collective_backends, "run_case", counted)
    network_factor.cache_clear()
    net = NetworkSpec("h100", "roce-400g", 8, 8, design="fat-tree", catalog=CAT)
    first = network_factor(FlowBackend(), net, "ring-allreduce", 8)
    same = replace(net)
    assert same is not net and network_factor(FlowBackend(), same, "ring-allreduce", 8) == first
    assert len(runs) == 1
    network_factor(FlowBackend(seeds=3), net, "ring-allreduce", 8)
    assert len(runs) == 2 and runs[1].seeds == 3
    network_factor(ClosedFormBackend(), net, "ring-allreduce", 8)
    network_factor(NO_CONGESTION, net, "ring-allreduce", 8)
    assert len(runs) == 2 and network_factor.cache_info().currsize == 4
    tuned = replace(net, flow=FlowSettings(ecn_kmin_kb=100.0), routing="adaptive")
    network_factor(FlowBackend(), tuned, "ring-allreduce", 8)
    assert len(runs) == 3
    assert (runs[2].routing, runs[2].flow) == ("adaptive", FlowSettings(ecn_kmin_kb=100.0))
    assert (runs[0].routing, runs[0].flow) == (None, FlowSettings())
