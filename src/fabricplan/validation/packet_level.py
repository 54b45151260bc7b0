"""The congestion layer against a packet-level simulator's recorded runs.

Each case is a flow list on the reference simulator's own fabric (a fat-tree of 16-port,
400 Gb/s switches, one NIC per host, lossless with PFC and no end-to-end congestion control),
run here through the same router, flow control and max-min solver as every other congestion
case, with the bytes the reference's senders put on the wire (its RoCE sender sends whole
packets only). The figures compared are each seed's flow-completion-time percentiles (p50,
p99, max over its flows), as a median over seeds in both tools; ECMP results move from seed
to seed, so neither side is one run. The simulator's figures are data (``data/packet-level``), with
its commit, command lines and settings; no code of it is in this project.
"""

from __future__ import annotations

import csv
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources

import numpy as np

from fabricplan.catalog import Catalog, load_catalog
from fabricplan.congestion import kernels
from fabricplan.congestion.case import Case
from fabricplan.congestion.flowfile import FlowList
from fabricplan.congestion.settings import FlowSettings
from fabricplan.congestion.simulate import run_case

# the case sets, kept in their own module and read through this one
from fabricplan.validation.packet_cases import CASES as CASES
from fabricplan.validation.packet_cases import HELD_BACK as HELD_BACK
from fabricplan.validation.packet_cases import ROUTINGS as ROUTINGS
from fabricplan.validation.packet_cases import RefCase as RefCase
from fabricplan.validation.packet_developed import DEVELOPED as DEVELOPED

DATA = resources.files("fabricplan.validation") / "data" / "packet-level"
TOLERANCE = 0.10  # the target: p50, p99 and max within 10 % on every case
METRICS = ("p50", "p99", "max")


@dataclass(frozen=True)
class Setting:
    """The reference run's fabric and flow control, as this project states them."""

    fabric: str
    switch: str
    gpu: str
    packet_bytes: float
    queue_packets: float
    pfc_xoff_packets: float
    pfc_xon_packets: float
    seeds: int
    # the simulators whose senders send every packet full, the last one too (htsim_roce's
    # RoceSrc::send_packet sends whole -mtu packets; htsim_eqds's last packet is partial): a
    # flow there carries its bytes rounded up to whole packets
    whole_packet_simulators: tuple[str, ...]

    def flow(self) -> FlowSettings:
        kb = self.packet_bytes / 1024
        return FlowSettings(
            pfc_xoff_kb=self.pfc_xoff_packets * kb,
            pfc_xon_kb=self.pfc_xon_packets * kb,
            buffer_kb=self.queue_packets * kb,
            congestion_control="none",
        )


@cache
def meta() -> dict:
    return tomllib.loads((DATA / "reference.toml").read_text())


@cache
def reference_catalog() -> Catalog:
    with resources.as_file(DATA / "reference_fabric.toml") as path:
        return load_catalog([path])


def setting() -> Setting:
    s = meta()["setting"]
    given = {k: s[k] for k in Setting.__dataclass_fields__}
    given["whole_packet_simulators"] = tuple(given["whole_packet_simulators"])
    return Setting(**given)


def whole_packets(flows: FlowList, packet_bytes: float) -> FlowList:
    """The flows as a sender that sends only whole packets puts them on the wire."""
    size = np.ceil(flows.size_bytes / packet_bytes) * packet_bytes
    return FlowList(flows.src, flows.dst, size, flows.start_us, flows.name)


def _rows(name: str) -> list[dict[str, str]]:
    return list(csv.DictReader((DATA / name).read_text().splitlines()))


@cache
def _runs() -> list[dict[str, str]]:
    """Every recorded run: the suite's, the cases developed on, the held-back ones."""
    return _rows("htsim_runs.csv") + _rows("htsim_developed.csv") + _rows("htsim_held_back.csv")


@cache
def simulator_of() -> dict[tuple[str, str], str]:
    """Per (case, routing): the simulator binary that ran it."""
    return {(r["case"], r["routing"]): r["simulator"] for r in _runs()}


@cache
def measured() -> dict[tuple[str, str], dict[str, float]]:
    """Per (case, routing): the median over the simulator's seeds of each metric, its seeds
    and the wall time of one run on its own (s)."""
    rows = _runs()
    out: dict[tuple[str, str], dict[str, float]] = {}
    for key in {(r["case"], r["routing"]) for r in rows}:
        mine = [r for r in rows if (r["case"], r["routing"]) == key]
        out[key] = {m: float(np.median([float(r[f"fct_{m}_us"]) for r in mine])) for m in METRICS}
        out[key]["seeds"] = len(mine)
        # a held-back case's runs were timed one at a time as they were recorded
        out[key]["wall_s"] = float(np.median([float(r["wall_s"]) for r in mine]))
    # the suite's: one run at a time (the sweep's own wall times ran two at once on a shared
    # machine)
    for r in _rows("htsim_timing.csv"):
        if (r["case"], r["routing"]) in out:
            out[(r["case"], r["routing"])]["wall_s"] = float(r["wall_s"])
    return out


