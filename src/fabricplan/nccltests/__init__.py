"""Parse, grade and calibrate against measured nccl-tests output."""

from fabricplan.nccltests.parse import ParseError, Result, Run, parse, parse_file

__all__ = ["ParseError", "Result", "Run", "parse", "parse_file"]
