"""A sweep's results in one DuckDB table, ``results``: a row per combination and fabric (one
row, without a fabric, for a skipped combination).

Columns: ``combination`` (the combination's key) and ``combination_index`` (its place in the
grid), one column per swept key named by its key path (``cluster.gpus``), ``fabric``,
``status`` (ok | skipped), ``reason`` (why skipped), ``followed`` (dependent fields that
followed a swept one), the level's outputs (sweep.records), ``what``, ``fabricplan_version``,
``scenario_hash`` and ``time`` (UTC, when it was computed).

Resuming: each finished batch of combinations is written in one transaction, so after a crash
or ``kill -9`` the file holds whole combinations only (DuckDB replays its log on the next
open); a rerun reads the keys stored and evaluates only the others. Nothing is lost but the
batches in flight, and nothing is written twice.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabricplan import __version__
from fabricplan.sweep.records import Record, output_columns

if TYPE_CHECKING:
    import duckdb
    import pandas

    from fabricplan.sweep.grid import Axis

TABLE = "results"
_SQL_TYPES = {"int": "BIGINT", "float": "DOUBLE", "bool": "BOOLEAN", "text": "VARCHAR"}


class StoreError(ValueError):
    """A file that cannot take this sweep's rows, or is not a sweep's file."""


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def columns(axes: Sequence[Axis], what: str) -> list[tuple[str, str]]:
    """(name, SQL type) of every column of a sweep over ``axes`` at level ``what``."""
    head = [("combination", "VARCHAR"), ("combination_index", "BIGINT")]
    swept = [(a.key, _SQL_TYPES[a.kind]) for a in axes]
    status = [
        ("fabric", "VARCHAR"),
        ("status", "VARCHAR"),
        ("reason", "VARCHAR"),
        ("followed", "VARCHAR"),
    ]
    outputs = [(n, _SQL_TYPES[k]) for n, k in output_columns(what)]
    tail = [
        ("what", "VARCHAR"),
        ("fabricplan_version", "VARCHAR"),
        ("scenario_hash", "VARCHAR"),
        ("time", "TIMESTAMP"),
    ]
    return head + swept + status + outputs + tail


def cell(value: Any, kind: str) -> Any:
    """A swept value as its column holds it: lists (fabrics) as JSON text, anything in a text
    column as text."""
    if kind == "text" and not isinstance(value, str):
        return json.dumps(value)
    return value


def connect(path: Path, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    import duckdb

    try:
        return duckdb.connect(str(path), read_only=read_only)
    except duckdb.Error as exc:
        if read_only:  # a killed sweep's log is replayed by a writer only
            try:
                return duckdb.connect(str(path))
            except duckdb.Error:
                pass
        raise StoreError(f"{path}: cannot open as a DuckDB file ({exc})") from None


def point_cells(axes: Sequence[Axis], point: dict[str, Any]) -> tuple[Any, ...]:
    """A combination's swept values as their columns hold them."""
    return tuple(cell(point[a.key], a.kind) for a in axes)


def rows_of(r: Record, axes: Sequence[Axis], what: str) -> list[list[Any]]:
    """A record's rows, in :func:`columns` order: one per fabric, or one for a skipped
    combination (the store's rows, and the Python API's DataFrame of a sweep not stored)."""
    at = datetime.datetime.fromtimestamp(
        r.computed_at or datetime.datetime.now(datetime.UTC).timestamp(), datetime.UTC
    ).replace(tzinfo=None)
    head = [r.combination, r.index, *point_cells(axes, r.point)]
    tail = [what, __version__, r.scenario_hash, at]
    followed = "; ".join(r.followed) or None
    names = [n for n, _ in output_columns(what)]
    if not r.ok:
        return [[*head, None, "skipped", r.skipped, followed, *(None for _ in names), *tail]]
    return [
        [*head, o.fabric, "ok", None, followed, *(getattr(o.outputs, n) for n in names), *tail]
        for o in r.outcomes
    ]


