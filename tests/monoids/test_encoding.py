import json

import numpy as np
import pytest

from monoids import (
    Averaged,
    Count,
    CountMin,
    EncodingError,
    First,
    HyperLogLog,
    Last,
    MapMonoid,
    Max,
    Monoid,
    Min,
    Moments,
    Product,
    Quantiles,
    Sum,
    Timestamped,
    TopK,
    from_identity,
)

HEADER_SIZE = 25


# (monoid, a function making a sample value): sketches made at module level would
# outlive the interpreter's clean-up and make nanobind report leaks at exit.
SAMPLES = [
    (Sum(int), lambda m: 5),
    (Sum(float), lambda m: 2.5),
    (Count(), lambda m: 3),
    (Max(int), lambda m: 7),
    (Min(float), lambda m: -1.5),
    (Averaged(), lambda m: m.prepare(2.0)),
    (Moments(), lambda m: m.fold(m.prepare_column([1.0, 2.0, 4.0]))),
    (Product(Sum(), First()), lambda m: (1, Timestamped(5, "x"))),
    (MapMonoid(Sum()), lambda m: {"a": 1, 2: 3}),
    (First(), lambda m: Timestamped(1, b"xy")),
    (Last(), lambda m: Timestamped(-1, "é")),
    (HyperLogLog(), lambda m: m.prepare("x")),
    (CountMin(3, 16), lambda m: m.prepare("x")),
    (TopK(), lambda m: m.prepare("x")),
    (Quantiles(), lambda m: m.prepare(1.0)),
]
IDS = [repr(m) for m, _ in SAMPLES]


class SumV2(Sum):
    version = 2


@pytest.mark.parametrize("monoid, sample", SAMPLES, ids=IDS)
def test_values_and_columns_round_trip_including_zero_and_empty_columns(monoid, sample):
    value = sample(monoid)
    assert monoid.equivalent(monoid.decode(monoid.encode(value)), value)
    column = monoid.column([value, monoid.zero()])
    decoded = monoid.values(monoid.decode_column(monoid.encode_column(column)))
    assert all(map(monoid.equivalent, decoded, [value, monoid.zero()]))
    assert len(monoid.decode_column(monoid.encode_column(monoid.column([])))) == 0


@pytest.mark.parametrize("monoid, sample", SAMPLES, ids=IDS)
def test_decoding_truncated_bytes_fails(monoid, sample):
    value = sample(monoid)
    for data in (monoid.encode(value), monoid.encode_column(monoid.column([value, value]))):
        for cut in (1, 8, len(data) - HEADER_SIZE, len(data) - 10):
            with pytest.raises(EncodingError, match=repr(monoid).replace("(", r"\(").replace(")", r"\)")):
                (monoid.decode if data[2] == 0 else monoid.decode_column)(data[:-cut])


@pytest.mark.parametrize("monoid, sample", SAMPLES, ids=IDS)
def test_decoding_bytes_with_trailing_garbage_fails(monoid, sample):
    value = sample(monoid)
    with pytest.raises(EncodingError):
        monoid.decode(monoid.encode(value) + b"\0")
    with pytest.raises(EncodingError):
        monoid.decode_column(monoid.encode_column(monoid.column([value])) + b"\0")


def test_decoding_bytes_of_another_monoid_fails():
    with pytest.raises(EncodingError, match="bytes hold a value of monoid 'max', not 'sum'"):
        Sum().decode(Max().encode(1))
    with pytest.raises(EncodingError, match="monoid 'first', not 'last'"):
        Last().decode_column(First().encode_column(First().column([None])))


def test_decoding_bytes_written_with_other_parameters_fails():
    with pytest.raises(EncodingError, match="written by 'sum' with other parameters"):
        Sum(float).decode(Sum(int).encode(1))
    with pytest.raises(EncodingError, match="other parameters"):
        HyperLogLog(12).decode(HyperLogLog(10).encode(HyperLogLog(10).prepare("x")))
    with pytest.raises(EncodingError, match="other parameters"):
        MapMonoid(Sum(float)).decode(MapMonoid(Sum(int)).encode({"a": 1}))


def test_decoding_bytes_of_another_encoding_version_fails():
    with pytest.raises(EncodingError, match="encoding version 2, this monoid reads version 1"):
        Sum().decode(SumV2().encode(1))


def test_decoding_bytes_of_a_component_of_another_version_fails():
    with pytest.raises(EncodingError, match="other parameters"):
        Product(Sum()).decode(Product(SumV2()).encode((1,)))


def test_decoding_a_column_as_a_value_fails():
    with pytest.raises(EncodingError, match="expected a value, found the other"):
        Sum().decode(Sum().encode_column(np.array([1, 2])))


def test_decoding_bytes_that_are_no_encoding_fails():
    with pytest.raises(EncodingError, match="not an encoded monoid value"):
        Sum().decode(b"certainly not an encoded monoid value")
    with pytest.raises(EncodingError, match="too short"):
        Sum().decode(b"MN")


def test_decoding_a_garbage_sketch_payload_fails_naming_the_sketch():
    header = HyperLogLog().encode(HyperLogLog().zero())[:HEADER_SIZE]
    with pytest.raises(EncodingError, match="payload is no hll_sketch"):
        HyperLogLog().decode(header + b"garbage!")


