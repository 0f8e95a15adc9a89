"""An HTML form's fields, read without a multipart library: the console's forms are
small and urlencoded (what a browser and htmx send for a form without files)."""

from __future__ import annotations

from urllib.parse import parse_qs

from fastapi import Request
from pydantic import ValidationError

from sagalog.services.gateway.exceptions import BadQuery, MalformedBody


def form_fields(body: bytes, content_type: str) -> dict[str, str]:
    """A urlencoded form's fields, the last value of each (what a browser sends).

    Raises:
        MalformedBody: the body is not ``application/x-www-form-urlencoded`` (400).
    """
    if not content_type.startswith("application/x-www-form-urlencoded"):
        raise MalformedBody(
            "the console takes HTML forms (application/x-www-form-urlencoded); scripts "
            "should use the JSON API under /v1 with an X-API-Key header"
        )
    parsed = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {name: values[-1] for name, values in parsed.items()}


def invalid_form(exc: ValidationError) -> BadQuery:
    """A form pydantic refused, as the 422 the page shows."""
    problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
    refusal = BadQuery(f"the form is incomplete or wrong: {problems}; nothing was done")
    refusal.status = 422
    return refusal


async def read_form(request: Request) -> dict[str, str]:
    """The fields of the form ``request`` posts (``form_fields``)."""
    return form_fields(await request.body(), request.headers.get("content-type", ""))
