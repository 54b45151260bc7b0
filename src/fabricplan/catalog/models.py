"""Typed, frozen records for the catalog's sourced facts.

Every numeric field names its unit (``_gbps``, ``_GBps``, ``_us``, ``_ns``, ``_w``, ``_gb``...).
Every entry carries ``source`` and ``as_of``; prices are :class:`Price` objects that must say
whether they are assumptions and on what basis.
"""

from __future__ import annotations

import re
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

AS_OF_PATTERN = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")
# An entry id: lower-case letters, digits, dots and dashes, starting with a letter or digit.
ID_PATTERN = r"^[a-z0-9][a-z0-9.\-]*$"

FabricFamily = Literal["infiniband", "roce", "tcp", "uec", "srd"]
LinkLayer = Literal["infiniband", "ethernet"]
FlowControl = Literal["credit", "pfc", "none"]
Routing = Literal["adaptive", "ecmp", "flowlet", "packet-spray", "static"]
# NCCL's collective algorithms and protocols, as NCCL_ALGO and NCCL_PROTO name them
NcclAlgorithm = Literal[
    "tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat"
]
NcclProtocol = Literal["LL", "LL128", "Simple"]
# NCCL's MAXCHANNELS (src/include/device.h, 64 since NCCL 2.12): the most channels a
# communicator can run
NCCL_MAX_CHANNELS = 64

# PCIe usable bandwidth per direction per lane, GB/s, after line encoding
# (PCI-SIG base specs: Gen3 8 GT/s and Gen4 16 GT/s and Gen5 32 GT/s use 128b/130b;
# Gen6 64 GT/s uses PAM4 + FLIT, ~242/256 efficiency).
PCIE_LANE_GBPS: dict[int, float] = {
    3: 8.0 * 128 / 130 / 8,
    4: 16.0 * 128 / 130 / 8,
    5: 32.0 * 128 / 130 / 8,
    6: 64.0 * 242 / 256 / 8,
}


def checked_date(value: str) -> str:
    if not AS_OF_PATTERN.match(value):
        raise ValueError(f"as_of must be YYYY, YYYY-MM or YYYY-MM-DD, got {value!r}")
    return value


class _Frozen(BaseModel):
    # TOML writes inf and nan; no catalog quantity is either
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class Range(_Frozen):
    """A quantity that sources disagree on: keep the spread and who said what."""

    low: float = Field(ge=0)
    high: float = Field(ge=0)
    typical: float | None = Field(default=None, ge=0)
    sources: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _ordered(self) -> Range:
        if self.low > self.high:
            raise ValueError(f"low ({self.low}) must not exceed high ({self.high})")
        if self.typical is not None and not self.low <= self.typical <= self.high:
            raise ValueError(f"typical ({self.typical}) must lie in [{self.low}, {self.high}]")
        return self

    @property
    def nominal(self) -> float:
        """The value used when a single number is needed: ``typical``, else the midpoint."""
        return self.typical if self.typical is not None else (self.low + self.high) / 2


PriceChannel = Literal["vendor-list", "reseller", "compatible", "analyst"]
# quoted: public prices are cited in ``quotes``; assumption: a figure with a stated basis but
# no cited listing; no-public-price: nothing public exists to cite (a quote is the only way).
PriceStatus = Literal["quoted", "assumption", "no-public-price"]
# The range a price without one is given: the catalog's long-standing +/- 50 % for single parts.
DEFAULT_PRICE_SPREAD = 0.5


class Quote(_Frozen):
    """One public price for a part, through one channel, as of a date."""

    usd: float = Field(gt=0)
    channel: PriceChannel
    source: str = Field(min_length=3)
    as_of: str

    @field_validator("as_of")
    @classmethod
    def _date(cls, value: str) -> str:
        return checked_date(value)


