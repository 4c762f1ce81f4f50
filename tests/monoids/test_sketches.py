import collections
import math

import datasketches
import hypothesis.strategies as st
import numpy as np
import pytest

from monoids import (
    CountMin,
    EncodingError,
    HyperLogLog,
    MonoidTypeError,
    MonoidValueError,
    Quantiles,
    TopK,
    check_monoid_laws,
)

LETTERS = st.text("abcdefghij", min_size=1, max_size=1)


def sketches_of(monoid, items, max_size=30):
    """Sketches of drawn lists of ``items``."""
    return st.lists(items, max_size=max_size).map(lambda xs: monoid.fold(monoid.prepare_column(xs)))


@pytest.mark.parametrize("lg_k", [4, 12])
def test_hyperloglog_obeys_the_laws(lg_k):
    hll = HyperLogLog(lg_k)
    items = st.one_of(st.integers(0, 60), st.text(max_size=2), st.floats(allow_nan=False))
    check_monoid_laws(hll, sketches_of(hll, items), max_examples=40)


def test_count_min_obeys_the_laws():
    cm = CountMin(num_hashes=3, num_buckets=16)
    check_monoid_laws(cm, sketches_of(cm, st.one_of(LETTERS, st.integers(0, 20))), max_examples=40)


def test_top_k_obeys_the_laws_also_once_it_purges():
    # 10 letters overflow the 6 counters of lg_max_k=3.
    top = TopK(lg_max_k=3)
    check_monoid_laws(top, sketches_of(top, LETTERS), max_examples=40)


@pytest.mark.parametrize("k", [8, 200])
def test_quantiles_obey_the_laws_also_once_they_compact(k):
    kll = Quantiles(k)
    items = st.one_of(st.integers(-100, 100), st.floats(-1e6, 1e6))
    check_monoid_laws(kll, sketches_of(kll, items), max_examples=40)


def test_quantiles_at_several_ranks_obey_the_laws_and_present_json():
    kll = Quantiles(8, ranks=(0, 0.25, 0.5, 1))
    items = st.one_of(st.integers(-100, 100), st.floats(-1e6, 1e6))
    check_monoid_laws(kll, sketches_of(kll, items), max_examples=20)


def test_hyperloglog_counts_ten_thousand_distinct_items_within_five_percent():
    hll = HyperLogLog()
    items = [f"user-{i}" for i in range(10_000)]
    codes = np.arange(len(items)) % 10
    per_key = hll.prepare_by_key(codes, 10, items)
    estimate = hll.present(hll.fold(per_key))
    assert abs(estimate - 10_000) <= 500
    assert all(abs(e - 1000) <= 100 for e in hll.present_column(per_key))


def test_hyperloglog_does_not_count_repeated_items_twice():
    hll = HyperLogLog()
    once = hll.prepare_by_key(np.zeros(100, dtype=np.intp), 1, list(range(100)))[0]
    assert hll.present(hll.plus(once, once)) == pytest.approx(100, rel=1e-3)


def test_quantiles_median_is_near_the_true_median():
    kll = Quantiles()
    xs = np.random.default_rng(3).exponential(10.0, size=20_000)
    column = kll.prepare_by_key(np.arange(len(xs)) % 8, 8, xs.tolist())
    median = kll.present(kll.fold(column))
    rank = np.mean(xs <= median)
    assert abs(rank - 0.5) < 0.02
    assert kll.quantile(kll.fold(column), 0.9) == pytest.approx(np.quantile(xs, 0.9), rel=0.05)
    assert math.isnan(kll.present(kll.zero()))


def test_quantiles_present_the_ranks_asked_for():
    xs = [float(x) for x in range(100)]
    one, several = Quantiles(ranks=[0.9]), Quantiles(ranks=np.array([0.1, 0.9]))
    value = one.fold(one.prepare_column(xs))
    assert one.present(value) == 90.0 and one.result_dtype == np.float64 and not one.json_results
    assert several.present(value) == {0.1: 10.0, 0.9: 90.0}
    assert several.result_dtype == object and several.json_results
    assert several.present_column(several.column([value])).tolist() == [{0.1: 10.0, 0.9: 90.0}]
    assert Quantiles().present(value) == 50.0


