"""What a webhook call must carry: pure checks, no HTTP."""

from __future__ import annotations

import pytest

from sagalog.services.gateway.exceptions import BodyTooLarge, MalformedBody
from sagalog.services.gateway.settings import GatewaySettings
from sagalog.services.gateway.webhooks import WebhookCall, read_webhook, webhook_event_id


def call(body: bytes, *, kind: str = "signature.completed", **kw: object) -> WebhookCall:
    options: dict[str, object] = {
        "workflow_id": None,
        "source": None,
        "default_source": "sagalog/gateway",
        "max_bytes": 100,
        **kw,
    }
    return read_webhook(kind, body, **options)  # type: ignore[arg-type]


def test_the_body_is_kept_verbatim_and_the_url_names_the_workflow() -> None:
    body = b'{"b": 1,  "a": [true]}'
    got = call(body, workflow_id="wf-1", source=" docusign ")
    assert got == WebhookCall("signature.completed", "wf-1", "docusign", body.decode())


def test_a_json_object_may_name_its_workflow() -> None:
    assert call(b'{"workflow_id": "wf-9"}').workflow_id == "wf-9"
    assert call(b'{"workflow_id": "wf-9"}', workflow_id="wf-1").workflow_id == "wf-1"


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"", "empty"),
        (b"   ", "empty"),
        (b"{", "not valid JSON: Expecting property name"),
        (b"\xff\xfe", "not UTF-8"),
        (b"[1]", "names no workflow"),
        (b'{"workflow_id": 7}', "names no workflow"),
        (b'{"workflow_id": ""}', "names no workflow"),
    ],
)
def test_malformed_bodies_are_refused_with_what_to_fix(body: bytes, words: str) -> None:
    with pytest.raises(MalformedBody, match=words) as caught:
        call(body)
    assert caught.value.status == 400


@pytest.mark.parametrize("kind", ["", "Upper", "has space", "-leading", "x" * 65, "a/b"])
def test_a_kind_must_be_a_plain_name(kind: str) -> None:
    with pytest.raises(MalformedBody, match="not a valid name"):
        call(b"{}", kind=kind, workflow_id="wf-1")


def test_an_oversize_body_is_413_before_it_is_parsed() -> None:
    with pytest.raises(BodyTooLarge, match="101 bytes, over the gateway's limit of 100") as caught:
        call(b"{" + b" " * 99 + b"}", workflow_id="wf-1")  # valid JSON, one byte too many
    assert caught.value.status == 413


def test_an_idempotency_key_fixes_the_event_id() -> None:
    one = call(b"{}", workflow_id="wf-1")
    assert webhook_event_id(one, None) is None
    assert webhook_event_id(one, "k") == webhook_event_id(one, "k")
    assert webhook_event_id(one, "k") != webhook_event_id(one, "k2")
    other = call(b"{}", workflow_id="wf-2")
    assert webhook_event_id(one, "k") != webhook_event_id(other, "k")


def test_api_keys_are_read_comma_separated_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GATEWAY_API_KEYS", "k1, k2,,")
    monkeypatch.setenv("GATEWAY_TRACKER_APP_ID", "tracker-x")
    settings = GatewaySettings()
    assert [k.get_secret_value() for k in settings.api_keys] == ["k1", "k2"]
    assert settings.records_changelog == "tracker-x-records-changelog"
    assert "k1" not in repr(settings)


KEYS = frozenset({"filing_number", "order_number"})


def test_a_declared_correlation_key_may_name_the_workflow_instead_of_its_id() -> None:
    got = call(b"{}", correlation={"filing_number": "F-1"}, keys=KEYS)
    assert (got.workflow_id, got.correlation, got.target) == (
        None,
        ("filing_number", "F-1"),
        "filing_number=F-1",
    )
    keyed = webhook_event_id(got, "k-1")
    assert keyed is not None and keyed != webhook_event_id(
        call(b"{}", correlation={"filing_number": "F-2"}, keys=KEYS), "k-1"
    )


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (
            {"correlation": {"color": "red"}},
            "unknown query parameter(s) ['color']: a webhook takes ?workflow_id= or one "
            "correlation key its flows declare (declared: filing_number, order_number)",
        ),
        (
            {"correlation": {"filing_number": "F-1", "order_number": "O-1"}},
            "names 2 correlation keys",
        ),
        ({"correlation": {"filing_number": ""}}, "needs a value of 1-256 characters"),
        (
            {"correlation": {"filing_number": "F-1"}, "workflow_id": "wf-1"},
            "names its workflow twice",
        ),
        ({}, "or ?<key>=<value> with a correlation key (filing_number, order_number)"),
    ],
)
def test_a_wrong_correlation_is_refused_naming_it(options: dict[str, object], words: str) -> None:
    with pytest.raises(MalformedBody) as refused:
        call(b"{}", keys=KEYS, **options)
    assert words in str(refused.value)
