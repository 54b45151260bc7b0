"""NCCL-like collective cost model: algorithms x protocols, latency + bandwidth, busbw.

>>> from fabricplan.collectives import build_system, predict
>>> table = predict(build_system("h100", nodes=2, fabric="ib-ndr"), "all_reduce", [2**30])
>>> round(table.rows[0].busbw_GBps)
441
"""

from fabricplan.collectives.busbw import OPS, algbw_GBps, bus_factor, resolve_op
from fabricplan.collectives.congestion import CongestionBackend, NoCongestion
from fabricplan.collectives.model import SystemArrays
from fabricplan.collectives.predict import (
    DEFAULT_SIZES,
    CollectiveRow,
    CollectiveTable,
    SweepResult,
    predict,
    sweep,
)
from fabricplan.collectives.system import CommSystem, build_system, p2p_latency_us

__all__ = [
    "DEFAULT_SIZES",
    "OPS",
    "CollectiveRow",
    "CollectiveTable",
    "CommSystem",
    "CongestionBackend",
    "NoCongestion",
    "SweepResult",
    "SystemArrays",
    "algbw_GBps",
    "build_system",
    "bus_factor",
    "p2p_latency_us",
    "predict",
    "resolve_op",
    "sweep",
]
