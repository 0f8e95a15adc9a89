"""The group membership handed to librdkafka, byte for byte as librdkafka writes it.

The expected values were printed by ``Consumer.consumer_group_metadata()`` of a
confluent-kafka 2.16 (librdkafka 2.16.0) consumer that had joined a group on the
dev stack, without and with a ``group.instance.id``.
"""

from __future__ import annotations

import sys

import pytest

from sagalog.services.tracker.fencing import Membership, NotAMember, group_metadata

pytestmark = pytest.mark.skipif(sys.byteorder != "little", reason="samples from x86_64")

MEMBER = "rdkafka-55110331-0042-4d07-9fb5-caff653a8982"
STATIC = "inst-7-90c2a04d-a1ed-4c9a-9447-e991ce87cf81"


def test_a_dynamic_member_as_librdkafka_writes_it() -> None:
    written = group_metadata(Membership("gprobeNone", 1, MEMBER))
    assert written == b"CGMDv2:\x01\x00\x00\x00gprobeNone\x00" + MEMBER.encode() + b"\x00\x01"


def test_a_static_member_as_librdkafka_writes_it() -> None:
    written = group_metadata(Membership("gprobeinst-7", 1, STATIC, instance_id="inst-7"))
    assert written == (
        b"CGMDv2:\x01\x00\x00\x00gprobeinst-7\x00" + STATIC.encode() + b"\x00\x00inst-7\x00"
    )


def test_outside_the_group_nothing_is_written() -> None:
    with pytest.raises(NotAMember, match="generation -1"):
        group_metadata(Membership("saga-tracker", -1, ""))
