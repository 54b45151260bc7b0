"""Hop distances by breadth-first search, many sources at once.

The same numbers as ``scipy.sparse.csgraph.shortest_path(..., unweighted=True)`` (edges on a
shortest path, as floats; inf where unreachable), without importing ``scipy.sparse.csgraph``:
that package loads ``scipy.sparse.linalg`` and ``scipy.linalg``, a tenth of a second of every
command that simulates congestion, for a search of a few levels.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix

# Searches advanced together: each level is one sparse product with this many columns, and the
# working arrays hold vertices x this many entries.
SOURCES_PER_PASS = 64
# Up to this many edge visits (edges x sources) the search walks the lists in Python: a small
# fabric's few dozen switches cost less than building the sparse matrices.
SMALL_SEARCH_EDGES = 16384


def hop_distances(indptr: np.ndarray, indices: np.ndarray, sources: np.ndarray | int) -> np.ndarray:
    """Edges from each source to every vertex along the out-edges ``indices[indptr[v]:
    indptr[v + 1]]`` of each vertex ``v``: shape (sources, vertices), or (vertices,) for one
    integer source."""
    n = len(indptr) - 1
    src = np.atleast_1d(np.asarray(sources, np.int64))
    if len(indices) * len(src) <= SMALL_SEARCH_EDGES:
        out = _walk(indptr.tolist(), indices.tolist(), src.tolist(), n)
        return out[0] if np.ndim(sources) == 0 else out
    # rows: vertices, columns: their in-neighbours (edge counts stay exact in float32)
    into = csr_matrix((np.ones(len(indices), np.float32), indices, indptr), shape=(n, n)).T
    into = into.tocsr()
    out = np.empty((len(src), n))
    for lo in range(0, len(src), SOURCES_PER_PASS):
        part = src[lo : lo + SOURCES_PER_PASS]
        dist = np.full((n, len(part)), np.inf)  # vertex x search
        frontier = np.zeros((n, len(part)), np.float32)
        dist[part, np.arange(len(part))] = 0.0
        frontier[part, np.arange(len(part))] = 1.0
        level = 0.0
        while True:
            level += 1.0
            # the vertices one edge on from the frontier, not reached before
            reached = (into @ frontier > 0) & np.isinf(dist)
            if not reached.any():
                break
            dist[reached] = level
            frontier = reached.astype(np.float32)
        out[lo : lo + len(part)] = dist.T
    return out[0] if np.ndim(sources) == 0 else out


def _walk(indptr: list[int], indices: list[int], sources: list[int], n: int) -> np.ndarray:
    """:func:`hop_distances` level by level over Python lists, for small searches."""
    out = np.full((len(sources), n), np.inf)
    for row, s in enumerate(sources):
        dist = [np.inf] * n
        dist[s] = 0.0
        frontier = [s]
        level = 0.0
        while frontier:
            level += 1.0
            reached = []
            for v in frontier:
                for u in indices[indptr[v] : indptr[v + 1]]:
                    if dist[u] == np.inf:
                        dist[u] = level
                        reached.append(u)
            frontier = reached
        out[row] = dist
    return out