class Store:
    """One sweep's table, opened to add rows."""

    def __init__(self, path: Path, axes: Sequence[Axis], what: str) -> None:
        self.path = Path(path)
        self.axes = list(axes)
        self.what = what
        self.columns = columns(axes, what)
        self.con = connect(self.path)
        self._prepare()
        names = ", ".join(quote(n) for n, _ in self.columns)
        marks = ", ".join("?" for _ in self.columns)
        self._insert = f"INSERT INTO {TABLE} ({names}) VALUES ({marks})"

    def _prepare(self) -> None:
        found = self.con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
            "ORDER BY ordinal_position",
            [TABLE],
        ).fetchall()
        if not found:
            body = ", ".join(f"{quote(n)} {t}" for n, t in self.columns)
            self.con.execute(f"CREATE TABLE {TABLE} ({body})")
            return
        have = [r[0] for r in found]
        want = [n for n, _ in self.columns]
        if have != want:
            keys = [n for n in have if "." in n] or ["none"]
            raise StoreError(
                f"{self.path} holds another sweep (swept keys {', '.join(keys)}; level "
                f"{self._level()}); this one sweeps {', '.join(a.key for a in self.axes)} at "
                f"level {self.what}: give another --out"
            )

    def _level(self) -> str:
        row = self.con.execute(f"SELECT any_value(what) FROM {TABLE}").fetchone()
        return str(row[0]) if row and row[0] else "unknown"

    def done(self) -> set[str]:
        """Keys of the combinations stored (ok or skipped)."""
        rows = self.con.execute(f"SELECT DISTINCT combination FROM {TABLE}").fetchall()
        return {r[0] for r in rows}

    def stored_points(self) -> dict[tuple[Any, ...], set[str]]:
        """Swept values -> the combination keys stored for them."""
        cols = ", ".join(quote(a.key) for a in self.axes)
        rows = self.con.execute(f"SELECT DISTINCT combination, {cols} FROM {TABLE}").fetchall()
        out: dict[tuple[Any, ...], set[str]] = {}
        for combo, *values in rows:
            out.setdefault(tuple(values), set()).add(combo)
        return out

    def point_cells(self, point: dict[str, Any]) -> tuple[Any, ...]:
        return point_cells(self.axes, point)

    def _rows(self, r: Record) -> list[list[Any]]:
        return rows_of(r, self.axes, self.what)

    def write(self, records: Sequence[Record]) -> None:
        """Add the records' rows in one transaction: all of them, or (killed midway) none."""
        rows = [row for r in records for row in self._rows(r)]
        if not rows:
            return
        self.con.execute("BEGIN TRANSACTION")
        try:
            self.con.executemany(self._insert, rows)
            self.con.execute("COMMIT")
        except BaseException:
            self.con.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self.con.close()


def read_only(path: Path) -> duckdb.DuckDBPyConnection:
    """A sweep's file for reading; StoreError when it is not one."""
    if not Path(path).is_file():
        raise StoreError(f"{path}: no such file")
    con = connect(Path(path), read_only=True)
    try:
        con.execute(f"SELECT combination FROM {TABLE} LIMIT 0")
    except Exception:
        con.close()
        raise StoreError(f"{path}: not a sweep's results (no '{TABLE}' table)") from None
    return con


def load(path: Path) -> pandas.DataFrame:
    """The results as a pandas DataFrame, in grid order (the Python API's way in)."""
    con = read_only(path)
    try:
        return con.execute(f"SELECT * FROM {TABLE} ORDER BY combination_index, fabric").df()
    finally:
        con.close()


def export(path: Path, out: Path, fmt: str) -> int:
    """Write the results to ``out`` as CSV or Parquet (DuckDB writes both); the rows written."""
    con = read_only(path)
    try:
        (n,) = con.execute(f"SELECT count(*) FROM {TABLE}").fetchone() or (0,)
        target = "'" + str(out).replace("'", "''") + "'"
        options = "FORMAT CSV, HEADER" if fmt == "csv" else "FORMAT PARQUET"
        con.execute(
            f"COPY (SELECT * FROM {TABLE} ORDER BY combination_index, fabric) TO {target} "
            f"({options})"
        )
        return int(n)
    finally:
        con.close()
