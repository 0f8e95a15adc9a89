"""The console's addresses, each written once: routes, templates and redirects use these."""

from __future__ import annotations

from urllib.parse import quote, urlencode, urlsplit

ROOT = "/console"
SIGN_IN = f"{ROOT}/sign-in"
SIGN_OUT = f"{ROOT}/sign-out"
WORKFLOWS = f"{ROOT}/workflows"
GATES = f"{ROOT}/gates"
GATE_DECISION = f"{GATES}/decision"
GATE_ROW = f"{GATES}/row"
GATES_ARRIVED = f"{GATES}/arrived"
LIVE = f"{ROOT}/live"
ANALYTICS = f"{ROOT}/analytics"
DEAD_LETTERS = f"{ROOT}/dead-letters"
STATIC = f"{ROOT}/static"


def workflow(workflow_id: str) -> str:
    """A workflow's page; any character of the id is escaped, ``/`` included."""
    return f"{WORKFLOWS}/{quote(workflow_id, safe='')}"


def live(workflow_id: str | None, *, since: int) -> str:
    """The server-sent events a live page listens to: one workflow's, or every one's
    (None); ``since``: the read model's change sequence the page was rendered at."""
    query = (
        {"since": str(since)}
        if workflow_id is None
        else {"workflow": workflow_id, "since": str(since)}
    )
    return f"{LIVE}?{urlencode(query)}"


def gate_row(workflow_id: str, gate: str, attempt: int) -> str:
    """One row of the gates inbox, as it is now (fetched again when its workflow changes).
    It names the gate, never its token: a token is a capability, kept out of URLs."""
    query = {"workflow_id": workflow_id, "gate": gate, "attempt": attempt}
    return f"{GATE_ROW}?{urlencode(query)}"


def dead_letter(position: str) -> str:
    """A dead letter's page; a position is ``topic/partition/offset`` and keeps its ``/``."""
    return f"{DEAD_LETTERS}/{quote(position, safe='/')}"


def local_target(target: str | None) -> str:
    """Where to go after signing in: ``target`` when it is a console page of this host,
    the overview otherwise, so a crafted sign-in link cannot send a person elsewhere."""
    if not target:
        return ROOT
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or "\\" in target:
        return ROOT
    if parts.path != ROOT and not parts.path.startswith(ROOT + "/"):
        return ROOT
    return target
