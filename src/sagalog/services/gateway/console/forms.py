"""An HTML form's fields, read without a multipart library: the console's forms are
small and urlencoded (what a browser and htmx send for a form without files)."""

from __future__ import annotations

from urllib.parse import parse_qs

from sagalog.services.gateway.exceptions import MalformedBody


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
