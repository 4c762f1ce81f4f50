"""Time-replayable sources on Spark's Python Data Source API: each can start at any
event time, so a restart from the clock rewinds it; and the driver's Kafka clients,
set up from a Spark user's Kafka options, which the Kafka sink shares
(``kafka_client``). Imports ``core`` and ``storage``."""
