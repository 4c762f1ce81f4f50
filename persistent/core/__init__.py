"""The ground floor: what a user's task is (``task``), the project's errors
(``errors``), bad records and late data (``badrecords``), and the crash points of
the failure tests (``faults``). Imports nothing of ``persistent`` above it."""
