"""The application: the API's routes, the page and its two files, the limits and the headers."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response

from fabricplan import __version__
from fabricplan.scenario.errors import Problem
from fabricplan.web.api import Planner, router
from fabricplan.web.cache import MAX_ENTRIES, AnswerCache
from fabricplan.web.limits import MAX_JSON_BYTES, MAX_UPLOAD_BYTES, BodyLimit

STATIC = Path(__file__).parent / "static"
# The page's files, by the name the page asks for them: nothing else is served from disk.
PAGE_FILES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "demo.yaml": "text/yaml; charset=utf-8",  # the example the page opens with
}
# Everything the page loads comes from this server; nothing runs inline.
SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; img-src 'self' data:; object-src 'none'; "
        b"base-uri 'none'; frame-ancestors 'none'; form-action 'self'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]


def create_app(catalog: Any = None, *, cache_entries: int = MAX_ENTRIES) -> FastAPI:
    """The web planner over ``catalog`` (the default catalog when None)."""
    from fabricplan.catalog import default_catalog

    app = FastAPI(
        title="fabricplan",
        version=__version__,
        summary="InfiniBand, RoCEv2 or Ethernet for a GPU cluster: the command line's operations "
        "over HTTP. A scenario is sent as its YAML text with --set style overrides.",
        docs_url=None,  # the interactive pages load scripts from elsewhere; the schema is enough
        redoc_url=None,
    )
    app.state.planner = Planner(catalog or default_catalog(), AnswerCache(cache_entries))
    app.include_router(router)
    app.add_exception_handler(RequestValidationError, _invalid_request)
    files = {name: (STATIC / name).read_bytes() for name in PAGE_FILES}

    @app.get("/", include_in_schema=False)
    def page() -> Response:
        return Response(files["index.html"], media_type=PAGE_FILES["index.html"])

    @app.get("/static/{name}", include_in_schema=False)
    def static(name: str) -> Response:
        if name not in files or name == "index.html":
            return Response(status_code=404)
        return Response(files[name], media_type=PAGE_FILES[name])

    app.add_middleware(SecurityHeaders)
    app.add_middleware(BodyLimit, limits={"/api/grade": MAX_UPLOAD_BYTES}, default=MAX_JSON_BYTES)
    return app


# The extra catalog file `fabricplan serve --catalog` names, for the worker processes it starts.
CATALOG_ENV = "FABRICPLAN_SERVE_CATALOG"


def create_app_from_environment() -> FastAPI:
    """The application each worker process of `fabricplan serve --workers N` builds (with the
    catalog file in :data:`CATALOG_ENV`, set by the command, if any)."""
    from fabricplan.catalog import load_catalog

    path = os.environ.get(CATALOG_ENV)
    return create_app(load_catalog([Path(path)]) if path else None)


def _field(loc: tuple[Any, ...]) -> str:
    """('body', 'set', 3) -> 'set[3]': the request field a validation error is about."""
    out = ""
    for part in loc[1:] if loc and loc[0] == "body" else loc:
        out += f"[{part}]" if isinstance(part, int) else ("." if out else "") + str(part)
    return out or "body"


async def _invalid_request(request: Request, exc: Exception) -> JSONResponse:
    """A request the models refuse: 422 with each field, its value and what is allowed, in the
    words the scenario checks use."""
    from fabricplan.inputs import describe_error
    from fabricplan.ops import jsonable

    assert isinstance(exc, RequestValidationError)
    problems = []
    for err in exc.errors():
        field = _field(tuple(err.get("loc", ())))
        if err["type"] == "missing":
            problems.append(Problem(field, describe_error(err)))
        else:
            problems.append(Problem(field, describe_error(err), err.get("input")))
    n = len(problems)
    doc = {
        "error": f"{n} problem{'s' if n != 1 else ''} in the request",
        "problems": [{**p.to_dict(), "text": str(p)} for p in problems],
    }
    return JSONResponse(jsonable(doc), status_code=422)


class SecurityHeaders:
    """ASGI middleware adding :data:`SECURITY_HEADERS` to every response."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
            await send(message)

        await self.app(scope, receive, with_headers)
