"""What ``make mutants`` runs of the tests: a pytest plugin (``-p tests.mutants.plugin``,
set in setup.cfg's ``[mutmut]``).

mutmut runs a mutant against the tests that called its function when it ran them all
once. Here those are only the tests of the mutant's module (``TESTS``): the unit tests
that look at what the module does, not every test that passes through it on the way
to something else, which would make the mutants of ``state.table`` alone take hours.
The runs that are not a mutant's (mutmut's first run of all the tests, which maps
functions to tests, and its checks) run the tests of every module. No run takes a test
that starts a JVM (a Spark session, or a Kafka or HDFS server: ``JVM_FIXTURES``).

The Hypothesis profile ``mutants`` (``--hypothesis-profile=mutants``): each mutant's
run draws the same examples (``derandomize``), so a mutant is killed or not whatever
ran before it, and no failing example is kept for the next mutant's run (no
database). A failure is not shrunk: the first failing example kills the mutant, and
shrinking it would take minutes. Deadlines and health checks are off: a mutant may
make the code slower, which is not what the tests look for.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings
from mutmut.utils.format_utils import get_module_from_key

#: The tests of the checkpoint and clock stores.
STORES = tuple(f"tests/persistent/test_{name}.py" for name in ("checkpoint_store", "clock_store", "store_faults",
                                                                "stores_model"))
#: The tests of each mutated module.
TESTS = {
    "state.table": ("tests/state/",),
    "state.key_codes": ("tests/state/",),
    "state.key_column": ("tests/state/",),
    "state.expiry": ("tests/state/",),
    "state.table_format": ("tests/state/",),
    "state.sessions": ("tests/state/",),
    "persistent.storage.checkpoint_store": STORES,
    "persistent.storage.clock_store": STORES,
    "persistent.runtime.keygroup": ("tests/persistent/test_keygroup.py", "tests/persistent/test_badrecords.py",
                                    "tests/persistent/test_fold.py"),
    "persistent.runtime.group_state": ("tests/persistent/test_keygroup.py",),
    "persistent.runtime.kept": ("tests/persistent/test_keygroup.py", "tests/persistent/test_stateful.py"),
    "persistent.runtime.stateful": ("tests/persistent/test_stateful.py", "tests/persistent/test_fold.py"),
    "persistent.runtime.rows": ("tests/persistent/test_rows.py", "tests/persistent/test_stateful.py",
                                "tests/persistent/test_badrecords.py", "tests/persistent/test_fold.py"),
    "persistent.runtime.commit": ("tests/persistent/test_commit.py",),
    "persistent.storage.files_log": ("tests/persistent/test_sources.py", "tests/persistent/test_errors.py"),
}

#: The fixtures that start a JVM (tests/conftest.py, tests/spark/conftest.py).
JVM_FIXTURES = {"spark", "kafka_broker", "hdfs_cluster"}

settings.register_profile(
    "mutants",
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


def pytest_collection_modifyitems(items) -> None:
    module = get_module_from_key(os.environ.get("MUTANT_UNDER_TEST", ""))
    wanted = TESTS.get(module) or tuple(path for paths in TESTS.values() for path in paths)
    items[:] = [item for item in items
                if item.nodeid.startswith(wanted) and not JVM_FIXTURES.intersection(item.fixturenames)]
