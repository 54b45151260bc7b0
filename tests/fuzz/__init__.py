"""Fuzzing the command line with hostile input: strategies, a forked runner, a report."""
