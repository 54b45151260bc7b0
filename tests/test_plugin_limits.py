"""What a fabric's network plugin lets NCCL run: algorithms, protocols, channels, and each
channel's throughput and per-step time (catalog ``nccl_*``, ``plugin_step_us``,
``channel_goodput_GBps``), as GPUDirect-TCPX deploys them."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import ValidationError

from fabricplan.catalog import Fabric, default_catalog
from fabricplan.collectives import SystemArrays, build_system, predict
from fabricplan.collectives.model import tables
from fabricplan.nccltests.compare import env_system
from fabricplan.workload.comm import nccl_sm_share
from fabricplan.workload.plan import Hardware

GiB = 2**30


def _tcpx(**changes: object):
    return build_system("h100", 2, "tcpx-200g", nics_per_node=4).with_(**changes)


def test_tcpx_runs_ring_and_simple_only_at_every_size():
    table = predict(_tcpx(), "all_reduce", [8, 2**20, 2**24, 2**28, 4 * GiB])
    assert {(r.algorithm, r.protocol) for r in table.rows} == {("Ring", "Simple")}
    # InfiniBand on the same node picks others across the sweep
    ib = predict(build_system("h100", 2, "ib-ndr"), "all_reduce", [8, 2**20, 4 * GiB])
    assert {r.algorithm for r in ib.rows} != {"Ring"}


def test_an_explicit_selection_replaces_the_fabrics_own():
    table = predict(_tcpx(), "all_reduce", [2**20], algorithms=["tree"], protocols=["LL128"])
    assert (table.rows[0].algorithm, table.rows[0].protocol) == ("Tree", "LL128")


def test_channels_times_channel_rate_bound_each_nic():
    """12 channels over 4 NICs at 6.25 GB/s a channel: 18.75 GB/s a NIC (under its 23 GB/s
    goodput); the 2-node ring's busbw plateau is the node's NICs together, 75 GB/s."""
    s = _tcpx()
    assert s.ring_channels == 12 and s.nic_GBps == pytest.approx(23.0)
    assert s.nic_net_GBps == pytest.approx(18.75)
    busbw = predict(s, "all_reduce", [64 * GiB]).rows[0].busbw_GBps
    assert busbw == pytest.approx(75.0, rel=0.01)
    # eight channels (the plugin's own script): 12.5 GB/s a NIC, 50 GB/s
    eight = env_system({"NCCL_MIN_NCHANNELS": "8", "NCCL_MAX_NCHANNELS": "8"}, s)
    assert eight.ring_channels == 8 and eight.nic_net_GBps == pytest.approx(12.5)
    assert predict(eight, "all_gather", [64 * GiB]).rows[0].busbw_GBps == pytest.approx(
        50.0, rel=0.01
    )
    # enough channels and the NIC's goodput binds again
    many = env_system({"NCCL_MIN_CTAS": "32", "NCCL_MAX_CTAS": "32"}, s)
    assert many.nic_net_GBps == pytest.approx(23.0)


def test_no_channel_limit_leaves_the_tables_alone():
    s = build_system("h100", 4, "roce-400g")
    assert math.isinf(s.channel_GBps) and s.nic_net_GBps == s.nic_GBps
    capped = SystemArrays.of([s.with_(channel_GBps=s.nic_GBps / 2)])
    lat0, bw0, _ = tables(SystemArrays.of([s]), "all_reduce")
    lat1, bw1, _ = tables(capped, "all_reduce")
    # 16 channels over 8 NICs at half a NIC each: exactly the NIC, nothing changes
    assert np.array_equal(bw0, bw1) and np.array_equal(lat0, lat1)


def test_the_plugins_step_time_adds_to_every_network_step():
    """Ring/Simple all_reduce over 2 nodes: the ring's critical path crosses the network 4
    times (2 nNodes), each paying the step twice (Simple adds the network latency again for
    the flush); NCCL's own estimate counts 2 crossings."""
    s = _tcpx()
    step = default_catalog().fabric("tcpx-200g").plugin_step_us.nominal
    without = s.with_(net_step_delta_us=s.net_step_delta_us - step)
    t = predict(s, "all_reduce", [8]).rows[0].time_us
    t0 = predict(without, "all_reduce", [8]).rows[0].time_us
    assert t - t0 == pytest.approx(4 * 2 * step, rel=1e-9)
    sa = SystemArrays.of([s])
    ring_simple = [
        tables(sa, "all_reduce", sa.delta - d, tuner=True)[0][0, 1, 2] for d in (0, step)
    ]
    assert ring_simple[0] - ring_simple[1] == pytest.approx(2 * 2 * step, rel=1e-9)


def test_a_single_send_gets_a_peers_channels():
    """sendrecv over TCPX: 2 channels a remote peer (NCCL_NCHANNELS_PER_NET_PEER) at 6.25."""
    s = _tcpx()
    row = predict(s, "sendrecv", [16 * GiB]).rows[0]
    assert row.algbw_GBps == pytest.approx(12.5, rel=0.01)


def test_the_workload_counts_the_fabrics_channels_on_the_sms():
    cat = default_catalog()
    h100 = cat.gpu("h100")
    hw = Hardware(gpu=h100, gpus=16, gpus_per_node=8, nics_per_node=4, fabric="tcpx-200g")
    # a data-parallel group across the 2 nodes: 12 channels, not the 2 x NICs of InfiniBand
    share = nccl_sm_share(hw, np.array([2.0]), np.array([8.0]))
    assert share[0] == pytest.approx(12 / h100.sm_count)


def test_settings_need_a_source_and_known_names():
    base = default_catalog().fabric("tcpx-200g").model_dump()
    with pytest.raises(ValidationError, match="nccl_settings_source"):
        Fabric.model_validate({**base, "nccl_settings_source": None})
    with pytest.raises(ValidationError, match="nccl_algorithms"):
        Fabric.model_validate({**base, "nccl_algorithms": ["rings"]})
    with pytest.raises(ValidationError, match="nccl_channels"):
        Fabric.model_validate({**base, "nccl_channels": 65})


def test_tcpxo_runs_its_profiles_protocols():
    """A3 Mega's environment profile allows Simple and LL128, not LL: a small all_reduce pays
    LL128's latency, above what LL would give on the same system."""
    s = build_system("h100", 2, "tcpxo-200g")
    small = predict(s, "all_reduce", [8]).rows[0]
    assert small.protocol == "LL128"
    with_ll = predict(s, "all_reduce", [8], protocols=["LL", "LL128", "Simple"]).rows[0]
    assert with_ll.protocol == "LL" and with_ll.time_us < small.time_us


def test_the_catalogs_names_are_nccls():
    """The catalog spells algorithms and protocols as the collective model indexes them (the
    catalog cannot import the model: it is the layer below)."""
    from typing import get_args

    from fabricplan.catalog.models import NcclAlgorithm, NcclProtocol
    from fabricplan.collectives import nccl_constants as K

    assert get_args(NcclAlgorithm) == K.ALGORITHMS
    assert get_args(NcclProtocol) == K.PROTOCOLS
