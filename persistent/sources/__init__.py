"""Time-replayable sources on Spark's Python Data Source API: each can start at any
event time, so a restart from the clock rewinds it. Imports ``core`` and ``storage``."""
