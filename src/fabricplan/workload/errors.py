"""The one error the workload layer raises for a plan it cannot price."""

from __future__ import annotations


class WorkloadError(ValueError):
    """A plan that cannot run or cannot be priced; the message says why and what would work."""
