"""What the collective model needs to know about a cluster, derived from the catalog.

Fabrics differ here through measured properties only: per-NIC goodput (bounded by the NIC's
PCIe link) and the extra latency of each network step compared with InfiniBand NDR, the fabric
NCCL's own latency constants were measured on. NCCL has a hook for exactly this: the network
plugin reports a per-step latency (``latencyInter``) that the tuner adds to its constants when
it picks an algorithm. What a plugin reports and what a step takes differ (aws-ofi-nccl reports
75 us on p5; AWS's own cost model of the same network has 20 us), so the two are kept apart:
NCCL's choice reads the reported figure, the predicted time the physical one.

Some plugins also restrict what NCCL may run, and cost more than the wire: Google's
GPUDirect-TCPX runs Ring and Simple only, over the channels its deployment sets, each channel
limited by the plugin's per-channel data path. The catalog states those per fabric
(``nccl_algorithms``, ``nccl_protocols``, ``nccl_channels``, ``plugin_step_us``,
``channel_goodput_GBps``) and they arrive here as the system's masks and limits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from fabricplan.catalog import Catalog, Fabric, default_catalog
from fabricplan.catalog.providers import node_nics
from fabricplan.collectives.nccl_constants import (
    ARCH_INDEX,
    INTRA_SPEEDS_GBPS,
    MAX_CTAS,
    NVLS_CHANNELS,
    SCALEUP_EFFICIENCY,
    nic_through_channels,
    runtime_channels,
)
from fabricplan.topology.hops import job_hops

# NCCL's tuning constants were measured on InfiniBand clusters (NVIDIA DGX / SuperPOD).
REFERENCE_FABRIC = "ib-ndr"


@dataclass(frozen=True)
class CommSystem:
    """One communicator's hardware: ``nodes`` x ``gpus_per_node`` GPUs on one fabric."""

    gpu: str
    arch: str
    nvls: bool
    nodes: int
    gpus_per_node: int
    nics_per_node: int
    fabric: str
    family: str  # infiniband, roce, tcp, uec
    transport: str
    nic_GBps: float  # achievable per NIC: fabric goodput, NIC port, PCIe link
    nvlink_GBps: float  # usable per-GPU scale-up bandwidth, one direction
    nvls_channel_GBps: float  # per-channel speed of an NVLS graph
    net_step_delta_us: float  # added to each network step vs the reference fabric
    p2p_latency_us: float  # one-way small-message RDMA latency across the fabric
    switch_hops: int
    sharp: bool = False  # in-network reduction (CollNet), InfiniBand only
    # What NCCL's tuner adds to each network step when it picks an algorithm: the latency the
    # network plugin reports (0 for NCCL's own IB and socket transports). The time is then
    # the physical one, net_step_delta_us.
    tuner_step_delta_us: float = 0.0
    min_ctas: int = 1  # NCCL_MIN_CTAS (NCCL's default 1)
    max_ctas: int = MAX_CTAS  # NCCL_MAX_CTAS
    # What the network plugin lets NCCL run (None: every algorithm / protocol), and the
    # throughput of one channel through the plugin's data path (inf: no limit but the NIC's)
    algorithms: tuple[str, ...] | None = None
    protocols: tuple[str, ...] | None = None
    channel_GBps: float = math.inf
    rented_only: bool = False  # the fabric comes only as a cloud's node types
    # the node's NIC ports where NCCL drives them as fewer devices, one per GPU (aws-ofi-nccl's
    # rails on p5: 32 ports, 8 devices of 4); None: one device per port
    nic_ports: int | None = None

    @property
    def ports_per_node(self) -> int:
        """The node's scale-out NIC ports (``nics_per_node`` counts NCCL's devices)."""
        return self.nic_ports or self.nics_per_node

    @property
    def nvls_channels(self) -> int:
        """NVLS runs its default channel count clamped to [min_ctas, max_ctas] (nvls.cc)."""
        default = int(NVLS_CHANNELS[ARCH_INDEX[self.arch]])
        return max(self.min_ctas, min(self.max_ctas, default))

    @property
    def ring_channels(self) -> int:
        """The ring's channels at run time: one per NIC across nodes (one per GPU inside a
        node), doubled (RUNTIME_CHANNEL_FACTOR), within [min_ctas, max_ctas]."""
        found = self.nics_per_node if self.nodes > 1 else self.gpus_per_node
        return int(runtime_channels(max(found, 1), self.min_ctas, self.max_ctas))

    @property
    def nic_net_GBps(self) -> float:
        """What one NIC carries for NCCL: its goodput, or its channels' sum where the network
        plugin limits each channel (``channel_GBps``)."""
        return float(
            nic_through_channels(
                self.nic_GBps, self.ring_channels, self.nics_per_node, self.channel_GBps
            )
        )

    @property
    def nranks(self) -> int:
        return self.nodes * self.gpus_per_node

    def with_(self, **changes: object) -> CommSystem:
        return replace(self, **changes)  # type: ignore[arg-type]


