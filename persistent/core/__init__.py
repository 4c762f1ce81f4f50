"""The ground floor: what a user's task is (``task``), the project's errors
(``errors``), the settings that are a choice among names (``choices``), bad records
and late data (``badrecords``). Touches no file system, and imports nothing of
``persistent`` above it."""
