"""The ``--congestion`` option of the commands that price a workload on a network (``step``,
``advise``, ``claims``, ``validate``): which network backend prices congestion. Light: it
names the backends without importing the simulator."""

from __future__ import annotations

import typer

from fabricplan.cli.output import fail_with
from fabricplan.congestion.network_backend import BACKEND_NAMES, DEFAULT_BACKEND, NetworkBackend

# None (not given) is the default backend; commands that must tell "not given" apart (a
# deprecated alias, a suite without congestion) can.
CONGESTION_OPT = typer.Option(
    None,
    "--congestion",
    metavar="|".join(BACKEND_NAMES),
    help=f"How congestion of traffic that crosses the network is priced: flow (the flow-level "
    f"simulator), closed-form (the ECMP collision law: ring and tree traffic on Clos fabrics "
    f"with hashed routing), none (an ideal fabric). Default: {DEFAULT_BACKEND.name}.",
    show_default=False,
)


def backend_from(name: str | None, as_json: bool) -> NetworkBackend:
    """The backend ``--congestion`` names (the default when not given); an unknown name exits
    with code 2 and the known ones."""
    from fabricplan.ops import BadInput
    from fabricplan.ops.options import backend_named

    try:
        return backend_named(name)
    except BadInput as exc:
        fail_with(exc, as_json)


def backend_note(b: NetworkBackend) -> str | None:
    """A line for tables priced by another backend than the default (None for the default, so
    that its tables stay as they were)."""
    if b == DEFAULT_BACKEND:
        return None
    return f"[dim]congestion priced by the {b.name} backend (--congestion {b.name})[/]"
