"""Sourced facts: fabrics, switches, NICs, cables and optics, GPUs and models.

>>> from fabricplan.catalog import default_catalog
>>> cat = default_catalog()
>>> cat.fabric("ib-ndr").line_rate_gbps
400.0
"""

from fabricplan.catalog.architecture import ParamCount, count_params
from fabricplan.catalog.loader import (
    Catalog,
    CatalogError,
    UnknownIdError,
    default_catalog,
    load_catalog,
    resolve_kind,
)
from fabricplan.catalog.models import (
    Cable,
    Entry,
    Fabric,
    Gpu,
    Nic,
    Price,
    Range,
    Switch,
    Transceiver,
)
from fabricplan.catalog.transformer import CATALOG_KINDS, Model
from fabricplan.catalog.write import entries_to_toml

__all__ = [
    "CATALOG_KINDS",
    "Cable",
    "Catalog",
    "CatalogError",
    "Entry",
    "Fabric",
    "Gpu",
    "Model",
    "Nic",
    "ParamCount",
    "Price",
    "Range",
    "Switch",
    "Transceiver",
    "UnknownIdError",
    "count_params",
    "default_catalog",
    "entries_to_toml",
    "load_catalog",
    "resolve_kind",
]
