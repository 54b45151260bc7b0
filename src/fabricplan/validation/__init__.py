"""Rerun every published measurement we compare against: predicted vs measured, and the error."""

from fabricplan.validation.nccl_runs import RunCheck, check_runs, load_manifest

__all__ = ["RunCheck", "check_runs", "load_manifest"]
