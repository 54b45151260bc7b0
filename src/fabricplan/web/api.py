"""The JSON API: one route per command, each answering what the command's ``--json`` prints.

A request whose answer is kept (the same operation and request before) is answered at once;
any other is computed in the server's thread pool, so the server stays responsive while one
computes. A computation holds the planner's lock: the models run one at a time (they are
CPU-bound; two at once would only share the cores).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Form, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel

from fabricplan.ops import BadInput, jsonable
from fabricplan.web import service
from fabricplan.web.cache import Answer, AnswerCache, request_key
from fabricplan.web.models import (
    AdviseRequest,
    CollectiveRequest,
    ErrorDoc,
    GradeForm,
    GradeOptions,
    ReportRequest,
    ScenarioRequest,
    StepRequest,
    TopologyRequest,
)

router = APIRouter(prefix="/api")

BAD_INPUT = {
    422: {
        "model": ErrorDoc,
        "description": "Bad input: each field, its value and what is allowed.",
    },
    413: {"model": ErrorDoc, "description": "The request body is over its size limit."},
}


class FairLock:
    """A lock taken in the order it was asked for: under load, no request waits behind others
    that arrived after it (a plain lock lets some wait many turns)."""

    def __init__(self) -> None:
        self._turn = threading.Condition()
        self._next = self._serving = 0

    def __enter__(self) -> None:
        with self._turn:
            ticket = self._next
            self._next += 1
            self._turn.wait_for(lambda: self._serving == ticket)

    def __exit__(self, *exc: object) -> None:
        with self._turn:
            self._serving += 1
            self._turn.notify_all()


class Planner:
    """What the routes share: the catalog, the answers kept, and the lock the models run under."""

    def __init__(self, catalog: Any, cache: AnswerCache) -> None:
        self.catalog, self.cache = catalog, cache
        self.lock = FairLock()

    async def answer(
        self,
        operation: str,
        key_data: Any,
        compute: Callable[[], Any],
        *extra: bytes,
        media_type: str = "application/json",
    ) -> Response:
        key = request_key(operation, key_data, *extra)
        found = self.cache.peek(key)  # a repeat is answered here, without a thread
        if found is None:
            found = await run_in_threadpool(
                self.cache.get_or_compute, key, lambda: self._run(compute, media_type)
            )
        return Response(found.body, status_code=found.status, media_type=found.media_type)

    def _run(self, compute: Callable[[], Any], media_type: str) -> Answer:
        from fabricplan.cost import CostError
        from fabricplan.workload import WorkloadError

        try:
            with self.lock:
                result = compute()
        except BadInput as exc:
            doc = exc.to_dict()
            for shown, problem in zip(doc["problems"], exc.problems, strict=True):
                shown["text"] = str(problem)  # the line the command prints for it
            return Answer(422, _json(doc))
        except (WorkloadError, CostError) as exc:  # the commands' bad input too (exit 2)
            return Answer(422, _json({"error": str(exc), "problems": []}))
        if isinstance(result, str):
            return Answer(200, result.encode(), media_type)
        return Answer(200, _json(result))


def _json(doc: Any) -> bytes:
    return json.dumps(jsonable(doc), separators=(",", ":")).encode()


def _planner(request: Request) -> Planner:
    return request.app.state.planner


def _dump(req: BaseModel) -> dict[str, Any]:
    return req.model_dump(mode="json")


@router.post("/scenario/check", responses=BAD_INPUT)
async def scenario_check(req: ScenarioRequest, request: Request) -> Response:
    """Validate a scenario: `fabricplan scenario check --json` (the resolved scenario and its
    warnings), or 422 with every problem: the field, the value and what is allowed."""
    p = _planner(request)
    return await p.answer("check", _dump(req), lambda: service.check(req, p.catalog))


@router.post("/step", responses=BAD_INPUT)
async def step(req: StepRequest, request: Request) -> Response:
    """Step time, tokens/s, MFU, time-to-train and the breakdown per fabric: `fabricplan step
    --json`."""
    p = _planner(request)
    return await p.answer("step", _dump(req), lambda: service.step(req, p.catalog))


@router.post("/advise", responses=BAD_INPUT)
async def advise(req: AdviseRequest, request: Request) -> Response:
    """Compare the scenario's fabrics and recommend one: `fabricplan advise --json`."""
    p = _planner(request)
    return await p.answer("advise", _dump(req), lambda: service.advise(req, p.catalog))


@router.post("/collective", responses=BAD_INPUT)
async def collective(req: CollectiveRequest, request: Request) -> Response:
    """The nccl-tests table a cluster should produce: `fabricplan collective --json`."""
    p = _planner(request)
    return await p.answer("collective", _dump(req), lambda: service.collective(req, p.catalog))


@router.post("/topology", responses=BAD_INPUT)
async def topology(req: TopologyRequest, request: Request) -> Response:
    """Size a fabric: `fabricplan topology --json` (one design, or {"designs": [...]} for a
    scenario's several fabrics)."""
    p = _planner(request)
    return await p.answer("topology", _dump(req), lambda: service.topology(req, p.catalog))


@router.post("/grade", responses=BAD_INPUT)
async def grade(form: Annotated[GradeForm, Form()], request: Request) -> Response:
    """Grade nccl-tests output against what the fabric should deliver: `fabricplan grade
    --json`. The log is an upload (`log`) or text (`log_text`), the options form fields."""
    if (form.log is None) == (form.log_text is None):
        doc = {
            "error": "give the log as an upload (log) or as text (log_text), not both",
            "problems": [{"field": "log", "message": "exactly one of log and log_text"}],
        }
        return Response(_json(doc), status_code=422, media_type="application/json")
    data = await form.log.read() if form.log is not None else (form.log_text or "").encode()
    opts = GradeOptions.model_validate(form.model_dump(exclude={"log", "log_text"}))
    p = _planner(request)
    return await p.answer("grade", _dump(opts), lambda: service.grade(data, opts, p.catalog), data)


@router.post(
    "/report",
    responses={**BAD_INPUT, 200: {"content": {"text/html": {}}, "description": "The report."}},
    response_class=Response,
)
async def report(req: ReportRequest, request: Request) -> Response:
    """The advice as one self-contained HTML page (`fabricplan report`), as a download."""
    p = _planner(request)
    found = await p.answer(
        "report", _dump(req), lambda: service.report(req, p.catalog), media_type="text/html"
    )
    if found.status_code == 200:
        found.headers["content-disposition"] = 'attachment; filename="fabricplan-report.html"'
    return found


@router.get("/options")
def options(request: Request) -> dict[str, Any]:
    """The catalog ids the scenario form offers: GPUs, fabrics, models, designs."""
    from fabricplan.scenario.models import MATURITIES
    from fabricplan.topology.layout import DESIGNS

    cat = _planner(request).catalog
    return {
        "gpu": cat.ids("gpu"),
        "fabric": [
            {
                "id": f,
                "family": cat.fabric(f).family,
                "line_rate_gbps": cat.fabric(f).line_rate_gbps,
            }
            for f in cat.ids("fabric")
        ],
        "model": cat.ids("model"),
        "design": list(DESIGNS),
        "network_maturity": list(MATURITIES),
    }
