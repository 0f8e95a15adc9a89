"""The difference between the derived ACLs and the cluster's, as a pure function.

Only the declared services' principals are managed: a binding for any other principal
(an operator's, a tool's, another team's) is neither planned nor touched, as topics
matched by ``ignore:`` are not. For a managed principal the derived bindings are the
whole truth: a missing one is created; one that is not derived (granted by hand,
left by an older topology) is removed only with ``--force``, because it may be what
keeps something running that the topology does not know about yet.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from sagalog.topology.acls import AclRule, Permission
from sagalog.topology.plan import Change, ChangeKind


def plan_acls(
    desired: Iterable[AclRule], current: Iterable[AclRule], *, principals: Collection[str]
) -> list[Change]:
    """ACL changes that make the managed principals' bindings exactly ``desired``.

    Args:
        desired: the derived bindings (``derive_acls``).
        current: the cluster's bindings, any principal's.
        principals: the managed principals; bindings of others are left alone.
    """
    wanted = {rule: rule for rule in desired}
    present = {rule for rule in current if rule.principal in principals}
    changes = [
        Change(
            ChangeKind.CREATE_ACL,
            rule.principal,
            rule.describe() + (f"  # {rule.why}" if rule.why else ""),
            acl=rule,
        )
        for rule in sorted(wanted)
        if rule not in present
    ]
    for rule in sorted(present - set(wanted)):
        deny = rule.permission is Permission.DENY
        widens = " Removing a DENY widens what the principal may do." if deny else ""
        changes.append(
            Change(
                ChangeKind.DELETE_ACL,
                rule.principal,
                rule.describe(),
                needs_force=True,
                reason="not derived from the topology (granted by hand or by an older one); "
                "declare the need in the flow or topology/services.yaml, or rerun with --force "
                f"to remove it.{widens}",
                acl=rule,
            )
        )
    return changes