def test_decoding_an_unknown_item_tag_fails():
    data = First().encode(Timestamped(1, "x"))
    tag_at = HEADER_SIZE + 1 + 8
    with pytest.raises(EncodingError, match="unknown item tag b'z'"):
        First().decode(data[:tag_at] + b"z" + data[tag_at + 1 :])


def test_items_keep_their_type_through_the_round_trip():
    last = Last()
    for item in ("1", 1, 1.0, b"1", -(2**63), float("inf")):
        decoded = last.decode(last.encode(Timestamped(7, item)))
        assert type(decoded.item) is type(item) and decoded.item == item


def test_map_encoding_does_not_depend_on_insertion_order():
    m = MapMonoid(Sum())
    assert m.encode({"b": 1, 2: 2, "a": 3, -1: 4}) == m.encode({-1: 4, "a": 3, 2: 2, "b": 1})


def test_numeric_and_record_columns_encode_as_raw_big_endian_records():
    payload = Sum().encode_column(np.array([1, 2]))[HEADER_SIZE:]
    assert payload == np.array([2, 1, 2], ">i8").tobytes()
    averaged = Averaged().prepare_column([1.0, 2.0])
    assert len(Averaged().encode_column(averaged)) == HEADER_SIZE + 8 + 2 * 16


class Span(Monoid):
    """(low, high) of readings, written as algebra and a record ``dtype`` only: no codec code."""

    name = "test-span"
    dtype = np.dtype([("low", "f8"), ("high", "i8")])

    def zero(self):
        return (np.inf, np.iinfo(np.int64).min)

    def plus(self, a, b):
        return (min(a[0], b[0]), max(a[1], b[1]))


def test_a_monoid_with_a_fixed_width_dtype_encodes_its_values_as_records():
    span = Span()
    assert span.decode(span.encode((1.5, 7))) == (1.5, 7)
    assert span.encode((1.5, 7))[HEADER_SIZE:] == np.array([(1.5, 7)], span.dtype.newbyteorder(">")).tobytes()
    column = span.column([(1.5, 7), span.zero()])
    payload = span.encode_column(column)[HEADER_SIZE:]
    assert payload[:8] == (2).to_bytes(8, "big") and len(payload) == 8 + 2 * 16
    assert span.values(span.decode_column(span.encode_column(column))) == [(1.5, 7), span.zero()]


def test_a_monoid_of_object_values_without_a_codec_fails_where_it_is_defined():
    with pytest.raises(TypeError, match=r"\.Words has no codec: its values are objects \(dtype object\); "
                       "give it a fixed-width dtype, or _encode_payload and _decode_payload"):
        class Words(Monoid):
            name = "test-words"

            def zero(self):
                return ()

            def plus(self, a, b):
                return a + b
    with pytest.raises(EncodingError, match="no monoid named 'test-words'"):
        from_identity({"name": "test-words", "version": 1, "params": {}})


def test_product_columns_encode_as_one_column_per_component():
    product = Product(Sum(), Max(float))
    data = product.encode_column(product.column([(1, 2.0), (3, 4.0)]))
    assert len(data) == HEADER_SIZE + 2 * (4 + 8 + 16)


# -- identities ----------------------------------------------------------------------


@pytest.mark.parametrize("monoid, sample", SAMPLES, ids=IDS)
def test_every_built_in_monoid_is_rebuilt_from_its_identity_as_json(monoid, sample):
    rebuilt = from_identity(json.loads(json.dumps(monoid.identity())))
    assert rebuilt == monoid
    value = sample(monoid)
    assert monoid.equivalent(rebuilt.decode(monoid.encode(value)), value)


class Text(Monoid):
    """Concatenated strings; without a ``name`` of its own, so no monoid is named by it."""

    def zero(self):
        return ""

    def plus(self, a, b):
        return a + b

    def _encode_payload(self, value):
        return value.encode()

    def _decode_payload(self, data):
        return data.decode()


def test_a_monoid_defined_outside_the_package_is_found_by_name():
    class Appending(Text):
        name = "test-identity-appending"

    assert type(from_identity(Appending().identity())) is Appending


def test_redefining_a_monoid_class_replaces_it():
    def define():
        class Redefined(Text):
            name = "test-identity-redefined"

        return Redefined

    define()
    newest = define()
    assert type(from_identity(newest().identity())) is newest


def test_rebuilding_a_monoid_whose_name_two_classes_use_fails():
    class One(Text):
        name = "test-identity-twice"

    class Two(Text):
        name = "test-identity-twice"

    with pytest.raises(EncodingError, match="'test-identity-twice' is defined more than once"):
        from_identity(Two().identity())


@pytest.mark.parametrize(
    ("identity", "message"),
    [
        ({"name": "no-such-monoid", "version": 1, "params": {}}, "no monoid named 'no-such-monoid'"),
        ({"name": "sum", "version": 2, "params": {"kind": "int"}}, "describes itself as"),
        ({"name": "sum", "version": 1, "params": {"kind": "complex"}}, "cannot rebuild monoid 'sum'"),
        ({"name": "hyperloglog", "version": 1, "params": {"bits": 3}}, "cannot rebuild monoid 'hyperloglog'"),
        ({"name": "map", "version": 1, "params": {"values": {"name": "nope"}}}, "cannot rebuild monoid 'map'"),
        ({"version": 1}, "does not describe a monoid"),
        ("sum", "does not describe a monoid"),
    ],
)
def test_rebuilding_from_a_bad_identity_fails_naming_it(identity, message):
    with pytest.raises(EncodingError, match=message):
        from_identity(identity)
