"""Exactly-once sinks for a job's results: each write is idempotent per micro-batch.
Imports ``core``, ``storage`` and ``sources`` (the Kafka sink's clients are the
Kafka source's, ``sources.kafka_client``)."""
