import math

import hypothesis.strategies as st
import numpy as np
import pytest

from monoids import (
    Averaged,
    Count,
    First,
    HyperLogLog,
    Last,
    MapMonoid,
    Max,
    MonoidTypeError,
    MonoidValueError,
    Product,
    Sum,
    Timestamped,
    check_monoid_laws,
)

KEYS = st.one_of(st.text(max_size=3), st.integers(-3, 3))


def test_product_obeys_the_laws(small_ints, floats, timestamped):
    product = Product(Sum(int), Max(float), First())
    check_monoid_laws(product, st.tuples(small_ints, floats, timestamped), max_examples=50)


def test_product_with_a_sketch_compares_components_with_their_own_equivalence(floats):
    hll = HyperLogLog(lg_k=4)
    sketches = st.lists(st.integers(0, 40), max_size=20).map(lambda xs: hll.fold(hll.prepare_column(xs)))
    averages = st.builds(Averaged().prepare, floats)
    check_monoid_laws(Product(Averaged(), hll), st.tuples(averages, sketches), max_examples=40)


def test_map_obeys_the_laws(small_ints):
    check_monoid_laws(MapMonoid(Sum(int)), st.dictionaries(KEYS, small_ints, max_size=4), max_examples=50)


def test_map_of_a_non_commutative_monoid_obeys_the_laws(timestamped):
    values = st.dictionaries(KEYS, timestamped, max_size=4)
    check_monoid_laws(MapMonoid(Last()), values, max_examples=50)


def test_first_obeys_the_laws(timestamped):
    check_monoid_laws(First(), timestamped, max_examples=50)


def test_last_obeys_the_laws(timestamped):
    check_monoid_laws(Last(), timestamped, max_examples=50)


def test_first_keeps_the_earliest_item_and_the_left_one_on_ties():
    first = First()
    a, b, c = Timestamped(5, "a"), Timestamped(5, "b"), Timestamped(3, "c")
    assert first.plus(a, b) is a
    assert first.plus(b, a) is b
    assert first.sum([a, c, b]) is c
    assert first.commutative is False


def test_last_keeps_the_latest_item_and_the_right_one_on_ties():
    last = Last()
    a, b, c = Timestamped(5, "a"), Timestamped(5, "b"), Timestamped(3, "c")
    assert last.plus(a, b) is b
    assert last.plus(b, a) is a
    assert last.sum([a, c, b]) is b
    assert last.present(last.zero()) is None


def test_first_and_last_reduce_by_key_follow_row_order_on_ties():
    column = First().column([Timestamped(1, "x"), None, Timestamped(1, "y"), Timestamped(0, "z")])
    codes = np.array([0, 1, 0, 1])
    assert First().reduce_by_key(codes, 3, column).tolist() == [Timestamped(1, "x"), Timestamped(0, "z"), None]
    assert Last().reduce_by_key(codes, 3, column).tolist() == [Timestamped(1, "y"), Timestamped(0, "z"), None]


def test_product_is_commutative_only_if_every_component_is():
    assert Product(Sum(), Max()).commutative
    assert not Product(Sum(), Last()).commutative
    assert MapMonoid(Count()).commutative and not MapMonoid(First()).commutative


def test_product_reduces_each_component_with_its_own_column_code():
    calls = []

    class Spied(Sum):
        def reduce_by_key(self, codes, n, column):
            calls.append(column.dtype)
            return super().reduce_by_key(codes, n, column)

    product = Product(Spied(int), Averaged())
    column = product.column([(1, Averaged().prepare(2.0)), (3, Averaged().prepare(4.0))])
    out = product.reduce_by_key(np.array([1, 1]), 2, column)
    assert calls == [np.dtype(np.int64)]
    assert out[1][0] == 4 and out[1][1].mean == 3.0 and out[0] == (0, Averaged().zero())


def test_product_presents_each_component():
    product = Product(Count(), Averaged())
    value = product.plus((1, Averaged().prepare(3.0)), (1, Averaged().prepare(5.0)))
    assert product.present(value) == (2, 4.0)
    shown = product.present_column(product.column([value, product.zero()]))
    assert shown.shape == (2,) and shown[0] == (2, 4.0) and math.isnan(shown[1][1])


def test_map_merges_per_key_without_mutating_its_arguments():
    m = MapMonoid(Sum())
    a, b = {"x": 1, 2: 5}, {"x": 10, "y": 1}
    assert m.plus(a, b) == {"x": 11, 2: 5, "y": 1}
    assert a == {"x": 1, 2: 5} and b == {"x": 10, "y": 1}


def test_map_rejects_keys_other_than_str_or_int_naming_them():
    m = MapMonoid(Sum())
    with pytest.raises(MonoidTypeError, match=r"got 1\.5 at row 3 key 1\.5"):
        m.validate({1.5: 1}, "row 3")
    with pytest.raises(MonoidTypeError, match="got True"):
        m.validate({True: 1})
    with pytest.raises(MonoidValueError, match="does not fit in 64 bits"):
        m.validate({2**64: 1})
    with pytest.raises(MonoidTypeError, match=r"got 'x' at row 3\['k'\]"):
        m.validate({"k": "x"}, "row 3")
    with pytest.raises(MonoidTypeError, match="takes dicts"):
        m.validate([("k", 1)])


def test_timestamped_items_must_be_text_numbers_or_bytes():
    with pytest.raises(MonoidTypeError, match=r"got \[1\] at key 'k' item"):
        First().validate(Timestamped(1, [1]), "key 'k'")
    with pytest.raises(MonoidValueError, match="cannot take NaN at key 'k' item"):
        Last().validate(Timestamped(1, math.nan), "key 'k'")
    with pytest.raises(MonoidTypeError, match="timestamp_ms .* must be an int"):
        Last().validate(Timestamped(1.5, "x"))
    with pytest.raises(MonoidTypeError, match="takes Timestamped or None"):
        Last().validate("x")


def test_product_rejects_tuples_of_the_wrong_length_and_bad_components():
    product = Product(Sum(), Max())
    with pytest.raises(MonoidTypeError, match=r"takes tuples of 2 values, got \(1,\) at key 'k'"):
        product.validate((1,), "key 'k'")
    with pytest.raises(MonoidTypeError, match=r"got 'x' at key 'k'\[1\]"):
        product.validate((1, "x"), "key 'k'")
    with pytest.raises(MonoidTypeError, match="takes monoids"):
        Product(Sum(), int)
    with pytest.raises(MonoidValueError, match="at least one"):
        Product()


def test_containers_are_equal_when_their_components_are():
    assert Product(Sum(), Max(float)) == Product(Sum(), Max(float))
    assert Product(Sum(), Max(float)) != Product(Sum(), Max(int))
    assert MapMonoid(Sum()) != MapMonoid(Sum(float))
    assert repr(Product(Sum(), MapMonoid(Count()))) == "Product(Sum(kind='int'), MapMonoid(Count()))"
