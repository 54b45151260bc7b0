"""Sweeps: a scenario evaluated over a grid of its fields, every combination at once.

- :mod:`.grid`: ``--grid`` specifications, typed and range-checked by the scenario's fields;
- :mod:`.variants`: each combination as a scenario, dependent fields following, or skipped
  with the reason;
- :mod:`.engine`: variants in, typed records out, each content evaluated once, on an executor
  (:mod:`.executors`: this process, local processes, Ray);
- :mod:`.store`: the results in DuckDB, resumable after a crash;
- :mod:`.run`: ``sweep run`` as a function.

Nothing here imports DuckDB, pandas or Ray until it is used.
"""
