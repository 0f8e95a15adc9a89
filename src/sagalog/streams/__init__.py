"""Live model output: what a running step's model writes, as it writes it.

Streams are not the log. A model call made with ``ctx.model_stream`` publishes each
text delta to the stream topic of its workflow's topic (``topic_names.stream_topic_for``:
same partitions, keyed by workflow id, kept an hour) through a plain idempotent
producer with no linger (``agents.streaming``); the gateway serves it as server-sent
events (``GET /v1/workflows/{id}/stream``). The finished answer reaches the log once,
in the call's ``EffectRecorded`` and the step's outcome, as every other result.

``record`` is the wire format and the rules a reader applies to it, with no I/O.
"""
