"""sagalog: event-sourced choreography for long-running workflows on Apache Kafka.

The public surface is what ``__all__`` lists; everything else is internal and may
change without notice.
"""

from sagalog.contracts.catalog import EventSchema, SchemaCatalog
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.headers import EventHeaders
from sagalog.contracts.models import Event
from sagalog.contracts.registry import SchemaRegistry
from sagalog.errors import SagalogError
from sagalog.publisher import EventPublisher, PublishedEvent
from sagalog.settings import ClientSettings

__version__ = "0.1.0"

__all__ = [
    "ClientSettings",
    "Event",
    "EventCodec",
    "EventHeaders",
    "EventPublisher",
    "EventSchema",
    "PublishedEvent",
    "SagalogError",
    "SchemaCatalog",
    "SchemaRegistry",
    "__version__",
]
