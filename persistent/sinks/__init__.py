"""Exactly-once sinks for a job's results: each write is idempotent per micro-batch.
Imports ``core`` and ``storage``."""
