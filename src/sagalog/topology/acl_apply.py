"""Read the cluster's ACLs and create or delete bindings: the I/O around ``acl_plan``.

A cluster without an authorizer (the PLAINTEXT dev stack) enforces no ACL, so there
is nothing to plan: ``current_acls`` returns None and the plan says it skipped them.
Kafka answers DescribeAcls there with SECURITY_DISABLED, but confluent-kafka 2.16
hands back an empty list instead of the error (checked against Kafka 4.4), so an
empty answer is confirmed by the brokers' own ``authorizer.class.name``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    ResourcePatternType,
    ResourceType,
)

from sagalog.errors import SagalogError
from sagalog.topology.acls import AclRule, Operation, PatternKind, Permission, ResourceKind

NOT_ENFORCED = "ACLs: not enforced by this cluster (no authorizer): skipped"


def _fields(rule: AclRule) -> tuple[Any, ...]:
    """The rule in the order ``AclBinding`` and ``AclBindingFilter`` both take."""
    return (
        ResourceType[rule.resource_type.value],
        rule.resource_name,
        ResourcePatternType[rule.pattern_type.value],
        rule.principal,
        rule.host,
        AclOperation[rule.operation.value],
        AclPermissionType[rule.permission.value],
    )


def to_binding(rule: AclRule) -> AclBinding:
    return AclBinding(*_fields(rule))


def to_filter(rule: AclRule) -> AclBindingFilter:
    """A filter that matches exactly this one binding."""
    return AclBindingFilter(*_fields(rule))


def from_binding(binding: AclBinding) -> AclRule | None:
    """The binding as a rule; None for kinds sagalog never derives (left alone)."""
    try:
        return AclRule(
            principal=binding.principal,
            resource_type=ResourceKind(_name(binding.restype)),
            pattern_type=PatternKind(_name(binding.resource_pattern_type)),
            resource_name=binding.name,
            operation=Operation(_name(binding.operation)),
            permission=Permission(_name(binding.permission_type)),
            host=binding.host,
        )
    except ValueError:
        return None


def _name(value: object) -> str:
    return value.name if isinstance(value, enum.Enum) else str(value)


def current_acls(
    admin: AdminClient, *, broker_ids: Iterable[int], timeout: float
) -> list[AclRule] | None:
    """Every binding on the cluster, or None when the cluster has no authorizer."""
    match_all = AclBindingFilter(
        ResourceType.ANY,
        None,  # type: ignore[arg-type]  # None matches any name, principal, host
        ResourcePatternType.ANY,
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    try:
        bindings = admin.describe_acls(match_all, request_timeout=timeout).result(timeout=timeout)
    except KafkaException as exc:
        error: KafkaError = exc.args[0]
        if error.code() == KafkaError.SECURITY_DISABLED:
            return None
        raise SagalogError(f"reading the cluster's ACLs failed: {error.str()}") from exc
    if not bindings and not _has_authorizer(admin, broker_ids=broker_ids, timeout=timeout):
        return None
    rules = (from_binding(b) for b in bindings)
    return [rule for rule in rules if rule is not None]


def _has_authorizer(admin: AdminClient, *, broker_ids: Iterable[int], timeout: float) -> bool:
    ids = sorted(broker_ids)
    if not ids:
        return True  # nothing to ask: assume ACLs are enforced, and plan them
    resource = ConfigResource(ResourceType.BROKER, str(ids[0]))
    try:
        [future] = admin.describe_configs([resource], request_timeout=timeout).values()
        entry = future.result(timeout=timeout).get("authorizer.class.name")
    except KafkaException:
        return True  # not allowed to look: an authorizer is there to refuse us
    return bool(entry is not None and entry.value)


def create_acl(admin: AdminClient, rule: AclRule, *, timeout: float) -> None:
    [future] = admin.create_acls([to_binding(rule)], request_timeout=timeout).values()
    _wait(future, f"create ACL {rule.principal} {rule.describe()}", timeout)


def delete_acl(admin: AdminClient, rule: AclRule, *, timeout: float) -> None:
    [future] = admin.delete_acls([to_filter(rule)], request_timeout=timeout).values()
    _wait(future, f"delete ACL {rule.principal} {rule.describe()}", timeout)


def _wait(future: object, what: str, timeout: float) -> None:
    try:
        future.result(timeout=timeout)  # type: ignore[attr-defined]
    except KafkaException as exc:
        error: KafkaError = exc.args[0]
        raise SagalogError(f"{what} failed: {error.str()}") from exc
