"""NCCL's public tuning constants.

Source: NVIDIA/nccl v2.30.7-1, ``src/graph/tuning.cc`` (``ncclTunerConstantsDefaults``),
``src/graph/search.cc`` (per-channel speed arrays) and ``src/graph/topo.h`` (link bandwidths).
These are the numbers NCCL's own tuner uses to pick an algorithm and protocol; they were
measured by NVIDIA on InfiniBand clusters, which is why fabric differences are added on top of
them (see :mod:`fabricplan.collectives.system`) rather than baked in.
Latencies are in microseconds, bandwidths in GB/s (1e9 bytes/s).
"""

from __future__ import annotations

import numpy as np

ALGORITHMS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")
PROTOCOLS = ("LL", "LL128", "Simple")
ALGO_INDEX = {name: i for i, name in enumerate(ALGORITHMS)}
# nccl-tests and NCCL logs spell them this way
ALGO_DISPLAY = {
    "tree": "Tree",
    "ring": "Ring",
    "collnet_direct": "CollNetDirect",
    "collnet_chain": "CollNetChain",
    "nvls": "NVLS",
    "nvls_tree": "NVLSTree",
    "pat": "PAT",
}

# Rows of the per-architecture tables: NCCL's compCapIndex (Volta, Ampere, Hopper, Blackwell).
ARCH_INDEX = {"volta": 0, "ampere": 1, "hopper": 2, "blackwell": 3}
# AMD's CDNA3 runs RCCL, NCCL's fork; it has no entry in NCCL's tables. Ampere's row is used as
# the closest match (an assumption: RCCL's own tuning differs in detail).
ARCH_INDEX["cdna3"] = 1

# baseLat[algo][proto]
BASE_LAT_US = np.array(
    [
        [6.8, 14.0, 8.4],  # tree
        [6.6, 14.0, 8.4],  # ring
        [0.0, 0.0, 0.0],  # collnet direct
        [0.0, 0.0, 0.0],  # collnet chain
        [0.0, 0.0, 0.0],  # nvls
        [0.0, 0.0, 0.0],  # nvls tree
        [8.0, 8.0, 8.0],  # pat
    ]
)

# hwLat[hw][algo][proto], hw = NVLINK, PCI, NET
HW_NVLINK, HW_PCI, HW_NET = 0, 1, 2
HW_LAT_US = np.array(
    [
        [  # NVLINK
            [0.6, 1.25, 4.0],
            [0.6, 1.9, 3.4],
            [0.0, 0.0, 3.7],
            [0.0, 0.0, 2.8],
            [0.0, 0.0, 25.0],
            [0.0, 0.0, 25.0],
            [0.0, 0.0, 4.0],
        ],
        [  # PCI
            [1.0, 1.9, 4.0],
            [1.0, 2.5, 5.7],
            [0.0, 0.0, 3.7],
            [0.0, 0.0, 2.8],
            [0.0, 0.0, 0.0],
            [0.0, 0.0, 0.0],
            [0.0, 0.0, 4.0],
        ],
        [  # NET
            [5.0, 8.5, 14.0],
            [2.7, 4.0, 14.0],
            [0.0, 0.0, 31.0],
            [0.0, 0.0, 30.0],
            [0.0, 0.0, 18.0],
            [0.0, 0.0, 20.9],
            [0.0, 0.0, 14.0],
        ],
    ]
)

