"""Indices of NCCL's algorithms and protocols in the model's (algorithm, protocol) tables, in
the order of ``nccl_constants.ALGORITHMS`` and ``PROTOCOLS``."""

from fabricplan.collectives import nccl_constants as K

A, P = len(K.ALGORITHMS), len(K.PROTOCOLS)
TREE, RING, CN_DIRECT, CN_CHAIN, NVLS, NVLS_TREE, PAT = range(A)
LL, LL128, SIMPLE = range(P)
