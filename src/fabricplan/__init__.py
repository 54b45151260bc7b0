"""fabricplan: InfiniBand, RoCEv2 or Ethernet for a GPU cluster, from first principles.

Layers (data flows down): catalog -> scenario -> (topology, collectives, congestion, workload,
cost, advise) -> interfaces. See the README for the command line.
"""

__version__ = "0.1.0"
