"""Plan search: the fastest training plan that fits, per fabric, from every plan of a space.

>>> from fabricplan.planning import search_scenario
"""

from fabricplan.planning.scenario import job_of, search_scenario
from fabricplan.planning.search import (
    Alternative,
    Candidate,
    Reason,
    SearchResult,
    evaluate,
    summarize,
)
from fabricplan.planning.space import Job, SearchSpace, batches, space_size

__all__ = [
    "Alternative",
    "Candidate",
    "Job",
    "Reason",
    "SearchResult",
    "SearchSpace",
    "batches",
    "evaluate",
    "job_of",
    "search_scenario",
    "space_size",
    "summarize",
]
