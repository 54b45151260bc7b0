"""Load the catalog's TOML data files into frozen, validated records.

The packaged files live in ``fabricplan/catalog/data``; extra files (for example a fabric
definition written by calibration) can be layered on top and may add or replace entries.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from fabricplan.catalog.models import (
    Cable,
    Entry,
    Fabric,
    Gpu,
    Nic,
    Switch,
    Transceiver,
)
from fabricplan.catalog.transformer import CATALOG_KINDS, Model
from fabricplan.inputs import (
    MIB,
    InputTooLarge,
    LimitError,
    describe_error,
    read_capped,
    read_user_text,
    short_repr,
)

E = TypeVar("E", bound=Entry)

# Plural and common spellings a user may type for a kind.
KIND_ALIASES: dict[str, str] = {
    **{k: k for k in CATALOG_KINDS},
    **{k + "s": k for k in CATALOG_KINDS},
    "switches": "switch",
    "optic": "transceiver",
    "optics": "transceiver",
    "hca": "nic",
    "hcas": "nic",
}


MAX_IDS_IN_MESSAGE = 20  # beyond this an error message stops being readable
# Largest catalog file read, in bytes: the packaged files are 9-13 KB each and an overlay from
# `calibrate` is 1 KB; a few MB of TOML is not a catalog, and refusing it bounds what it costs.
MAX_CATALOG_FILE_BYTES = 4 * MIB


class CatalogError(ValueError):
    """A catalog data file is malformed; the message names the file, entry and field."""


class UnknownIdError(KeyError):
    """An id that is not in the catalog (for the asked kind)."""

    def __init__(self, kind: str, value: str, known: Iterable[str]) -> None:
        self.kind, self.value, self.known = kind, value, sorted(known)
        super().__init__(value)

    @property
    def hint(self) -> str:
        """' (did you mean ...?)' when a known id is close to the given one, else ''."""
        close = difflib.get_close_matches(self.value, self.known, n=1)
        return f" (did you mean '{close[0]}'?)" if close else ""

    @property
    def known_text(self) -> str:
        """The known ids, or a pointer to the listing when there are too many to read."""
        if len(self.known) <= MAX_IDS_IN_MESSAGE:
            return f"known: {', '.join(self.known)}"
        return "see `fabricplan catalog list` for the ids"

    def __str__(self) -> str:
        return f"unknown {self.kind} '{self.value}'{self.hint}; {self.known_text}"


def resolve_kind(kind: str) -> str:
    """Map a user-typed kind ('fabrics', 'optics', ...) to its catalog kind, or raise."""
    try:
        return KIND_ALIASES[kind.strip().lower()]
    except KeyError:
        raise UnknownIdError("kind", kind, CATALOG_KINDS) from None


# eq=False: a catalog is one loaded set of files, equal only to itself, and hashable so that
# caches can key on it (its mappings are not hashable).
@dataclass(frozen=True, eq=False)
class Catalog:
    """All catalog entries, indexed by kind and by id (ids are unique across kinds)."""

    by_kind: Mapping[str, Mapping[str, Entry]]
    files: tuple[str, ...] = field(default=())

    def entries(self, kind: str | None = None) -> list[Entry]:
        kinds = [resolve_kind(kind)] if kind else list(CATALOG_KINDS)
        return [e for k in kinds for e in self.by_kind.get(k, {}).values()]

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.entries())

    def ids(self, kind: str) -> list[str]:
        return list(self.by_kind.get(resolve_kind(kind), {}))

    def with_entry(self, entry: Entry) -> Catalog:
        """A copy with ``entry`` replacing (or adding) the entry of the same kind and id."""
        kind = type(entry).KIND
        return replace(
            self, by_kind={**self.by_kind, kind: {**self.by_kind.get(kind, {}), entry.id: entry}}
        )

    def get(self, entry_id: str) -> Entry:
        for entries in self.by_kind.values():
            if entry_id in entries:
                return entries[entry_id]
        raise UnknownIdError("catalog id", entry_id, (e.id for e in self))

    def _typed(self, cls: type[E], entry_id: str) -> E:
        entries = self.by_kind.get(cls.KIND, {})
        if entry_id not in entries:
            raise UnknownIdError(cls.KIND, entry_id, entries)
        entry = entries[entry_id]
        assert isinstance(entry, cls)
        return entry

    def fabric(self, entry_id: str) -> Fabric:
        return self._typed(Fabric, entry_id)

    def switch(self, entry_id: str) -> Switch:
        return self._typed(Switch, entry_id)

    def nic(self, entry_id: str) -> Nic:
        return self._typed(Nic, entry_id)

    def cable(self, entry_id: str) -> Cable:
        return self._typed(Cable, entry_id)

    def transceiver(self, entry_id: str) -> Transceiver:
        return self._typed(Transceiver, entry_id)

    def gpu(self, entry_id: str) -> Gpu:
        return self._typed(Gpu, entry_id)

    def model(self, entry_id: str) -> Model:
        return self._typed(Model, entry_id)


def _packaged_files() -> list[Path]:
    data = resources.files("fabricplan.catalog") / "data"
    return sorted(Path(str(p)) for p in data.iterdir() if p.name.endswith(".toml"))


def _read_toml(path: Path, packaged: bool = False) -> dict[str, Any]:
    """A catalog file's TOML, every failure a CatalogError in our words. Only overlays take
    the user's file cap: the packaged files are ours."""
    try:
        if packaged:  # ours: its own cap, whatever the environment asks
            text = read_capped(path, MAX_CATALOG_FILE_BYTES, what="the file").decode("utf-8")
        else:
            text = read_user_text(path, MAX_CATALOG_FILE_BYTES)
        return tomllib.loads(text)
    except InputTooLarge as exc:
        raise CatalogError(f"{path}: {exc}; a catalog file is tens of KB") from None
    except LimitError as exc:
        raise CatalogError(str(exc)) from None
    except UnicodeDecodeError as exc:
        raise CatalogError(f"{path}: not UTF-8 text (byte {exc.start + 1})") from None
    except OSError as exc:
        raise CatalogError(f"{path}: cannot read: {exc.strerror or type(exc).__name__}") from None
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"{path}: invalid TOML: {exc}") from None
    except RecursionError:
        # catalog entries nest two levels (a fabric's ranges); the reader gives up near 1,000
        raise CatalogError(f"{path}: invalid TOML: nested too deeply for a catalog") from None