@cache
def fastest_wall_s() -> dict[tuple[str, str], float]:
    """Per (case, routing): the simulator's fastest run (s), where it was timed over many runs
    (the incasts, whose single runs take milliseconds): beside the median, the reading that a
    slow spell of a shared machine moves least."""
    rows = _rows("htsim_timing.csv")
    return {(r["case"], r["routing"]): float(r["fastest_s"]) for r in rows if r["fastest_s"]}


@cache
def measured_resent() -> dict[tuple[str, str], float]:
    """Per (case, routing): the median over the simulator's seeds of the bytes it retransmitted
    (flowlet runs of the cases developed on and held back; ECMP retransmits nothing)."""
    runs: dict[tuple[str, str], list[float]] = {}
    for r in _rows("htsim_resent.csv"):
        runs.setdefault((r["case"], r["routing"]), []).append(float(r["retransmitted_bytes"]))
    return {k: float(np.median(v)) for k, v in runs.items()}


@dataclass(frozen=True)
class Comparison:
    case: str
    routing: str
    what: str
    predicted: dict[str, float]
    measured: dict[str, float]
    seconds_per_seed: float  # this model, one core, in-process
    reference_seconds: float  # the simulator, one run
    # bytes flowlet moves made go-back-N send again, median over seeds: (ours, the
    # simulator's retransmissions), where the simulator's were recorded
    resent_bytes: tuple[float, float] | None = None

    @property
    def errors(self) -> dict[str, float]:
        return {m: self.predicted[m] / self.measured[m] - 1 for m in METRICS}

    @property
    def within(self) -> bool:
        return all(abs(e) <= TOLERANCE for e in self.errors.values())

    @property
    def speedup(self) -> float:
        return self.reference_seconds / max(self.seconds_per_seed, 1e-9)

    def to_dict(self) -> dict:
        return {
            "case": self.case,
            "routing": self.routing,
            "traffic": self.what,
            "predicted_fct_us": self.predicted,
            "measured_fct_us": self.measured,
            "errors": self.errors,
            "within_tolerance": self.within,
            "seconds_per_seed": self.seconds_per_seed,
            "reference_seconds_per_run": self.reference_seconds,
            "speedup": self.speedup,
        } | (
            {"resent_bytes": {"predicted": self.resent_bytes[0], "measured": self.resent_bytes[1]}}
            if self.resent_bytes is not None
            else {}
        )


def flow_case(hosts: int, flows: FlowList, routing: str, seeds: int | None = None) -> Case:
    """``flows`` on the reference's fabric of ``hosts`` hosts (one NIC each) under ``routing``,
    as the suite runs its cases: its settings, flows done at their last acknowledgement."""
    s = setting()
    return Case(
        gpu=s.gpu,
        gpus=hosts,
        fabric=s.fabric,
        design="fat-tree",
        routing=routing,
        pattern="flows",
        flows=flows,
        seeds=seeds or s.seeds,
        jitter_us=0.0,
        gpus_per_node=1,
        nics_per_node=1,
        switch=s.switch,
        flow=s.flow(),
        fct_until="acknowledged",  # the reference logs a flow when its sender has the last ACK
    )


def compare(case: RefCase, routing: str, seeds: int | None = None, repeats: int = 1) -> Comparison:
    """Run one reference case here and set it beside the recorded figures; ``repeats`` runs
    time it, and the seconds per seed are their median (every run gives the same figures)."""
    s = setting()
    flows = case.flows()
    if simulator_of()[(case.name, routing)] in s.whole_packet_simulators:
        flows = whole_packets(flows, s.packet_bytes)
    c = flow_case(case.hosts, flows, routing, seeds)
    spent = []
    # one process, as the reference ran; no latency probes: only flow completion times compare
    for _ in range(max(repeats, 1)):
        t0 = time.perf_counter()
        r = run_case(c, reference_catalog(), probes=False, workers=1)
        spent.append((time.perf_counter() - t0) / c.seeds)
    m = measured()[(case.name, routing)]
    ref_resent = measured_resent().get((case.name, routing))
    return Comparison(
        case.name,
        routing,
        case.what,
        dict(r.fct_us),
        {k: m[k] for k in METRICS},
        float(np.median(spent)),
        m["wall_s"],
        None if ref_resent is None else (r.resent_bytes, ref_resent),
    )


@cache
def _warm() -> None:
    """Load the compiled kernels (and the imports) once before any case is timed: like the
    interpreter's start-up, a process pays for them once, not per seed. Once loaded, the
    small cases' max-min fills use them too."""
    kernels.fill()
    compare(CASES[0], ROUTINGS[0], seeds=1)


def check_all(
    seeds: int | None = None,
    only: str | None = None,
    progress: Callable[[int], None] | None = None,
    cases: tuple[RefCase, ...] = CASES,
) -> list[Comparison]:
    """Every recorded routing of ``cases`` (the suite's, ``DEVELOPED`` or ``HELD_BACK``), or
    of the case named ``only``."""
    _warm()
    out = []
    for case in cases:
        if only and case.name != only:
            continue
        for routing in ROUTINGS:
            if (case.name, routing) in measured():
                out.append(compare(case, routing, seeds))
            if progress:
                progress(1)
    return out
