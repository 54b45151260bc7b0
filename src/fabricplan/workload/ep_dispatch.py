"""How many times a token crosses the network when its experts live on other nodes.

Megatron-Core's all-to-all dispatcher sends each of a token's ``top_k`` expert copies to the
GPU that holds that expert, so a token whose experts sit on three GPUs of one remote node
crosses the network three times. A hierarchical dispatcher sends it once per destination
node, to the GPU with the same local index there, which forwards it over NVLink to the
experts' GPUs; the combine goes back the same way (DeepEP's normal kernels, and NVIDIA's
HybridEP; DeepSeek-V3 Technical Report, arXiv 2412.19437, Sec. 3.2.2). DeepSeek-V3 also limits
each token to experts of at most 4 of its 8 expert groups (Sec. 2.1.2, config.json n_group 8,
topk_group 4), so that a token reaches few nodes.

Experts sit on the expert-parallel ranks in order, so each of the ``nodes`` nodes an EP group
spans holds ``experts / nodes`` consecutive experts; routing is taken as balanced (each token
picks its groups, then its experts within them, uniformly: what load balancing aims at, and
what NVIDIA's benchmark runs force). Real routing is skewed toward fewer nodes (DeepSeek-V3
reports 3.2 experts a node on average, 2.5 nodes a token, where balanced routing gives 3.6
nodes), so the share errs on the side of more traffic.
"""

from __future__ import annotations

from functools import lru_cache
from math import comb

import numpy as np
from numpy.typing import ArrayLike

from fabricplan.workload import vec
from fabricplan.workload.shapes import Shape

# SMs a hierarchical dispatcher's kernels hold while they run (Megatron-Core core_v0.14.0,
# transformer_config.py: moe_deepep_num_sms = 20, DeepEP's own default; later releases leave it
# to the backend, whose default it stays): beside compute, the compute loses them.
FLEX_DISPATCHER_SMS = 20


def _none_of(pool: int, held: int, k: int) -> float:
    """Probability that ``k`` experts drawn without replacement from ``pool`` miss all
    ``held`` of them."""
    return comb(pool - held, k) / comb(pool, k) if held <= pool - k else 0.0


@lru_cache(maxsize=256)
def _nodes_per_token(experts: int, top_k: int, groups: int, used: int, nodes: int) -> float:
    """Expected number of distinct nodes among a token's ``top_k`` experts (see the module)."""
    if nodes <= 1:
        return 1.0
    per_group = experts // groups
    pool = used * per_group  # the experts of the groups a token picks
    if nodes % groups == 0:  # each group spans nodes // groups nodes
        per_node = experts // nodes
        picked = used / groups  # the node's group is among the token's groups
        miss = (1 - picked) + picked * _none_of(pool, per_node, top_k)
    elif groups % nodes == 0:  # each node holds groups // nodes whole groups
        on_node = groups // nodes
        # how many of the node's groups the token picks: hypergeometric
        miss = 0.0
        for c in range(max(0, used - (groups - on_node)), min(on_node, used) + 1):
            p_c = comb(on_node, c) * comb(groups - on_node, used - c) / comb(groups, used)
            miss += p_c * _none_of(pool, c * per_group, top_k)
    else:  # groups and nodes that do not nest: the limit is left out (more nodes, errs slow)
        held = experts / nodes
        miss = float(np.prod([(experts - held - i) / (experts - i) for i in range(top_k)]))
    return nodes * (1.0 - miss)


def nodes_per_token(s: Shape, nodes: ArrayLike) -> np.ndarray:
    """Expected distinct nodes a token's experts lie on, for EP groups over ``nodes`` nodes
    (an array of plans); 1 for a dense model or a group inside one node."""
    nodes = vec.floats(nodes)
    if s.experts == 0:
        return vec.full(nodes, 1.0)
    args = (s.experts, s.top_k, s.expert_groups, s.expert_groups_used)
    if not vec.is_batch(nodes):
        return np.float64(_nodes_per_token(*args, int(nodes)))  # type: ignore[return-value]
    found = {n: _nodes_per_token(*args, int(n)) for n in np.unique(nodes).tolist()}
    return np.array([found[n] for n in nodes.tolist()]).reshape(nodes.shape)


def network_copy_share(s: Shape, nodes: ArrayLike) -> np.ndarray:
    """Share of an expert all-to-all's bytes a hierarchical dispatcher puts on the network,
    relative to sending every expert copy on its own, for EP groups over ``nodes`` nodes:
    one copy per destination node takes the copies that reach other nodes from
    top_k x (n - 1) / n to nodes_per_token x (n - 1) / n, a share nodes_per_token / top_k.
    1 within one node, where NVLink carries every copy either way. The copies forwarded over
    NVLink inside the destination node are not priced: NVLink moves them about ten times
    faster than the NIC the network copies wait for."""
    nodes = vec.floats(nodes)
    if s.experts == 0:
        return vec.full(nodes, 1.0)
    return vec.where(nodes > 1, nodes_per_token(s, nodes) / s.top_k, 1.0)
