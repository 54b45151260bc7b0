"""Flow-control settings a user may set over a RoCE quality preset: PFC thresholds, the egress
buffer, ECN marking thresholds and whether DCQCN runs at all.

``None`` on a field keeps the preset's value (``congestion/data/roce_quality.toml``). The
record is frozen and hashable, so it can sit in a case and in a backend's cache key.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

CONGESTION_CONTROLS = ("dcqcn", "none")
# Input guard, not a physical limit: no switch port buffers more than a gigabyte.
MAX_BUFFER_KB = 1024.0 * 1024.0


@dataclass(frozen=True)
class FlowSettings:
    pfc_xoff_kb: float | None = None  # queue per ingress port at which PFC pauses the feeder
    pfc_xon_kb: float | None = None  # queue at which it resumes it
    buffer_kb: float | None = None  # queue one egress port can take from the shared buffer
    ecn_kmin_kb: float | None = None  # RED/ECN marking starts
    ecn_kmax_kb: float | None = None  # every packet marked
    congestion_control: str | None = None  # dcqcn | none (PFC only, as some fabrics run)

    def problems(self) -> list[tuple[str, object, str]]:
        """(field, value, what is allowed) for each bad setting; empty when all are fine."""
        out: list[tuple[str, object, str]] = []
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "congestion_control" or v is None:
                continue
            if not (isinstance(v, int | float) and 0 < v <= MAX_BUFFER_KB):
                allowed = f"a queue depth in KB, above 0 and at most {MAX_BUFFER_KB:,.0f}"
                out.append((f.name, v, allowed))
        cc = self.congestion_control
        if cc is not None and cc not in CONGESTION_CONTROLS:
            out.append(("congestion_control", cc, f"one of {', '.join(CONGESTION_CONTROLS)}"))
        lo, hi = self.pfc_xon_kb, self.pfc_xoff_kb
        if lo is not None and hi is not None and lo > hi:
            out.append(("pfc_xon_kb", lo, f"at most pfc_xoff_kb ({hi:g})"))
        lo, hi = self.ecn_kmin_kb, self.ecn_kmax_kb
        if lo is not None and hi is not None and lo > hi:
            out.append(("ecn_kmin_kb", lo, f"at most ecn_kmax_kb ({hi:g})"))
        return out
