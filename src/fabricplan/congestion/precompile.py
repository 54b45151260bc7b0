"""Compile the flow simulator's kernels once, at install (``make install`` runs this module), so
that the first large run does not pay for it.

Numba compiles each kernel of :mod:`fabricplan.congestion.kernels` (and the compiled event of
PFC-only flow control, :mod:`~fabricplan.congestion.pfc_kernel`, and the flowlet moves,
:mod:`~fabricplan.congestion.move_kernel`, :mod:`~fabricplan.congestion.due_kernel` and
:mod:`~fabricplan.congestion.rebuild_kernel`) the first time a process calls it, about 7 s for the
first three on this project's 2-core machine, and keeps the machine code
beside the module for later processes (loaded in about 0.2 s). Without this, the first
``congestion --pattern alltoall --gpus 1024`` after an install spends that compile in each of its
worker processes. A run of the simulator itself compiles them, so each kernel is compiled for
the argument types the simulator really passes (a dummy call with other array types would
compile a variant no run uses).

Run: python -m fabricplan.congestion.precompile
"""

from __future__ import annotations

import sys

from fabricplan.congestion import kernels
from fabricplan.congestion.case import Case
from fabricplan.congestion.settings import FlowSettings
from fabricplan.congestion.simulate import run_case

# The smallest all-to-all whose problem is above kernels.COMPILED_MIN_SIZE (32 nodes: about 32k
# non-zeros), on RoCE with DCQCN: it calls the max-min fill, the port arrivals and the DCQCN
# fluid model. 256 MiB keeps the run short once they are compiled (about 0.1 s).
WARM_CASE = Case(gpus=256, fabric="roce-400g", pattern="alltoall", size_bytes=2**28, seeds=1)

# Then an incast over 128 leaves' worth of NICs with flowlet routing on PFC alone (no DCQCN):
# its events are small problems in a process that has the kernels (the compiled PFC event), and
# its flows move at their pauses (the compiled moves).
FLOWLET_CASE = Case(
    gpus=1024,
    fabric="roce-400g",
    routing="flowlet",
    pattern="incast",
    size_bytes=2**24,
    seeds=1,
    qps=1,
    flow=FlowSettings(congestion_control="none"),
)

# Every compiled kernel of the simulator, by the name of its accessor in kernels, and the
# compiled functions of the modules that import Numba themselves.
KERNELS = ("fill", "brought", "dcqcn_fluid")
MODULE_KERNELS = ("pfc_rates", "move_groups", "due_moves", "rebuild")


def main() -> list[str]:
    """Run the warm-up cases; the kernels they left compiled (or loaded from the cache)."""
    run_case(WARM_CASE, probes=False, workers=1)
    run_case(FLOWLET_CASE, probes=False, workers=1)
    from fabricplan.congestion import due_kernel, move_kernel, pfc_kernel, rebuild_kernel

    done = [name for name in KERNELS if getattr(kernels, name)().signatures]
    compiled = {
        "pfc_rates": pfc_kernel.pfc_rates,
        "move_groups": move_kernel.move_groups,
        "due_moves": due_kernel.due_moves,
        "rebuild": rebuild_kernel.rebuild,
    }
    return done + [name for name in MODULE_KERNELS if compiled[name].signatures]


if __name__ == "__main__":
    done = main()
    print(f"compiled kernels: {', '.join(done) or 'none'}")
    sys.exit(0 if done == [*KERNELS, *MODULE_KERNELS] else 1)
