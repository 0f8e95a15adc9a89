"""sagalog: event-sourced choreography for long-running workflows on Apache Kafka.

The public surface is what ``__all__`` lists: declaring and running an agent, the
event base and its contracts, publishing, the errors a caller catches, the exit
codes a supervisor reads, and the time-skipping tracker harness for tests.
Everything else is internal and may change without notice.

The names load on first use (PEP 562): ``import sagalog.flows`` in the tracker must
not pay for the agent runtime, its Kafka clients and RocksDB, nor ``import sagalog``
in a script for all of them. Type checkers read the imports below as the real ones.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sagalog.agents import Agent as Agent
    from sagalog.agents import AgentSettings as AgentSettings
    from sagalog.agents import DecisionLineage as DecisionLineage
    from sagalog.agents import DependencyUnavailable as DependencyUnavailable
    from sagalog.agents import HandlerContext as HandlerContext
    from sagalog.agents import HandlerError as HandlerError
    from sagalog.agents import NonRetryableError as NonRetryableError
    from sagalog.agents import Priority as Priority
    from sagalog.agents import RetryableError as RetryableError
    from sagalog.agents import StepTimeout as StepTimeout
    from sagalog.agents import WorkflowContext as WorkflowContext
    from sagalog.agents import decision_lineage as decision_lineage
    from sagalog.agents import prompt_hash as prompt_hash
    from sagalog.agents import run as run_agent
    from sagalog.contracts.catalog import EventSchema as EventSchema
    from sagalog.contracts.catalog import SchemaCatalog as SchemaCatalog
    from sagalog.contracts.codec import EventCodec as EventCodec
    from sagalog.contracts.headers import EventHeaders as EventHeaders
    from sagalog.contracts.models import Event as Event
    from sagalog.contracts.registry import SchemaRegistry as SchemaRegistry
    from sagalog.errors import AgentContractError as AgentContractError
    from sagalog.errors import AuthenticationError as AuthenticationError
    from sagalog.errors import AuthorizationError as AuthorizationError
    from sagalog.errors import ConfigurationError as ConfigurationError
    from sagalog.errors import EventValidationError as EventValidationError
    from sagalog.errors import FlowDefinitionError as FlowDefinitionError
    from sagalog.errors import SagalogError as SagalogError
    from sagalog.errors import SchemaError as SchemaError
    from sagalog.errors import ServiceUnavailableError as ServiceUnavailableError
    from sagalog.events import CompensationRequested as CompensationRequested
    from sagalog.exit_codes import ExitCode as ExitCode
    from sagalog.publisher import EventPublisher as EventPublisher
    from sagalog.publisher import PublishedEvent as PublishedEvent
    from sagalog.settings import ClientSettings as ClientSettings
    from sagalog.testing import ServiceProcess as ServiceProcess
    from sagalog.testing import TrackerHarness as TrackerHarness
    from sagalog.testing import wait_for_event as wait_for_event

__version__ = "0.1.0"

#: Each public name, and the module (and the name there) it comes from.
_EXPORTS: dict[str, tuple[str, str]] = {
    # Declaring and running an agent.
    "Agent": ("sagalog.agents", "Agent"),
    "AgentSettings": ("sagalog.agents", "AgentSettings"),
    "HandlerContext": ("sagalog.agents", "HandlerContext"),
    "WorkflowContext": ("sagalog.agents", "WorkflowContext"),
    "HandlerError": ("sagalog.agents", "HandlerError"),
    "NonRetryableError": ("sagalog.agents", "NonRetryableError"),
    "RetryableError": ("sagalog.agents", "RetryableError"),
    "DependencyUnavailable": ("sagalog.agents", "DependencyUnavailable"),
    "StepTimeout": ("sagalog.agents", "StepTimeout"),
    "DecisionLineage": ("sagalog.agents", "DecisionLineage"),
    "decision_lineage": ("sagalog.agents", "decision_lineage"),
    "prompt_hash": ("sagalog.agents", "prompt_hash"),
    "Priority": ("sagalog.agents", "Priority"),
    "run_agent": ("sagalog.agents", "run"),
    # Events and their contracts.
    "Event": ("sagalog.contracts.models", "Event"),
    "EventHeaders": ("sagalog.contracts.headers", "EventHeaders"),
    "EventSchema": ("sagalog.contracts.catalog", "EventSchema"),
    "SchemaCatalog": ("sagalog.contracts.catalog", "SchemaCatalog"),
    "EventCodec": ("sagalog.contracts.codec", "EventCodec"),
    "SchemaRegistry": ("sagalog.contracts.registry", "SchemaRegistry"),
    "CompensationRequested": ("sagalog.events", "CompensationRequested"),
    # Publishing, and the settings every client shares.
    "EventPublisher": ("sagalog.publisher", "EventPublisher"),
    "PublishedEvent": ("sagalog.publisher", "PublishedEvent"),
    "ClientSettings": ("sagalog.settings", "ClientSettings"),
    # What a caller catches, and what a supervisor reads.
    "SagalogError": ("sagalog.errors", "SagalogError"),
    "ConfigurationError": ("sagalog.errors", "ConfigurationError"),
    "FlowDefinitionError": ("sagalog.errors", "FlowDefinitionError"),
    "AgentContractError": ("sagalog.errors", "AgentContractError"),
    "SchemaError": ("sagalog.errors", "SchemaError"),
    "EventValidationError": ("sagalog.errors", "EventValidationError"),
    "ServiceUnavailableError": ("sagalog.errors", "ServiceUnavailableError"),
    "AuthenticationError": ("sagalog.errors", "AuthenticationError"),
    "AuthorizationError": ("sagalog.errors", "AuthorizationError"),
    "ExitCode": ("sagalog.exit_codes", "ExitCode"),
    # Testing.
    "TrackerHarness": ("sagalog.testing", "TrackerHarness"),
    "ServiceProcess": ("sagalog.testing", "ServiceProcess"),
    "wait_for_event": ("sagalog.testing", "wait_for_event"),
}

__all__ = [
    "Agent",
    "AgentContractError",
    "AgentSettings",
    "AuthenticationError",
    "AuthorizationError",
    "ClientSettings",
    "CompensationRequested",
    "ConfigurationError",
    "DecisionLineage",
    "DependencyUnavailable",
    "Event",
    "EventCodec",
    "EventHeaders",
    "EventPublisher",
    "EventSchema",
    "EventValidationError",
    "ExitCode",
    "FlowDefinitionError",
    "HandlerContext",
    "HandlerError",
    "NonRetryableError",
    "Priority",
    "PublishedEvent",
    "RetryableError",
    "SagalogError",
    "SchemaCatalog",
    "SchemaError",
    "SchemaRegistry",
    "ServiceProcess",
    "ServiceUnavailableError",
    "StepTimeout",
    "TrackerHarness",
    "WorkflowContext",
    "__version__",
    "decision_lineage",
    "prompt_hash",
    "run_agent",
    "wait_for_event",
]


def __getattr__(name: str) -> Any:
    """Load a public name on first use; an unknown one raises as a plain module would."""
    try:
        module, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'sagalog' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