def test_the_ranks_are_no_part_of_the_checkpoints():
    median, tails = Quantiles(16), Quantiles(16, ranks=(0.01, 0.99))
    value = median.fold(median.prepare_column(range(1000)))
    assert (median.params(), median.identity(), median.fingerprint()) == (tails.params(), tails.identity(), tails.fingerprint())
    assert tails.equivalent(tails.decode(median.encode(value)), value)
    column = median.column([value, median.zero()])
    assert all(map(median.equivalent, median.decode_column(tails.encode_column(column)), column))
    assert tails.present(tails.decode(median.encode(value))) == tails.present(value)


@pytest.mark.parametrize(
    ("ranks", "error", "message"),
    [
        ((0.5, 1.5), MonoidValueError, r"rank 1.5 is not in \[0, 1\]"),
        ((-0.1,), MonoidValueError, r"rank -0.1 is not in \[0, 1\]"),
        ((math.nan,), MonoidValueError, r"rank nan is not in \[0, 1\]"),
        (("0.5",), MonoidTypeError, "a rank is a number in \\[0, 1\\], got '0.5'"),
        ((True,), MonoidTypeError, "a rank is a number"),
        (0.5, MonoidTypeError, r"ranks must be a sequence of numbers, e.g. \(0.5, 0.99\); got 0.5"),
        ("0.5", MonoidTypeError, "ranks must be a sequence of numbers"),
        ((), MonoidValueError, "at least one rank"),
        ((0.5, 0.5), MonoidValueError, "name a rank twice"),
    ],
)
def test_quantiles_refuse_ranks_that_are_not_distinct_numbers_in_0_1(ranks, error, message):
    with pytest.raises(error, match=message) as raised:
        Quantiles(ranks=ranks)
    assert "Quantiles(k=200)" in str(raised.value)
    with pytest.raises(MonoidValueError, match=r"rank 2 is not in \[0, 1\]"):
        Quantiles().quantile(Quantiles().zero(), 2)


def test_count_min_never_underestimates():
    cm = CountMin(num_hashes=3, num_buckets=32)
    rng = np.random.default_rng(5)
    stream = [f"item-{i}" for i in rng.zipf(1.5, size=3000) % 500]
    merged = cm.fold(cm.prepare_by_key(np.arange(len(stream)) % 4, 4, stream))
    truth = collections.Counter(stream)
    assert all(cm.estimate(merged, item) >= count for item, count in truth.items())
    assert cm.present(merged) == len(stream)


def test_top_k_lists_the_heavy_hitters_first():
    top = TopK(lg_max_k=6)
    stream = ["a"] * 50 + ["b"] * 30 + [f"rare-{i}" for i in range(200)] + ["a"] * 10
    merged = top.fold(top.prepare_column(stream))
    assert top.present(merged)[:2] == ["a", "b"]


def test_top_k_lists_every_item_before_it_is_full():
    top = TopK()
    assert top.present(top.sum(top.prepare_column(["x", "y", "y"]))) == ["y", "x"]


@pytest.mark.parametrize(
    "small, large, names",
    [
        (HyperLogLog(10), HyperLogLog(12), ("lg_k=10", "lg_k=12")),
        (CountMin(3, 16), CountMin(3, 32), ("num_buckets=16", "num_buckets=32")),
        (TopK(3), TopK(4), ("lg_max_k=3", "lg_max_k=4")),
        (Quantiles(8), Quantiles(200), ("k=8", "k=200")),
    ],
    ids=lambda p: repr(p) if not isinstance(p, tuple) else "",
)
def test_merging_sketches_with_different_parameters_fails_naming_both(small, large, names):
    foreign = small.prepare("x" if not isinstance(small, Quantiles) else 1.0)
    with pytest.raises(MonoidValueError) as raised:
        large.plus(large.zero(), foreign)
    assert names[0] in str(raised.value) and names[1] in str(raised.value)


