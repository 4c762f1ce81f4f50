"""The ground floor: what a user's task is (``task``), the project's errors
(``errors``), bad records and late data (``badrecords``), the crash points of the
failure tests (``faults``), and the driver's Kafka clients set up from a Spark user's
Kafka options, which the Kafka source and sink share (``kafka_client``). Imports
nothing of ``persistent`` above it."""
