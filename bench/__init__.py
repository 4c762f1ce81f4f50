"""The benchmark harness: ``python bench/run.py --help`` (or ``make bench``)."""
