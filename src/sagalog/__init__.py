"""sagalog: event-sourced choreography for long-running workflows on Apache Kafka.

The public surface is what an agent service writes against, all of it imported
from here: declaring and running an agent, its handler's context and the errors a
handler raises, effects, budgets and model calls, the event base and sagalog's own
events, publishing, the errors a caller catches, the exit codes a supervisor reads,
and the test harnesses. Everything else is internal and may change without notice.

The ``if TYPE_CHECKING:`` block below is the one list of public names: type checkers
read it as the real imports, and at run time ``__getattr__`` and ``__all__`` are
read from the same block (the idea of Scientific Python's SPEC 1, without its stub
file). The names load on first use (PEP 562): ``import sagalog.flows`` in the
tracker must not pay for the agent runtime, its Kafka clients and RocksDB, nor
``import sagalog`` in a script for all of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sagalog.lazy_exports import LazyNames

if TYPE_CHECKING:
    # Declaring and running an agent; what a handler receives and raises.
    from sagalog.agents import Agent as Agent
    from sagalog.agents import AgentSettings as AgentSettings
    from sagalog.agents import Budget as Budget
    from sagalog.agents import BudgetRefused as BudgetRefused
    from sagalog.agents import BudgetWait as BudgetWait
    from sagalog.agents import ChatModel as ChatModel
    from sagalog.agents import DecisionLineage as DecisionLineage
    from sagalog.agents import DependencyUnavailable as DependencyUnavailable
    from sagalog.agents import HandlerContext as HandlerContext
    from sagalog.agents import HandlerError as HandlerError
    from sagalog.agents import LoopResult as LoopResult
    from sagalog.agents import NonRetryableError as NonRetryableError
    from sagalog.agents import Price as Price
    from sagalog.agents import Priority as Priority
    from sagalog.agents import RetryableError as RetryableError
    from sagalog.agents import StepTimeout as StepTimeout
    from sagalog.agents import Tool as Tool
    from sagalog.agents import ToolLoopError as ToolLoopError
    from sagalog.agents import WorkflowContext as WorkflowContext
    from sagalog.agents import decision_lineage as decision_lineage
    from sagalog.agents import post_chat as post_chat
    from sagalog.agents import prompt_hash as prompt_hash
    from sagalog.agents import run_agent as run_agent
    from sagalog.agents import run_tool_loop as run_tool_loop
    from sagalog.blobs.store import BlobRef as BlobRef

    # Events, sagalog's own among them, and their contracts.
    from sagalog.contracts.avro_types import Int32 as Int32
    from sagalog.contracts.avro_types import PersonalData as PersonalData
    from sagalog.contracts.avro_types import enum_default as enum_default
    from sagalog.contracts.catalog import EventSchema as EventSchema
    from sagalog.contracts.catalog import SchemaCatalog as SchemaCatalog
    from sagalog.contracts.codec import EventCodec as EventCodec
    from sagalog.contracts.headers import EventHeaders as EventHeaders
    from sagalog.contracts.models import Event as Event
    from sagalog.contracts.registry import SchemaRegistry as SchemaRegistry

    # What a caller catches, and what a supervisor reads.
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
    from sagalog.events import GateDecided as GateDecided
    from sagalog.events import GateDecision as GateDecision
    from sagalog.events import GateOpened as GateOpened
    from sagalog.events import WaitEnded as WaitEnded
    from sagalog.exit_codes import ExitCode as ExitCode

    # Publishing, and the settings every client shares.
    from sagalog.publisher import EventPublisher as EventPublisher
    from sagalog.publisher import PublishedEvent as PublishedEvent
    from sagalog.settings import ClientSettings as ClientSettings

    # Testing.
    from sagalog.testing import EffectStubs as EffectStubs
    from sagalog.testing import FlowTestEnvironment as FlowTestEnvironment
    from sagalog.testing import ServiceProcess as ServiceProcess
    from sagalog.testing import TrackerHarness as TrackerHarness
    from sagalog.testing import handler_context as handler_context
    from sagalog.testing import wait_for_event as wait_for_event

    # An agent that acts on a human gate's decision checks its token.
    from sagalog.tracker.exceptions import GateSecretError as GateSecretError
    from sagalog.tracker.gates import checked_secret as checked_secret
    from sagalog.tracker.gates import verify_gate_token as verify_gate_token

__version__ = "0.1.0"


_names = LazyNames("sagalog", globals(), also=("__version__",))
__getattr__ = _names.getattr
__dir__ = _names.dir
