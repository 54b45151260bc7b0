"""Options several commands share, checked as the commands check them: the network backend
``--congestion`` names and the catalog ``--catalog`` adds. Light: nothing here imports the
simulator or the model."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from fabricplan.ops import BadInput

if TYPE_CHECKING:
    from fabricplan.catalog import Catalog
    from fabricplan.congestion.network_backend import NetworkBackend


def backend_named(name: str | None) -> NetworkBackend:
    """The backend ``name`` names (the default for None); BadInput naming the known ones."""
    from fabricplan.congestion.network_backend import BACKEND_NAMES, DEFAULT_BACKEND, backend

    if name is None:
        return DEFAULT_BACKEND
    if name not in BACKEND_NAMES:
        raise BadInput(
            f"--congestion: unknown backend '{name}'; allowed: {', '.join(BACKEND_NAMES)}"
        )
    return backend(name)


def catalog_with(path: str | Path | None) -> Catalog:
    """The default catalog, with the file at ``path`` layered on it when given; BadInput for a
    file that is not a catalog."""
    from fabricplan.catalog import CatalogError, default_catalog, load_catalog

    if path is None:
        return default_catalog()
    try:
        return load_catalog([Path(path)])
    except CatalogError as exc:
        raise BadInput(f"catalog file: {exc}") from None
