"""Workload layer: transformer training and inference -> collectives per step -> step time.

>>> from fabricplan.workload import evaluate_scenario
"""

from fabricplan.workload.evaluate import FabricResult, WorkloadError, evaluate_scenario
from fabricplan.workload.plan import Hardware, Plans
from fabricplan.workload.result import ServingFigures, StepFigures, TrainingFigures
from fabricplan.workload.shapes import Shape, shape_of
from fabricplan.workload.step import Step
from fabricplan.workload.training import training_step

__all__ = [
    "FabricResult",
    "Hardware",
    "Plans",
    "ServingFigures",
    "Shape",
    "Step",
    "StepFigures",
    "TrainingFigures",
    "WorkloadError",
    "evaluate_scenario",
    "shape_of",
    "training_step",
]
