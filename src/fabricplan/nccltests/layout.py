"""How many ranks, nodes and GPUs per node one run used, read from its own log.

The log decides: NCCL's init line (``nRanks 2 nNodes 2 localRanks 1``), else the rank lines
(``Rank 3 ... on HOST``: ranks per host), else the rank count busbw/algbw implies. Flags and the
GPU's reference node only fill what the log leaves open. A flag that disagrees with the log is
reported, naming both; the log's figure is used. GPUs per node is a property of the hardware,
the same for every run of a file; the node count differs run to run, so with only a rank count
in the log, nodes are the ranks over the GPUs per node, whatever --nodes says.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from fabricplan.nccltests.parse import Run


@dataclass(frozen=True)
class Layout:
    """A run's shape, and where each figure came from."""

    nodes: int | None
    gpus_per_node: int | None  # None: the GPU's reference node
    nics_per_node: int | None  # None: the GPU's reference node
    ranks: int | None
    source: str  # what in the log (or which flags) gave the shape
    warnings: list[str] = field(default_factory=list)


def _log_shape(run: Run) -> tuple[int | None, int | None, int | None, str]:
    """(ranks, nodes, GPUs per node) as the log states them, and which lines said so."""
    if run.header_nnodes and run.local_ranks:
        return (
            run.header_nranks,
            run.header_nnodes,
            run.local_ranks,
            (
                f"NCCL init line: nRanks {run.header_nranks} nNodes {run.header_nnodes} "
                f"localRanks {run.local_ranks}"
            ),
        )
    if run.rank_hosts:
        ranks = run.header_nranks or max(run.rank_hosts) + 1
        hosts = len(set(run.rank_hosts.values()))
        return ranks, hosts, run.gpus_per_host(), f"rank lines: {ranks} ranks on {hosts} host(s)"
    if run.header_nranks:
        return run.header_nranks, None, None, f"NCCL init line: {run.header_nranks} ranks"
    ranks = run.inferred_nranks()
    if ranks:
        return ranks, None, None, f"busbw/algbw: {ranks} ranks"
    return None, None, None, ""


def resolve_layout(
    run: Run,
    *,
    nodes_flag: int | None,
    gpn_flag: int | None,
    nics_flag: int | None,
    reference_gpn: int,
    reference_nics: int,
) -> Layout:
    """The run's nodes, GPUs and NICs per node: the log's, flags where it is silent."""
    ranks, nodes, gpn, source = _log_shape(run)
    warnings: list[str] = []
    if gpn is None and nodes and ranks and ranks % nodes == 0:
        gpn = ranks // nodes
    if gpn is not None and gpn_flag is not None and gpn != gpn_flag:
        warnings.append(
            f"--gpus-per-node {gpn_flag}, but the log says {gpn} ({source}); graded with {gpn}"
        )
    if gpn is None:
        if gpn_flag is not None:
            gpn = gpn_flag
        elif (
            ranks
            and nodes_flag
            and ranks % nodes_flag == 0
            and ranks // nodes_flag <= reference_gpn
        ):
            gpn = ranks // nodes_flag  # fewer GPUs a node than it has: --nodes says how many
        elif ranks and not nodes and ranks < reference_gpn:
            gpn = ranks  # a part of one node
    if nodes is None and ranks:
        nodes = math.ceil(ranks / (gpn or reference_gpn))
    if nodes is not None and nodes_flag is not None and nodes != nodes_flag:
        warnings.append(
            f"--nodes {nodes_flag}, but the log shows {nodes} ({source}"
            f"{'' if gpn else f', {reference_gpn} GPUs a node'}); "
            f"graded as {nodes} nodes"
        )
    if nodes is None:
        nodes, source = nodes_flag, "flags" if nodes_flag else ""
    nics = nics_flag
    if nics is None and gpn is not None and gpn < reference_gpn:
        # a node running fewer GPUs than it has reaches the NICs nearest them: its share
        nics = max(1, round(reference_nics * gpn / reference_gpn))
    return Layout(nodes, gpn, nics, ranks, source, warnings)