def _parse_file(path: Path, packaged: bool = False) -> list[Entry]:
    raw = _read_toml(path, packaged)
    out: list[Entry] = []
    for kind, items in raw.items():
        cls = CATALOG_KINDS.get(kind)
        if cls is None or not isinstance(items, list):
            raise CatalogError(
                f"{path}: top-level key {short_repr(kind)} must be one of "
                f"{', '.join(CATALOG_KINDS)} as an array of tables ([[{kind}]])"
            )
        for i, item in enumerate(items):
            try:
                out.append(cls.model_validate(item))
            except ValidationError as exc:
                label = item.get("id", f"#{i + 1}") if isinstance(item, dict) else f"#{i + 1}"
                problems = "; ".join(
                    f"{'.'.join(map(str, err['loc'])) or '(entry)'}: {describe_error(err)}"
                    + (
                        ""
                        if err["type"] == "missing" or not err["loc"]
                        else f" (got {short_repr(err['input'])})"
                    )
                    for err in exc.errors()
                )
                raise CatalogError(f"{path}: {kind} {short_repr(label)}: {problems}") from None
    return out


def _check_references(cat: Catalog) -> None:
    """Ids that one entry names must exist and fit (a fabric's NIC speaks its link layer)."""
    problems: list[str] = []
    for f in cat.by_kind["fabric"].values():
        assert isinstance(f, Fabric)
        nic = cat.by_kind["nic"].get(f.default_nic)
        if nic is None:
            problems.append(f"fabric '{f.id}': default_nic '{f.default_nic}' is not a nic")
        elif f.link_layer not in nic.link_layers:  # type: ignore[attr-defined]
            problems.append(f"fabric '{f.id}': nic '{nic.id}' does not speak {f.link_layer}")
        sw = cat.by_kind["switch"].get(f.default_switch)
        if sw is None:
            problems.append(f"fabric '{f.id}': default_switch '{f.default_switch}' is not a switch")
        elif sw.link_layer != f.link_layer:  # type: ignore[attr-defined]
            problems.append(f"fabric '{f.id}': switch '{sw.id}' is not {f.link_layer}")
    for g in cat.by_kind["gpu"].values():
        assert isinstance(g, Gpu)
        if g.node.nic not in cat.by_kind["nic"]:
            problems.append(f"gpu '{g.id}': node.nic '{g.node.nic}' is not a nic")
    if problems:
        raise CatalogError("; ".join(problems))


def load_catalog(extra: Iterable[str | Path] = (), *, packaged: bool = True) -> Catalog:
    """Load the packaged catalog, then ``extra`` files in order (later entries replace earlier)."""
    base = _packaged_files() if packaged else []
    files = base + [Path(p) for p in extra]
    by_kind: dict[str, dict[str, Entry]] = {k: {} for k in CATALOG_KINDS}
    owner: dict[str, tuple[str, Path]] = {}
    for path in files:
        for entry in _parse_file(path, packaged=path in base):
            if entry.id in owner:
                prev_kind, prev_path = owner[entry.id]
                if prev_kind != entry.KIND:
                    raise CatalogError(
                        f"{path}: id '{entry.id}' is already a {prev_kind}; "
                        "ids are unique across kinds"
                    )
                if prev_path == path or path in base:
                    raise CatalogError(f"{path}: {entry.KIND} '{entry.id}' is defined twice")
            by_kind[entry.KIND][entry.id] = entry
            owner[entry.id] = (entry.KIND, path)
    cat = Catalog(by_kind=by_kind, files=tuple(str(p) for p in files))
    _check_references(cat)
    return cat


@cache
def default_catalog() -> Catalog:
    """The packaged catalog, loaded once per process."""
    return load_catalog()
