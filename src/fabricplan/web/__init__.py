"""The web planner: ``fabricplan serve``.

A JSON API over the commands' operations (:mod:`fabricplan.ops`), with an OpenAPI schema at
``/openapi.json``, and a page that edits a scenario and shows the recommendation, its figures
and charts, grades an uploaded nccl-tests log and downloads the report. Everything it serves is
in this package: no request reaches another host, and none names a file on the server.

>>> from fabricplan.web import create_app  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fabricplan.web.app import create_app as create_app


def __getattr__(name: str) -> object:
    if name == "create_app":  # the web stack is imported only when asked for
        from fabricplan.web.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
