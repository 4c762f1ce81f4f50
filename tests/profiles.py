"""The run's profile: ``quick`` for a local run, ``ci`` when the environment says CI.

Under ``ci`` (``CI`` set, as ``.ci/run`` does) the property tests try several times as
many examples as locally, in an order fixed by the test (``derandomize``), so a failure in
CI reproduces on any machine with the same command; a local run draws new examples each
time and keeps failing ones in ``.hypothesis/``. Under ``ci`` a skipped or deselected test
also fails the run (``tests/conftest.py``).

A test states the examples it needs locally with ``examples(n)``; the profile scales it.
No profile has a deadline: on two shared cores a test's time says how busy the machine
is (the Spark tests run beside these), not whether the code is right.
"""

from __future__ import annotations

import os

from hypothesis import settings

#: True when the run is CI's.
CI = bool(os.environ.get("CI"))

#: How many times a test's local examples the profile tries.
_SCALE = {"quick": 1, "ci": 5}

settings.register_profile("quick", deadline=None, print_blob=True)
settings.register_profile("ci", max_examples=100 * _SCALE["ci"], deadline=None, derandomize=True, print_blob=True,
                          database=None)
PROFILE = "ci" if CI else "quick"
settings.load_profile(PROFILE)


def examples(local: int) -> int:
    """The examples to try for a test that tries ``local`` of them in a local run."""
    return local * _SCALE[PROFILE]
