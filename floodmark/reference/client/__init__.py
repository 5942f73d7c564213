"""The client library: how applications (and the harness's workloads) use the log.

``metadata`` finds partition leaders through any broker; ``producer`` sends and says
honestly what happened; ``accumulator`` batches a turn's sends to one partition, as Kafka's
producer does; ``consumer`` reads by offset; ``admin`` manages topics, reassignments,
preferred elections and log directories. All of it runs on any runtime.
"""

from floodmark.reference.client.accumulator import SendAccumulator
from floodmark.reference.client.admin import Admin, AdminError
from floodmark.reference.client.consumer import Consumer, FetchResult
from floodmark.reference.client.metadata import ClientError, ClientMetadata
from floodmark.reference.client.producer import Producer, SendResult

__all__ = ["Admin", "AdminError", "ClientError", "ClientMetadata", "Consumer", "FetchResult",
           "Producer", "SendAccumulator", "SendResult"]