def test_decoding_a_sketch_with_other_parameters_under_this_header_fails():
    # The header fingerprint is right; only the sketch inside says lg_k=10.
    header = HyperLogLog(12).encode(HyperLogLog(12).zero())[:-8]
    payload = HyperLogLog(10).prepare("x").serialize_compact()
    with pytest.raises(EncodingError, match="built with lg_k=10, expected lg_k=12"):
        HyperLogLog(12).decode(header + payload)


def test_sketch_payload_is_the_library_serialization():
    hll = HyperLogLog()
    sketch = hll.prepare("x")
    assert hll.encode(sketch).endswith(sketch.serialize_compact())
    assert datasketches.hll_sketch.deserialize(hll.encode(sketch)[25:]).get_estimate() == 1.0


def test_non_sketch_values_raise_a_type_error_naming_where():
    with pytest.raises(MonoidTypeError, match="takes hll_sketch values, got str 'x' at key 'k'"):
        HyperLogLog().validate("x", "key 'k'")
    with pytest.raises(MonoidTypeError, match="takes kll_floats_sketch values, got hll_sketch"):
        Quantiles().plus(Quantiles().zero(), HyperLogLog().zero())


def test_wrong_items_raise_type_or_value_errors():
    with pytest.raises(MonoidTypeError, match="takes str, got 1"):
        TopK().prepare(1)
    with pytest.raises(MonoidTypeError, match="got b'x'"):
        HyperLogLog().prepare(b"x")
    with pytest.raises(MonoidValueError, match="cannot take NaN at row 1"):
        Quantiles().prepare_by_key(np.zeros(2, dtype=np.intp), 1, [1.0, math.nan])
    with pytest.raises(MonoidValueError, match="32-bit float"):
        Quantiles().prepare(1e300)
    with pytest.raises(MonoidTypeError, match="takes str, int, got 1.5"):
        CountMin().estimate(CountMin().zero(), 1.5)


def test_invalid_sketch_parameters_raise_at_construction():
    with pytest.raises(MonoidValueError, match="invalid parameters"):
        HyperLogLog(lg_k=2)
    with pytest.raises(MonoidTypeError, match="k must be an int"):
        Quantiles(k=200.0)
    with pytest.raises(MonoidValueError, match="decodes only seed 9001"):
        CountMin(seed=42)


def test_plus_does_not_mutate_the_sketches():
    kll = Quantiles(8)
    a = kll.fold(kll.prepare_column([float(i) for i in range(50)]))
    b = kll.prepare(3.0)
    before = a.serialize(), b.serialize()
    kll.plus(a, b)
    assert (a.serialize(), b.serialize()) == before


def test_prepare_by_key_is_equivalent_to_reducing_one_item_sketches():
    items = [f"u{i % 37}" for i in range(300)]
    codes = np.arange(300) % 3
    for monoid in (HyperLogLog(4), CountMin(3, 16), TopK(3), Quantiles(8)):
        xs = list(range(300)) if isinstance(monoid, Quantiles) else items
        direct = monoid.prepare_by_key(codes, 4, xs)
        reduced = monoid.reduce_by_key(codes, 4, monoid.prepare_column(xs))
        assert all(map(monoid.equivalent, direct, reduced)), monoid


def test_top_k_lower_bounds_stay_valid_when_the_library_drops_a_purged_sketch():
    top = TopK(lg_max_k=3)
    stream = list("aabbccddefg")
    purged = top.fold(top.prepare_column(stream))
    assert purged.is_empty() and purged.total_weight == len(stream)  # every counter purged
    merged = top.plus(top.prepare("h"), purged)
    truth = collections.Counter(stream + ["h"])
    assert all(merged.get_lower_bound(item) <= count for item, count in truth.items())
    assert top.present(merged) == ["h"]
