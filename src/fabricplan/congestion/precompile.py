"""Compile the flow simulator's kernels once, at install (``make install`` runs this module), so
that the first large run does not pay for it.

Numba compiles each kernel of :mod:`fabricplan.congestion.kernels` (and the compiled event of
PFC-only flow control, :mod:`~fabricplan.congestion.pfc_kernel`, the flowlet moves,
:mod:`~fabricplan.congestion.move_kernel`, :mod:`~fabricplan.congestion.due_kernel` and
:mod:`~fabricplan.congestion.rebuild_kernel`, a small seed's whole run,
:mod:`~fabricplan.congestion.seed_kernel`, and hashed routing's walk,
:mod:`~fabricplan.congestion.route_kernel`) the first time a process calls it, about 7 s for the
first three on this project's 2-core machine, and keeps the machine code
beside the module for later processes (loaded in about 0.2 s). Numba checks a kept kernel
against its own module's source only, not against the modules whose kernels it calls, so when
any module of the package has changed since the kernels were last kept, this removes them all
first: after an update, none is left stale (``make`` runs it again when a module changes).
Without this, the first ``congestion --pattern alltoall --gpus 1024`` after an install spends
that compile in each of its worker processes. A run of the simulator itself compiles them, so
each kernel is compiled for the argument types the simulator really passes (a dummy call with
other array types would compile a variant no run uses).

Run: python -m fabricplan.congestion.precompile
"""

from __future__ import annotations

import hashlib
import importlib
import sys
from dataclasses import replace
from pathlib import Path

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

# Last, an all-to-all over WARM_CASE's nodes with FLOWLET_CASE's routing and flow control: a
# large problem, whose events take the array code and whose batches of moves call the draws,
# the moves and the rebuild from Python, with the argument types of that path (a first large
# flowlet run compiled them otherwise: about 4 s).
LARGE_FLOWLET_CASE = replace(FLOWLET_CASE, gpus=256, pattern="alltoall")

# Every compiled kernel of the simulator, by the name of its accessor in kernels, and the
# compiled functions of the modules that import Numba themselves.
KERNELS = ("fill", "brought", "dcqcn_fluid")
MODULE_KERNELS = (
    "pfc_rates",
    "move_groups",
    "due_moves",
    "rebuild",
    "run_seed",
    "hashed_hops",
    "chain_levels",
)


PACKAGE = Path(__file__).parent
# Beside the kept kernels: the digest of the package's sources they were compiled from.
SOURCES_DIGEST = PACKAGE / "__pycache__" / "kernel-sources.sha256"


def sources_digest() -> str:
    """One digest of every module of the package, in name order."""
    h = hashlib.sha256()
    for f in sorted(PACKAGE.glob("*.py")):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def clear_stale() -> int:
    """Remove the package's kept kernels (Numba's index and data files) unless they were kept
    from the sources as they are now; how many files went. Notes the sources' digest."""
    digest = sources_digest()
    cache = SOURCES_DIGEST.parent
    if SOURCES_DIGEST.is_file() and SOURCES_DIGEST.read_text() == digest:
        return 0
    files = [*cache.glob("*.nbi"), *cache.glob("*.nbc")] if cache.is_dir() else []
    for f in files:
        f.unlink()
    cache.mkdir(exist_ok=True)
    SOURCES_DIGEST.write_text(digest)
    return len(files)


# Where each kernel is kept: its module and function (Numba names its files after them).
KEPT_AS = {
    "fill": ("fill_kernel", "fill"),
    "brought": ("kernels", "_brought"),
    "dcqcn_fluid": ("kernels", "_dcqcn_fluid"),
    "pfc_rates": ("pfc_kernel", "pfc_rates"),
    "move_groups": ("move_kernel", "move_groups"),
    "due_moves": ("due_kernel", "due_moves"),
    "rebuild": ("rebuild_kernel", "rebuild"),
    "run_seed": ("seed_kernel", "run_seed"),
    "hashed_hops": ("route_kernel", "hashed_hops"),
    "chain_levels": ("rebuild_kernel", "chain_levels"),
}


def kept(name: str) -> bool:
    """Whether a kernel was compiled here or is kept compiled beside its module. A kernel
    another one calls (the PFC event inside a flowlet seed's run) is compiled and kept with
    it, and is loaded from there by the runs that call it alone, without being called here."""
    module, function = KEPT_AS[name]
    dispatcher = getattr(importlib.import_module(f"{__package__}.{module}"), function)
    in_process = bool(getattr(dispatcher, "signatures", None))
    return in_process or any(SOURCES_DIGEST.parent.glob(f"{module}.{function}-*.nbi"))


def main() -> list[str]:
    """Run the warm-up cases; the kernels kept compiled from the sources as they are."""
    clear_stale()
    run_case(WARM_CASE, probes=False, workers=1)
    run_case(FLOWLET_CASE, probes=False, workers=1)
    # in a process that holds the kernels now: its large port tables settle the lanes' levels
    # compiled, as every large run's do
    run_case(LARGE_FLOWLET_CASE, probes=False, workers=1)
    return [name for name in (*KERNELS, *MODULE_KERNELS) if kept(name)]


if __name__ == "__main__":
    done = main()
    print(f"compiled kernels: {', '.join(done) or 'none'}")
    sys.exit(0 if done == [*KERNELS, *MODULE_KERNELS] else 1)