def p2p_latency_us(fabric: Fabric, hops: int, switch_latency_ns: float) -> float:
    """ib_write_lat-style latency: the catalog figure is through one switch; add the others."""
    return fabric.rdma_latency_us.nominal + max(hops - 1, 0) * switch_latency_ns / 1000


def build_system(
    gpu: str,
    nodes: int,
    fabric: str,
    *,
    gpus_per_node: int | None = None,
    nics_per_node: int | None = None,
    hops: int | None = None,
    sharp: bool = False,
    switch: str | None = None,
    design: str = "rail-optimized",
    oversubscription: float = 1.0,
    catalog: Catalog | None = None,
) -> CommSystem:
    """Describe a cluster for the collective model from catalog ids and counts; ``design`` and
    ``oversubscription`` (of the leaves) set the switch hops between the job's nodes."""
    cat = catalog or default_catalog()
    g = cat.gpu(gpu)
    f = cat.fabric(fabric)
    k = gpus_per_node or g.node.gpus_per_node
    m = nics_per_node or node_nics(cat, gpu, fabric)
    nic = cat.nic(f.default_nic)
    sw = cat.switch(switch or f.default_switch)
    radix = sw.radix_at(f.line_rate_gbps) or sw.ports
    if hops is None:
        h = job_hops(nodes, m, k, radix, f.line_rate_gbps, design, oversubscription)
    else:
        h = hops
    sw_ns = sw.port_to_port_latency_ns.nominal

    nic_bw = nic.goodput_GBps(f.nic_goodput_GBps.nominal, g.node.pcie_gen)
    ports = m
    if m > k:
        # More ports than GPUs: NCCL drives one device per GPU that stripes over the ports
        # behind the GPU's PCIe switch (aws-ofi-nccl's rails on p5: 32 ports, 8 devices of 4;
        # NCCL merges the ports of a multi-port NIC the same way, NCCL_IB_MERGE_NICS).
        nic_bw *= m / k
        m = k

    eff = SCALEUP_EFFICIENCY[g.arch]
    nvlink = g.scaleup_unidir_GBps * eff
    speeds = INTRA_SPEEDS_GBPS[g.arch]
    # the search takes the highest per-channel speed whose k channels fit the GPU's NVLink
    nvls_ch = next((s for s in speeds if s * k <= nvlink), speeds[-1])

    # channels the deployment sets (NCCL_MIN/MAX_NCHANNELS = NCCL_MIN/MAX_CTAS), else NCCL's own
    ctas = (
        {}
        if f.nccl_channels is None
        else {"min_ctas": f.nccl_channels, "max_ctas": f.nccl_channels}
    )
    ref = cat.fabric(REFERENCE_FABRIC)
    ref_sw = cat.switch(ref.default_switch).port_to_port_latency_ns.nominal
    own = p2p_latency_us(f, h, sw_ns)
    ref_lat = p2p_latency_us(ref, h, ref_sw)
    return CommSystem(
        gpu=g.id,
        arch=g.arch,
        nvls=g.nvls,
        nodes=nodes,
        gpus_per_node=k,
        nics_per_node=m,
        fabric=f.id,
        family=f.family,
        transport=f.transport,
        nic_GBps=nic_bw,
        nvlink_GBps=nvlink,
        nvls_channel_GBps=nvls_ch,
        # the plugin's own data path adds to every network step, beyond the wire
        net_step_delta_us=own - ref_lat + (f.plugin_step_us.nominal if f.plugin_step_us else 0.0),
        p2p_latency_us=own,
        switch_hops=h,
        sharp=sharp and f.family == "infiniband",
        tuner_step_delta_us=f.plugin_latency_us,
        algorithms=f.nccl_algorithms,
        protocols=f.nccl_protocols,
        channel_GBps=f.channel_goodput_GBps.nominal if f.channel_goodput_GBps else math.inf,
        rented_only=f.rented_only,
        nic_ports=ports if ports != m else None,
        **ctas,
    )
