"""Cost layer: per-run cost and waste, lifecycle TCO, stabilisation and run-loss risk.

Inputs are the workload layer's GPU-hours, the topology layer's bill of materials and the
labelled assumptions in ``catalog/data/economics/costs.toml``; nothing here reaches up.
"""

from fabricplan.cost.assumptions import CostAssumptions, load_assumptions
from fabricplan.cost.run import RunCost, dollars, run_cost, usd
from fabricplan.cost.tco import CostError, FabricCost, fabric_cost, scenario_design

__all__ = [
    "CostAssumptions",
    "CostError",
    "FabricCost",
    "RunCost",
    "dollars",
    "fabric_cost",
    "load_assumptions",
    "run_cost",
    "scenario_design",
    "usd",
]
