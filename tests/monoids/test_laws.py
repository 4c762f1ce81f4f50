import json
import operator
import subprocess
import sys

import hypothesis.strategies as st
import numpy as np
import pytest

from monoids import Group, Monoid, MonoidTypeError, Sum, check_laws, check_monoid_laws


class Subtracting(Sum):
    """Broken: subtraction is not associative and 0 is no left identity."""

    def plus(self, a, b):
        return a - b


class Appending(Monoid):
    """Broken: plus appends to its left argument in place."""

    name = "appending"
    commutative = False

    def zero(self):
        return []

    def plus(self, a, b):
        a.extend(b)
        return a

    def _encode_payload(self, value):
        return json.dumps(value).encode()

    def _decode_payload(self, data):
        return json.loads(data)


class Concatenating(Appending):
    """A correct, non-commutative user monoid: string lists joined without mutation."""

    name = "concatenating"

    def plus(self, a, b):
        return a + b


class ClaimsCommutative(Concatenating):
    commutative = True


class IgnoresKeys(Sum):
    """Broken: reduce_by_key puts every row into key 0."""

    def reduce_by_key(self, codes, n, column):
        return super().reduce_by_key(np.zeros_like(codes), n, column)


class BadInverse(Sum, Group):
    def minus(self, a, b):
        return a + b


class ForgetfulEncoding(Sum):
    def _decode_payload(self, data):
        return 0


class PythonText(Concatenating):
    """Broken: stores its lists as Python's text, which is not JSON."""

    def present_json(self, shown):
        return str(shown)


class Unshowable(Concatenating):
    """Broken: presents a set, which has no JSON form."""

    def present(self, value):
        return set(value)


class NotANumber(Concatenating):
    """Broken: stores NaN, which JSON lacks."""

    def present_json(self, shown):
        return "NaN"


WORDS = st.lists(st.text("ab", max_size=2), max_size=3)


def test_check_laws_catches_subtraction_as_plus_by_associativity():
    with pytest.raises(AssertionError, match="associativity fails for Subtracting"):
        check_laws(Subtracting(), 1, 2, 3)


def test_check_monoid_laws_finds_a_counterexample_to_associativity():
    with pytest.raises(AssertionError, match=r"associativity fails for Subtracting\(kind='int'\) with a=0, b=0, c="):
        check_monoid_laws(Subtracting(), st.integers(-10, 10), max_examples=50)


def test_check_laws_catches_plus_mutating_its_arguments():
    with pytest.raises(AssertionError, match="immutability fails .*plus mutated its arguments"):
        check_laws(Appending(), ["x"], ["y"], [])


def test_check_laws_accepts_a_correct_non_commutative_user_monoid():
    check_monoid_laws(Concatenating(), WORDS, max_examples=30)


def test_check_laws_catches_a_false_claim_of_commutativity():
    with pytest.raises(AssertionError, match="commutativity"):
        check_laws(ClaimsCommutative(), ["x"], ["y"], [])


def test_check_laws_catches_reduce_by_key_mixing_keys():
    with pytest.raises(AssertionError, match=r"reduce_by_key \(key 0\) fails .* 6 is not equivalent to 4"):
        check_laws(IgnoresKeys(), 1, 2, 3)


def test_check_laws_catches_a_wrong_inverse():
    with pytest.raises(AssertionError, match="inverse"):
        check_laws(BadInverse(), 1, 2, 3)


def test_check_laws_catches_an_encoding_that_does_not_round_trip():
    with pytest.raises(AssertionError, match="encoding round trip fails .* 0 is not equivalent to 1"):
        check_laws(ForgetfulEncoding(), 1, 2, 3)


@pytest.mark.parametrize(
    ("monoid", "detail"),
    [
        (PythonText(), r"\"\['x'\]\" is not JSON"),
        (Unshowable(), r"holds set \{'x'\}, which has no JSON form"),
        (NotANumber(), r"'NaN' is not JSON: NaN is not JSON"),
    ],
    ids=["python-text", "no-json-form", "nan"],
)
def test_check_laws_catches_results_a_sink_cannot_store_as_json(monoid, detail):
    with pytest.raises(AssertionError, match=rf"present_json \(row 0\) fails .*{detail}"):
        check_laws(monoid, ["x"], ["y"], [])


def test_check_laws_uses_the_given_equivalence():
    a, b, c = 0.1, 0.2, 0.3
    check_laws(Sum(float), a, b, c)
    with pytest.raises(AssertionError, match="associativity"):
        check_laws(Sum(float), a, b, c, equiv=operator.eq)


def test_check_laws_validates_its_values_first():
    with pytest.raises(MonoidTypeError, match="at b"):
        check_laws(Sum(), 1, "2", 3)


def test_importing_monoids_does_not_import_hypothesis():
    code = "import sys, monoids; assert 'hypothesis' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
