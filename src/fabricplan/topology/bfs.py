"""Hop distances by breadth-first search on a CSR neighbour list.

The same numbers as ``scipy.sparse.csgraph.shortest_path(..., unweighted=True)`` (edges on a
shortest path, as floats; inf where unreachable), without importing ``scipy.sparse.csgraph``:
that package loads ``scipy.sparse.linalg`` and ``scipy.linalg``, a tenth of a second of every
command that simulates congestion, for a search of a few levels.
"""

from __future__ import annotations

import numpy as np


def hop_distances(indptr: np.ndarray, indices: np.ndarray, sources: np.ndarray | int
                  ) -> np.ndarray:  # fmt: skip
    """Edges from each source to every vertex along the out-edges ``indices[indptr[v]:
    indptr[v + 1]]`` of each vertex ``v``: shape (sources, vertices), or (vertices,) for one
    integer source."""
    indptr = np.asarray(indptr, np.int64)
    indices = np.asarray(indices, np.int64)
    n = len(indptr) - 1
    frontier = np.atleast_1d(np.asarray(sources, np.int64))
    dist = np.full((len(frontier), n), np.inf)
    row = np.arange(len(frontier))  # the search each frontier vertex belongs to
    dist[row, frontier] = 0.0
    degree = np.diff(indptr)
    reached = np.zeros(dist.size, bool)  # scratch: this level's vertices, once each
    level = 0.0
    while len(row):
        level += 1.0
        count = degree[frontier]
        total = int(count.sum())
        if not total:
            break
        # every out-edge of every frontier vertex, tagged with its search
        first = np.repeat(indptr[frontier] - (np.cumsum(count) - count), count)
        nbr = indices[first + np.arange(total)]
        row = np.repeat(row, count)
        new = np.isinf(dist[row, nbr])
        row, nbr = row[new], nbr[new]
        dist[row, nbr] = level
        reached[row * n + nbr] = True
        key = np.flatnonzero(reached)
        reached[key] = False
        row, frontier = key // n, key % n
    return dist[0] if np.ndim(sources) == 0 else dist
