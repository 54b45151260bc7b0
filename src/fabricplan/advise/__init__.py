"""Decision layer: compare a scenario's fabrics end to end and recommend one, with reasons,
sensitivity, uncertainty and the questions to ask a provider."""

from fabricplan.advise.decide import Advice, CostSamples, advise
from fabricplan.advise.questions import provider_questions

__all__ = ["Advice", "CostSamples", "advise", "provider_questions"]
