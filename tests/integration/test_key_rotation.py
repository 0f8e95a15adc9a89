"""Key rotation on the real broker: 10,000 subjects' keys re-wrapped under a new KEK,
one subject erased after, and every reader asked what it shows.

The keys start under KEK ``v0``, the wrapping derived from the key file as before KEK
sets, so the test also shows that data written before the change still opens after
it. The fast test writes the 10,000 keys itself and seals values under them; the
extended one runs the procurement fleet first, so ``sagalog audit --verify`` checks
the hash chain of real workflows of the erased requester after the rotation.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sagalog.errors import PersonalDataError
from sagalog.personal import ERASED
from sagalog.personal.cipher import personal_data
from sagalog.personal.envelope import seal
from sagalog.personal.keys import LocalKeyService, new_data_key
from sagalog.settings import ClientSettings

from .project import REPO, Project
from .requester_fleet import (
    ERASURES,
    audit_the_erased,
    erase,
    run_requesters,
    shown_requester,
    tailed_requests,
)

SUBJECTS = 10_000
REWRAPPED = re.compile(
    r"re-wrapped ([\d,]+) key\(s\) under KEK '(\S+)'.*\(([\d,]+)/s, ([\d.]+) s\)"
)


def _use_keys(
    monkeypatch: pytest.MonkeyPatch, project: Project, key_file: Path, kek_file: Path | None
) -> ClientSettings:
    monkeypatch.setenv("SAGALOG_PERSONAL_DATA_KEY_FILE", str(key_file))
    if kek_file is None:
        monkeypatch.delenv("SAGALOG_PERSONAL_DATA_KEK_FILE", raising=False)
    else:
        monkeypatch.setenv("SAGALOG_PERSONAL_DATA_KEK_FILE", str(kek_file))
    return project.settings.model_copy(
        update={
            "personal_data_key_file": str(key_file),
            "personal_data_kek_file": None if kek_file is None else str(kek_file),
        }
    )


def _rotate(project: Project) -> tuple[int, float]:
    """``sagalog keys rotate``: the keys it re-wrapped and its rate (keys/s)."""
    rotated = project.sagalog("keys", "rotate")
    assert rotated.exit_code == 0, rotated.output
    found = REWRAPPED.search(rotated.stdout)
    assert found, rotated.output
    return int(found[1].replace(",", "")), float(found[3].replace(",", ""))


def test_a_rotation_of_10000_subjects_keeps_data_open_and_erasure_working(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = project.suffix
    key_file, kek_file = tmp_path / "naming.key", tmp_path / "keks.json"
    LocalKeyService.load(key_file, create=True)
    settings = _use_keys(monkeypatch, project, key_file, None)
    project.write_topology('ignore: ["*"]\ntopics:' + ERASURES.replace("{s}", s))
    project.apply()

    # 10,000 subjects' keys under v0, as written before KEK sets; a value sealed for three.
    before = personal_data(settings, reveal=True)
    assert before is not None
    emails = [f"user{n}.{s}@example.com" for n in range(SUBJECTS)]
    records, sealed = [], {}
    for n, email in enumerate(emails):
        subject = before.subject_id(email)
        key_id, data_key = new_data_key()
        records.append((subject, key_id, before.keys.service.wrap(subject, key_id, data_key)))
        if n < 3:
            sealed[email] = seal(data_key, subject=subject, key_id=key_id, plaintext=email)
    before.keys.write(records)
    before.close()

    # A new KEK, current; then the rotation, then again (resumed or repeated: nothing).
    settings = _use_keys(monkeypatch, project, key_file, kek_file)
    added = project.sagalog("keys", "add-kek", "r1", "--current")
    assert added.exit_code == 0, added.output
    started = time.monotonic()
    rewrapped, rate = _rotate(project)
    took = time.monotonic() - started
    assert rewrapped == SUBJECTS
    assert _rotate(project)[0] == 0
    status = project.sagalog("keys", "status")
    assert status.stdout.split() == ["r1", str(SUBJECTS), "current"], status.output
    print(f"\nre-wrapped {rewrapped:,} keys at {rate:,.0f}/s ({took:.1f} s with the CLI)")

    # Erase one subject after the rotation: its data reads as erased, the others open.
    erased = emails[0]
    erase(project, erased, reason="after rotation")
    reader = personal_data(settings, reveal=True)
    assert reader is not None
    try:
        assert reader.open_value(sealed[erased]) == ERASED
        for email in emails[1:3]:
            assert reader.open_value(sealed[email]) == email
    finally:
        reader.close()

    # A service still without the new KEK is told which KEK to add, and where.
    stale = personal_data(settings.model_copy(update={"personal_data_kek_file": None}))
    assert stale is not None
    try:
        with pytest.raises(PersonalDataError, match="KEK 'r1'"):
            stale.open_value(sealed[emails[1]])
    finally:
        stale.close()

    # The ring of a service reading these 10,000 keys from the topic: its RSS.
    bench = subprocess.run(
        [sys.executable, "-m", "tests.bench.key_ring", "--from-topic", "--reads", "2000"],
        cwd=REPO,
        env={
            **os.environ,
            "SAGALOG_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
            "SAGALOG_SCHEMA_REGISTRY_URL": settings.schema_registry_url,
        },
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert bench.returncode == 0, bench.stderr
    assert f"subjects: {SUBJECTS - 1:,}" in bench.stdout
    print(bench.stdout)


@pytest.mark.extended
def test_after_a_rotation_an_erased_requesters_workflows_verify_and_read_as_erased(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """About two minutes: the procurement fleet runs a dozen requests under v0 first
    (its agents seal and reveal the requesters), then 10,000 more subjects' keys are
    written, the KEK rotated, one requester erased and the log audited."""
    s = project.suffix
    key_file, kek_file = tmp_path / "naming.key", tmp_path / "keks.json"
    LocalKeyService.load(key_file, create=True)
    settings = _use_keys(monkeypatch, project, key_file, None)
    run = run_requesters(project, tmp_path, monkeypatch, settings, prefix="kr", seed=7)

    writer = personal_data(settings)
    assert writer is not None
    service = writer.keys.service
    extra = []
    for n in range(SUBJECTS):
        subject = service.subject_id(f"extra{n}.{s}@example.com")
        key_id, data_key = new_data_key()
        extra.append((subject, key_id, service.wrap(subject, key_id, data_key)))
    writer.keys.write(extra)
    writer.close()

    _use_keys(monkeypatch, project, key_file, kek_file)
    assert project.sagalog("keys", "add-kek", "r1", "--current").exit_code == 0
    rewrapped, rate = _rotate(project)
    assert rewrapped == SUBJECTS + 4  # and the fleet's four requesters
    print(f"\nre-wrapped {rewrapped:,} keys at {rate:,.0f}/s")

    erase(project, run.erased, reason="after rotation")

    shown = tailed_requests(project, run.topic)
    for request in run.requests:
        assert shown[request.payload["request_id"]]["requester"] == shown_requester(run, request)

    audit_the_erased(project, run)
