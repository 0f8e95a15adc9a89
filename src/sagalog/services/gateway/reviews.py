"""``/reviews``: the old gates page's address, kept as a redirect to the console's inbox.

The page it replaces took the API key as ``?api_key=``, so the key sat in browser
history, access logs and screenshots. The console signs a person in once (a session
cookie) and never puts a key in a URL. A bookmark of ``/reviews?api_key=...`` still
lands on the inbox, by way of the sign-in page; the key in it is dropped, not used,
so a leaked bookmark opens nothing.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import RedirectResponse

from sagalog.services.gateway.console.paths import GATES

HEADERS = {"Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}
"""The URL that came in may hold a key: it must not travel on in a Referer header."""


def reviews_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/reviews")
    def reviews() -> RedirectResponse:
        return RedirectResponse(GATES, status_code=301, headers=HEADERS)

    return router