# Columns of the cap tables: scale = min(nNodes, 3) - 1 (1 node, 2 nodes, more).
# llMaxBws: for one node NCCL reads the GPU's row; for several nodes it reads row 0 on Intel
# hosts (row 1 on AMD hosts). x86 Intel hosts are assumed, as in DGX/HGX reference nodes.
LL_MAX_BW = np.array(
    [
        [39.0, 39.0, 20.4],
        [87.7, 22.5, 19.0],
        [141.0, 45.0, 35.0],
        [282.0, 90.0, 70.0],
    ]
)
LL_MAX_BW_MULTINODE_ROW = 0  # Intel host CPU
PER_CH_MAX_RING_LL128_BW = np.array(
    [[20.0, 20.0, 20.0], [20.0, 20.0, 20.0], [36.7, 36.7, 36.7], [40.0, 40.0, 40.0]]
)
PER_CH_MAX_TREE_LL128_BW = np.array(
    [[20.0, 20.0, 20.0], [20.0, 20.0, 20.0], [36.7, 36.7, 29.0], [55.6, 31.67, 20.0]]
)
PER_CH_MAX_TREE_BW = np.array(
    [[26.5, 18.5, 10.0], [24.0, 23.6, 17.8], [38.7, 41.4, 36.0], [70.0, 42.8, 24.0]]
)
PER_CH_MAX_NVLS_TREE_BW = np.array(
    [[26.5, 18.5, 10.0], [24.0, 23.6, 17.8], [0.0, 57.7, 45.5], [0.0, 96.0, 80.0]]
)
NVLS_EFFICIENCY = np.array([0.0, 0.0, 0.85, 0.74])

# Protocol efficiency on the wire: LL sends 4 bytes of flag per 4 of data; LL128 sends 120 of
# every 128 bytes (NCCL rounds this to 0.92 for rings); Simple is raw.
RING_LL_FACTOR = 0.5
RING_LL128_FACTOR = 0.92
TREE_SIMPLE_FACTOR = 0.92
TREE_LL_DIVISOR = 3.8
TREE_LL128_FACTOR_MULTINODE = 120.0 / 128.0
TREE_LL128_FACTOR_ONE_NODE = 7.0 / 9.0
PAT_FACTOR = 0.75
COLLNET_SM90_FACTOR = 0.85

# NVLS model refinements (tuning.cc, ncclTopoTuneModel): an NVLS all-reduce pipelines two
# operations through the switch, so its per-channel intra-node bandwidth counts twice; with at
# most two nodes NVLS-Tree's network side carries twice the bandwidth (each byte crosses once
# per direction, not a ring's ~2x).
NVLS_ALLREDUCE_PIPELINE = 2.0
NVLS_TREE_TWO_NODE_INTER = 2.0
NVLS_TREE_TWO_NODE_MAX_NODES = 2
# CollNet Direct needs a NIC per GPU at full speed: with f GPUs per NIC the bus bandwidth is
# divided by f - (f - 1) * COLLNET_SHARED_NIC_RELIEF (tuning.cc: factor -= (factor - 1) / 2).
COLLNET_SHARED_NIC_RELIEF = 0.5

# Ring/Simple all-reduce across nodes pays 1.4x latency once messages fill the pipeline
# ("plateau effect of ring", tuning.cc, sm80+).
RING_PLATEAU_LAT_FACTOR = 1.4
RING_PLATEAU_BYTES_PER_RANK_CHANNEL = 64

# treeCorrectionFactor[proto][floor(log2(nBytes/64))], 64 B .. 512 MiB.
TREE_CORRECTION = np.array(
    [
        [1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5,
         0.4, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.0, 1.0, 1.0, 1.0],
        [1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.8, 0.8, 0.7, 0.6, 0.6,
         0.6, 0.6, 0.6, 0.6, 0.8, 0.9, 0.9, 0.9, 0.9, 1.0, 1.0, 1.0],
        [0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5,
         0.5, 0.5, 0.5, 0.6, 0.7, 0.8, 0.7, 0.7, 0.8, 0.9, 0.9, 0.9],
    ]
)  # fmt: skip
TREE_CORRECTION_MAX_INDEX = 23  # applied for 0 <= index < 23 (tree)

# NCCL_NET_OVERHEAD default on x86 Intel hosts (getNetOverhead), per network step.
NET_OVERHEAD_US = 1.0
NET_OVERHEAD_SIMPLE_MULT = 3.0