class Price(_Frozen):
    """A price in US dollars: the nominal figure the model uses, its range, whether anything
    public backs it (``status``, with the ``quotes`` when it is), and ``basis`` for the rest."""

    usd: float = Field(ge=0)
    assumption: bool
    basis: str = Field(min_length=3)
    low: float | None = Field(default=None, ge=0)
    high: float | None = Field(default=None, ge=0)
    status: PriceStatus = "assumption"
    quotes: tuple[Quote, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> Price:
        low, high = self.band
        if not low <= self.usd <= high:
            raise ValueError(f"usd ({self.usd:g}) must lie in [low, high] = [{low:g}, {high:g}]")
        if self.status == "quoted" and not self.quotes:
            raise ValueError("a quoted price needs its quotes")
        if self.status == "no-public-price" and self.quotes:
            raise ValueError("a price with quotes is not 'no-public-price'")
        return self

    @property
    def band(self) -> tuple[float, float]:
        """(low, high): as given, else the nominal +/- ``DEFAULT_PRICE_SPREAD``."""
        low = self.usd * (1 - DEFAULT_PRICE_SPREAD) if self.low is None else self.low
        high = self.usd * (1 + DEFAULT_PRICE_SPREAD) if self.high is None else self.high
        return low, high

    @property
    def public(self) -> bool:
        return self.status != "no-public-price"


class Entry(_Frozen):
    """Common fields of every catalog record."""

    KIND: ClassVar[str] = "entry"

    id: str = Field(pattern=ID_PATTERN)
    name: str
    source: str = Field(min_length=3)
    as_of: str
    notes: str = ""

    @field_validator("as_of")
    @classmethod
    def _date(cls, value: str) -> str:
        return checked_date(value)


class Fabric(Entry):
    """A scale-out network technology at one speed, as a GPU cluster uses it."""

    KIND: ClassVar[str] = "fabric"

    family: FabricFamily
    status: Literal["shipping", "future"] = "shipping"
    transport: Literal["rdma", "tcp"]
    line_rate_gbps: float = Field(gt=0)
    nic_goodput_GBps: Range
    rdma_latency_us: Range
    switch_latency_ns: Range
    flow_control: FlowControl
    congestion_control: tuple[str, ...] = Field(min_length=1)
    routing: tuple[Routing, ...] = Field(min_length=1)
    default_routing: Routing
    lossless: bool
    mtu_bytes: int = Field(gt=0)
    gpudirect_rdma: bool
    default_nic: str
    default_switch: str
    # The NCCL network plugin that drives this fabric and what it does (None: NCCL's own IB
    # verbs or socket transport).
    net_plugin: str | None = None
    # The per-step latency the plugin reports to NCCL (ncclNetProperties_t.latency, us): NCCL's
    # tuner adds it to every network step when it picks an algorithm and protocol. It is what
    # the plugin tells NCCL, not a measurement; NCCL's own IB and socket transports report 0.
    plugin_latency_us: float = Field(default=0.0, ge=0)
    # Rented only, as a cloud's node types (the providers catalog lists them with their NICs):
    # nothing of it is sold to build a cluster with
    rented_only: bool = False
    # What the plugin lets NCCL run, as deployments of it set it (NCCL_ALGO, NCCL_PROTO,
    # NCCL_MIN/MAX_NCHANNELS), with its source; None: NCCL's own choice.
    nccl_algorithms: tuple[NcclAlgorithm, ...] | None = Field(default=None, min_length=1)
    nccl_protocols: tuple[NcclProtocol, ...] | None = Field(default=None, min_length=1)
    nccl_channels: int | None = Field(default=None, ge=1, le=NCCL_MAX_CHANNELS)
    nccl_settings_source: str | None = None
    # What the plugin's data path costs beyond the wire: time added to every network step
    # (us), and the throughput of one NCCL channel (GB/s). None: nothing (NCCL's IB verbs).
    plugin_step_us: Range | None = None
    channel_goodput_GBps: Range | None = None
    # Flowlet routing (switch dynamic load balancing): the gap after which a flow's next packet
    # may take another port, and the chance it does when a port with a shorter queue exists.
    # Defaults: the default DLB policy of Juniper Apstra for its Broadcom-based AI fabrics
    # (inactivity interval 256 us; a flow whose port is no longer the best is moved).
    flowlet_timeout_us: float = Field(default=256.0, gt=0)
    flowlet_move_share: float = Field(default=1.0, gt=0, le=1)

    @model_validator(mode="after")
    def _consistent(self) -> Fabric:
        if self.default_routing not in self.routing:
            raise ValueError(f"default_routing {self.default_routing!r} not in routing")
        if self.nic_goodput_GBps.high > self.line_rate_gbps / 8:
            raise ValueError("nic_goodput_GBps.high exceeds the line rate")
        # every transfer divides by the goodput and every message pays the latencies: a zero
        # would make the models divide by zero or call a network free
        for name in ("nic_goodput_GBps", "rdma_latency_us", "switch_latency_ns"):
            if getattr(self, name).low <= 0:
                raise ValueError(
                    f"{name}.low must be greater than 0, got {getattr(self, name).low}"
                )
        settings = (self.nccl_algorithms, self.nccl_protocols, self.nccl_channels)
        if any(x is not None for x in settings) and not self.nccl_settings_source:
            raise ValueError(
                "nccl_algorithms, nccl_protocols and nccl_channels need nccl_settings_source"
            )
        if self.channel_goodput_GBps is not None and self.channel_goodput_GBps.low <= 0:
            raise ValueError("channel_goodput_GBps.low must be greater than 0")
        if (self.flow_control in ("credit", "pfc")) != self.lossless:
            raise ValueError("lossless must be true exactly when flow control is credit or pfc")
        return self

    @property
    def line_rate_GBps(self) -> float:
        return self.line_rate_gbps / 8

    @property
    def link_layer(self) -> LinkLayer:
        return "infiniband" if self.family == "infiniband" else "ethernet"


class Switch(Entry):
    KIND: ClassVar[str] = "switch"

    vendor: str
    link_layer: LinkLayer
    asic: str
    ports: int = Field(gt=0, description="radix at port_speed_gbps")
    port_speed_gbps: float = Field(gt=0)
    max_ports: int = Field(gt=0, description="most logical ports with breakout cables")
    port_to_port_latency_ns: Range
    buffer_mb: float | None = Field(default=None, ge=0, description="None: not published")
    power_typical_w: float = Field(gt=0)
    power_max_w: float = Field(gt=0)
    rack_units: int = Field(gt=0)
    form_factor: Literal["fixed", "chassis"]
    cage: str = Field(min_length=2, description="port cage form factor, e.g. OSFP, QSFP56")
    ports_per_cage: int = Field(
        default=1, gt=0, description="ports at port_speed_gbps per cage (twin-port OSFP: 2)"
    )
    price: Price

    @model_validator(mode="after")
    def _ports(self) -> Switch:
        if self.port_to_port_latency_ns.low <= 0:
            raise ValueError("port_to_port_latency_ns.low must be greater than 0")
        if self.max_ports < self.ports:
            raise ValueError(f"max_ports ({self.max_ports}) below ports ({self.ports})")
        if self.power_max_w < self.power_typical_w:
            raise ValueError("power_max_w below power_typical_w")
        return self

    @property
    def cage_gbps(self) -> float:
        """What one cage carries: no module faster than this fits it."""
        return self.port_speed_gbps * self.ports_per_cage

    @property
    def capacity_tbps(self) -> float:
        """Unidirectional switching capacity."""
        return self.ports * self.port_speed_gbps / 1000

    def radix_at(self, speed_gbps: float) -> int:
        """Ports available at ``speed_gbps`` (breaking faster ports out, up to ``max_ports``)."""
        if speed_gbps > self.port_speed_gbps:
            return 0
        return min(self.max_ports, int(self.capacity_tbps * 1000 // speed_gbps))


class Nic(Entry):
    KIND: ClassVar[str] = "nic"

    vendor: str
    link_layers: tuple[LinkLayer, ...] = Field(min_length=1)
    ports: int = Field(gt=0)
    port_speed_gbps: float = Field(gt=0)
    pcie_gen: int = Field(ge=3, le=6)
    pcie_lanes: int = Field(gt=0)
    cage: str = Field(min_length=2, description="port cage form factor, e.g. OSFP, QSFP112")
    power_w: float = Field(gt=0)
    price: Price

    @property
    def pcie_GBps(self) -> float:
        """Usable host-interface bandwidth per direction."""
        return PCIE_LANE_GBPS[self.pcie_gen] * self.pcie_lanes

    def pcie_GBps_in(self, host_pcie_gen: int) -> float:
        """Bandwidth per direction in a host whose slots run at ``host_pcie_gen``: a link
        trains at the older of the two generations."""
        return PCIE_LANE_GBPS[min(self.pcie_gen, host_pcie_gen)] * self.pcie_lanes

    def goodput_GBps(self, fabric_goodput_GBps: float, host_pcie_gen: int) -> float:
        """What this NIC delivers on a fabric: the fabric's goodput, capped by the NIC's own
        ports and by its PCIe link in the host (e.g. a 400G NIC on PCIe Gen4 x16)."""
        ports = self.port_speed_gbps / 8 * self.ports
        return min(fabric_goodput_GBps, ports, self.pcie_GBps_in(host_pcie_gen))


class _Media(Entry):
    link_layers: tuple[LinkLayer, ...] = Field(min_length=1)
    form_factor: str
    speed_gbps: float = Field(gt=0)
    max_length_m: float = Field(gt=0)
    power_w: float = Field(ge=0, description="per module for optics; per cable (both ends) else")
    oem: bool
    price: Price
    fiber_mode: Literal["multimode", "singlemode"] | None = Field(
        default=None, description="optics and fibre only: which fibre they run on"
    )


class Cable(_Media):
    KIND: ClassVar[str] = "cable"

    medium: Literal["dac", "acc", "aoc", "fiber"]
    ends: Literal["switch-switch", "switch-host", "any"] = Field(
        default="any", description="what the cable is made to join"
    )
    breakout: int = Field(default=1, gt=0, description="links one cable carries (twin-port: 2)")

    @property
    def link_speed_gbps(self) -> float:
        return self.speed_gbps / self.breakout


class Transceiver(_Media):
    KIND: ClassVar[str] = "transceiver"

    reach: str
    ports: int = Field(default=1, gt=0, description="logical ports per module (twin-port OSFP: 2)")

    @property
    def link_speed_gbps(self) -> float:
        return self.speed_gbps / self.ports


class ReferenceNode(_Frozen):
    name: str
    gpus_per_node: int = Field(gt=0)
    nics_per_node: int = Field(gt=0, description="compute-fabric NICs (storage NICs excluded)")
    nic_speed_gbps: float = Field(gt=0)
    nic: str
    pcie_gen: int = Field(ge=3, le=6)


class Gpu(Entry):
    KIND: ClassVar[str] = "gpu"

    vendor: str
    arch: Literal["ampere", "hopper", "blackwell", "cdna3"]
    nvls: bool = Field(description="NVSwitch with in-switch reduction (NVLink SHARP)")
    bf16_dense_tflops: float = Field(gt=0)
    fp8_dense_tflops: float | None = Field(default=None, gt=0)
    memory_gb: float = Field(gt=0)
    hbm_TBps: float = Field(gt=0)
    scaleup: Literal["nvlink", "xgmi"]
    scaleup_bidir_GBps: float = Field(gt=0, description="per GPU, both directions summed")
    tdp_w: float = Field(gt=0)
    sm_count: int = Field(
        gt=0, description="streaming multiprocessors (NVIDIA) or compute units (AMD)"
    )
    node: ReferenceNode
    # Sustained, not burst: a training step keeps the tensor cores busy for hours at the power
    # limit, where the clock sits well below the boost clock a short benchmark burst runs at.
    matmul_efficiency: float = Field(
        gt=0,
        le=1,
        description="sustained dense BF16 matmul throughput / peak: power-saturated, random "
        "inputs (MSMF)",
    )
    fp8_matmul_efficiency: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="the same for FP8 / FP8 peak, where measured (else matmul_efficiency)",
    )
    hbm_efficiency: float = Field(gt=0, le=1, description="achievable / peak HBM bandwidth")
    efficiency_source: str = Field(min_length=1)

    @property
    def scaleup_unidir_GBps(self) -> float:
        return self.scaleup_bidir_GBps / 2


# The kinds of hardware entry; with the models of fabricplan.catalog.transformer, the catalog's.
HARDWARE_KINDS: dict[str, type[Entry]] = {
    cls.KIND: cls for cls in (Fabric, Switch, Nic, Cable, Transceiver, Gpu)
}
