"""Bounds on what one request may send: the body's size, before any of it is parsed."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from fabricplan.inputs import MIB

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# A JSON body holds a scenario (a few KB of YAML; the loader refuses files over 1 MiB) and a few
# overrides: 1 MiB is generous. An upload holds an nccl-tests log: a 2-node sweep with NCCL's
# INFO lines is 50-500 KB, a long file of many runs a few MB.
MAX_JSON_BYTES = 1 * MIB
MAX_UPLOAD_BYTES = 8 * MIB


def _too_large(limit: int) -> bytes:
    message = f"the request body is larger than {limit / MIB:g} MiB, more than this endpoint reads"
    doc = {"error": message, "problems": [{"field": "body", "message": message}]}
    return json.dumps(doc).encode()


class BodyLimit:
    """ASGI middleware: a request whose body is over its path's limit is answered 413 before
    the application sees it (by its Content-Length when it states one, else by counting as it
    arrives); the body is read whole, then handed on."""

    def __init__(self, app: ASGIApp, limits: Mapping[str, int], default: int) -> None:
        self.app, self.limits, self.default = app, dict(limits), default

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limits.get(scope["path"], self.default)
        headers = dict(scope.get("headers") or [])
        stated = headers.get(b"content-length")
        if stated is not None:
            if not stated.strip().isdigit():
                await _answer(send, 400, b'{"error": "invalid Content-Length", "problems": []}')
                return
            if int(stated) > limit:
                await _answer(send, 413, _too_large(limit))
                return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            body += message.get("body", b"")
            if len(body) > limit:
                await _answer(send, 413, _too_large(limit))
                return
            if not message.get("more_body", False):
                break
        whole = {"type": "http.request", "body": bytes(body), "more_body": False}
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return whole
            return await receive()

        await self.app(scope, replay, send)


async def _answer(send: Send, status: int, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
