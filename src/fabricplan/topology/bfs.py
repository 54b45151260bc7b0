"""Hop distances by breadth-first search, all sources at once.

The same numbers as ``scipy.sparse.csgraph.shortest_path(..., unweighted=True)`` (edges on a
shortest path, as floats; inf where unreachable), without importing ``scipy.sparse.csgraph``:
that package loads ``scipy.sparse.linalg`` and ``scipy.linalg``, a tenth of a second of every
command that simulates congestion, for a search of a few levels.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix


def hop_distances(indptr: np.ndarray, indices: np.ndarray, sources: np.ndarray | int
                  ) -> np.ndarray:  # fmt: skip
    """Edges from each source to every vertex along the out-edges ``indices[indptr[v]:
    indptr[v + 1]]`` of each vertex ``v``: shape (sources, vertices), or (vertices,) for one
    integer source."""
    n = len(indptr) - 1
    src = np.atleast_1d(np.asarray(sources, np.int64))
    into = csr_matrix((np.ones(len(indices)), indices, indptr), shape=(n, n)).T.tocsr()
    dist = np.full((n, len(src)), np.inf)  # vertex x search
    frontier = np.zeros((n, len(src)))
    dist[src, np.arange(len(src))] = 0.0
    frontier[src, np.arange(len(src))] = 1.0
    level = 0.0
    while True:
        level += 1.0
        # the vertices one edge on from the frontier (a count of edges, exact in floats)
        reached = (into @ frontier > 0) & np.isinf(dist)
        if not reached.any():
            break
        dist[reached] = level
        frontier = reached.astype(float)
    return dist.T[0].copy() if np.ndim(sources) == 0 else np.ascontiguousarray(dist.T)
