"""The examples: jobs built on ``persistent.tools.options`` (``python -m persistent.examples.wordcount --help``)."""