# Tree and CollNet all-reduce move each byte up and back down: algorithm bandwidth is half the
# bus bandwidth (tuning.cc, the busBw -> algBw ratio of the non-ring algorithms).
TREE_ALG_RATIO = 0.5
# CollNet Direct's latency adds this per extra GPU in the node (tuning.cc), us.
COLLNET_DIRECT_PER_GPU_LAT_US = 0.4
# PAT latency (tuning.cc, marked there as not correctly modelled): the network latency per
# log2(nodes) step is divided by this, and this much is added per rank, us.
PAT_NET_LAT_DIVISOR = 3.5
PAT_PER_RANK_LAT_US = 2.8

# Per-channel speeds the topology search tries for intra-node graphs (search.cc); an NVLS graph
# runs one channel per GPU at the top speed that the GPU's NVLink can carry.
INTRA_SPEEDS_GBPS = {
    "ampere": (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0),
    "hopper": (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
    "blackwell": (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0),
}
INTRA_SPEEDS_GBPS["cdna3"] = INTRA_SPEEDS_GBPS["ampere"]

# NVLink bandwidth NCCL assigns per link (topo.h: SM80 20.0, SM90 20.6, SM100 40.1 GB/s) against
# the signalling rate per link and direction (25 GB/s for NVLink 3/4, 50 for NVLink 5): the
# usable fraction of a GPU's quoted NVLink bandwidth.
SCALEUP_EFFICIENCY = {"ampere": 20.0 / 25.0, "hopper": 20.6 / 25.0, "blackwell": 40.1 / 50.0}
# Infinity Fabric on MI300X: no NCCL figure; the NVLink 3/4 fraction is assumed.
SCALEUP_EFFICIENCY["cdna3"] = 0.8

# Chunking (src/enqueue.cc, calcCollChunking; NCCL 2.20-2.30). A Simple step is NCCL_BUFFSIZE
# (DEFAULT_BUFFSIZE, 4 MiB, src/init.cc) / NCCL_STEPS (8, src/include/device.h) = 512 KiB. A tree
# (ncclPatternTreeUpDown) moves one step per chunk (chunkSteps = 1 outside the ring) and, since
# NCCL 2.20, no longer shrinks it for Simple (2.12-2.19 halved it while a channel had fewer than
# depth x 8 / x 4 / x 1 chunks); a channel's part smaller than a step goes as a single chunk. Each
# hop stores a whole chunk before forwarding it, so the pipeline fills and drains in chunks.
SIMPLE_STEP_BYTES = 4 * 2**20 // 8
# Threads a channel runs per protocol, at most (src/include/device.h: NCCL_LL_MAX_NTHREADS,
# NCCL_LL128_MAX_NTHREADS, NCCL_SIMPLE_MAX_NTHREADS).
LL_MAX_NTHREADS, LL128_MAX_NTHREADS, SIMPLE_MAX_NTHREADS = 512, 640, 512
# LL128: a step is DEFAULT_LL128_BUFFSIZE / NCCL_STEPS = NCCL_LL128_ELEMS_PER_THREAD (120) x
# NCCL_LL128_MAX_NTHREADS x 8 bytes (src/init.cc, src/include/device.h), of which 15 of every
# 16 words are data (NCCL_LL128_DATAELEMS / NCCL_LL128_LINEELEMS). The tree halves the chunk while
# a channel's part holds fewer than nstepsLL128 x 64 / ppn chunks (down to 128 KiB), then
# nstepsLL128 x 16 / ppn (down to 32 KiB), nstepsLL128 = 1 + log2(nodes) + 0.1 x ppn.
LL128_STEP_DATA_BYTES = 120 * LL128_MAX_NTHREADS * 8 // 16 * 15
TREE_LL128_CHUNK_RULES = ((64, 131072), (16, 32768))
TREE_LL128_NSTEPS_PER_PPN = 0.1
# NVLS-Tree's chunk (src/enqueue.cc, calcCollChunking, NCCL 2.21-2.28): NCCL_NVLS_CHUNKSIZE (128
# KiB, src/transport/nvls.cc), at most NCCL_NVLSTREE_MAX_CHUNKSIZE (its default: 64 KiB from 4
# nodes on, else no cap); then set to 256, 128, 64 and 32 KiB in turn while the message is
# smaller than 32, 16, 4 and 1 x channels x heads x the chunk. (NCCL 2.30 tunes these anew for
# Blackwell across nodes; not modelled.)
NVLS_CHUNK_BYTES = 128 * 2**10
NVLS_TREE_MANY_NODES = 4
NVLS_TREE_MANY_NODES_MAX_CHUNK_BYTES = 64 * 2**10
NVLS_TREE_CHUNK_RULES = ((32, 262144), (16, 131072), (4, 65536), (1, 32768))
# NVLS runs 16 CTAs (channels) on SM90 and 32 on SM100 across nodes (src/transport/nvls.cc).
# Indexed by ARCH_INDEX row (Volta and Ampere have no NVLS; the value is unused there).
NVLS_CHANNELS = np.array([16.0, 16.0, 16.0, 32.0])
# NCCL_MAX_CTAS defaults to MAXCHANNELS (64 since NCCL 2.12, src/include/device.h); the CTA
# limits clamp the NVLS channel count (src/transport/nvls.cc).
MAX_CTAS = 64
# A small message runs on fewer channels than the communicator has: after choosing the algorithm
# and protocol by its estimate (which assumes all of them), NCCL takes channels away while the
# message is under channels x threads x a per-thread threshold, down to one (src/enqueue.cc,
# topoGetAlgoInfo, "Ring/Tree channel tuning"; the same loop in NCCL 2.8.3 and 2.18.3). The bytes
# a channel must have, per protocol (LL, LL128, Simple): its threads times their per-thread
# thresholds (src/include/comm.h, NCCL_LL/LL128/SIMPLE_THREAD_THRESHOLD, bytes). The ring's LL
# threshold is multiplied by the ranks (src/graph/tuning.cc). The ring's Simple threads drop to
# 256 where its intra-node bandwidth is under PCIe's (tuning.cc); not modelled.
LL_THREAD_THRESHOLD, LL128_THREAD_THRESHOLD, SIMPLE_THREAD_THRESHOLD = 8, 8, 64
CHANNEL_MIN_BYTES = np.array(
    [
        LL_MAX_NTHREADS * LL_THREAD_THRESHOLD,
        LL128_MAX_NTHREADS * LL128_THREAD_THRESHOLD,
        SIMPLE_MAX_NTHREADS * SIMPLE_THREAD_THRESHOLD,
    ],
    dtype=float,
)

# NCCL doubles the channels its topology search finds when it connects them at run time
# (src/graph/connect.cc), so on H100-class nodes each NIC carries two ring connections.
RUNTIME_CHANNEL_FACTOR = 2


def runtime_channels(found, min_ctas, max_ctas):  # type: ignore[no-untyped-def]
    """The channels a collective runs: the search's ``found`` doubled, then held within
    NCCL_MIN/MAX_CTAS (connect.cc: at most the maximum, then at least the minimum). Numbers or
    arrays alike."""
    return np.maximum(np.minimum(RUNTIME_CHANNEL_FACTOR * found, max_ctas), min_ctas)


def nic_through_channels(nic_GBps, channels, nics, channel_GBps):  # type: ignore[no-untyped-def]
    """What one NIC carries for NCCL: its goodput, or the sum of its share of the ``channels``
    where a network plugin limits each to ``channel_GBps`` (inf: no limit). Numbers or arrays."""
    return np.minimum(nic_GBps, channels / np.maximum(nics, 1) * channel_GBps)
