"""How results reach a sink: numbers as numbers, everything else as the JSON text of
``present_json`` (``json_text`` unless a monoid overrides it)."""

import json
import math
from dataclasses import dataclass

import numpy as np
import pytest

from monoids import (
    Averaged,
    Count,
    CountMin,
    First,
    HyperLogLog,
    Last,
    MapMonoid,
    Max,
    Moments,
    MonoidTypeError,
    Product,
    Quantiles,
    Sum,
    Timestamped,
    TopK,
    json_text,
)


def strict_json(text: str):
    """``json.loads`` that refuses NaN and the infinities, as PostgreSQL's jsonb does."""

    def refuse(name):
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def sink_text(monoid, value) -> str:
    """What a sink stores for ``value``: the JSON text of what ``monoid`` presents."""
    assert monoid.json_results
    return monoid.present_json(monoid.present(value))


@dataclass(frozen=True)
class Reading:
    sensor: str
    level: float


def test_json_text_writes_numbers_text_containers_and_null():
    value = {"counts": (1, np.int64(2), np.float32(0.5)), "flags": [True, np.bool_(False)], "none": None,
             "text": "é\n\"", "array": np.array([[1, 2], [3, 4]])}
    assert strict_json(json_text(value)) == {
        "array": [[1, 2], [3, 4]], "counts": [1, 2, 0.5], "flags": [True, False], "none": None, "text": "é\n\"",
    }
    assert json_text((1.5, 1e16, 2**70)) == "[1.5,1e+16,1180591620717411303424]"


def test_json_text_writes_nan_and_infinities_as_null():
    assert json_text([math.nan, math.inf, -math.inf, np.float32("inf"), np.float64("nan")]) == "[null,null,null,null,null]"


def test_json_text_writes_bytes_as_base64():
    assert json_text(b"\x00\xffhi") == '"AP9oaQ=="'
    assert json_text({b"\x01": b""}) == '{"AQ==":""}'


def test_json_text_sorts_keys_and_writes_other_keys_as_their_json_text():
    assert json_text({"b": 1, 10: 2, 9: 3, (1, "x"): 4, None: 5, 0.5: 6}) == (
        '{"0.5":6,"10":2,"9":3,"[1,\\"x\\"]":4,"b":1,"null":5}'
    )


def test_json_text_of_a_map_with_both_1_and_text_1_repeats_the_key():
    text = json_text({1: "int", "1": "text"})
    assert text == '{"1":"int","1":"text"}'
    assert strict_json(text) == {"1": "text"}


def test_json_text_writes_a_dataclass_as_an_object_of_its_fields_in_order():
    assert json_text(Reading("oven", math.inf)) == '{"sensor":"oven","level":null}'


def test_a_value_without_json_form_raises_naming_the_monoid_where_and_its_type():
    with pytest.raises(MonoidTypeError, match=r"MapMonoid\(Sum\(kind='int'\)\) holds datetime64 .* at \['a'\]\[1\]"):
        MapMonoid(Sum()).present_json({"a": [1, np.datetime64("2020-01-01")]})
    with pytest.raises(MonoidTypeError, match=r"the value holds complex \(1\+2j\)"):
        json_text(1 + 2j)


@pytest.mark.parametrize(
    "monoid",
    [Sum(), Sum(float), Count(), Max(), Max(float), Averaged(), Moments(), HyperLogLog(), CountMin(), Quantiles()],
    ids=repr,
)
def test_monoids_with_numeric_results_reach_a_sink_as_numbers(monoid):
    assert not monoid.json_results
    assert monoid.result_dtype.kind in "if"


def test_top_k_reaches_a_sink_as_a_json_array_most_frequent_first():
    top = TopK()
    value = top.fold(top.prepare_column(["b", "a", "a", "c", "a", "c"]))
    assert sink_text(top, value) == '["a","c","b"]'
    assert sink_text(top, top.zero()) == "[]"


def test_a_map_reaches_a_sink_as_a_json_object_of_its_presented_values():
    averaged = MapMonoid(Averaged())
    value = {"y": Averaged().prepare(2.0), "x": Averaged().zero(), 3: Averaged().prepare(1.0)}
    assert sink_text(averaged, value) == '{"3":1.0,"x":null,"y":2.0}'
    assert strict_json(sink_text(MapMonoid(Sum()), {"b": 2, "a": 1})) == {"a": 1, "b": 2}


def test_a_product_reaches_a_sink_as_a_json_array_of_its_components():
    product = Product(Sum(), Max(float), Last(), TopK())
    top = TopK().prepare("w")
    assert sink_text(product, (2, -math.inf, Timestamped(5, "x"), top)) == '[2,null,"x",["w"]]'
    assert sink_text(product, product.zero()) == "[0,null,null,[]]"


@pytest.mark.parametrize(
    ("item", "text"), [("x", '"x"'), (7, "7"), (2.5, "2.5"), (math.inf, "null"), (b"\x00\x01", '"AAE="')]
)
@pytest.mark.parametrize("monoid", [First(), Last()], ids=repr)
def test_first_and_last_reach_a_sink_as_the_json_of_their_item(monoid, item, text):
    assert sink_text(monoid, Timestamped(1, item)) == text
    assert sink_text(monoid, None) == "null"


def test_quantiles_at_several_ranks_reach_a_sink_as_a_json_object_by_rank():
    kll = Quantiles(ranks=(0.1, 0.5, 1))
    value = kll.fold(kll.prepare_column(range(1, 11)))
    assert sink_text(kll, value) == '{"0.1":2.0,"0.5":6.0,"1.0":10.0}'
    assert sink_text(kll, kll.zero()) == '{"0.1":null,"0.5":null,"1.0":null}'


def test_a_monoid_may_store_its_results_in_another_json_form():
    class Labelled(TopK):
        def present_json(self, shown):
            return json_text({"top": shown, "count": len(shown)})

    top = Labelled()
    assert strict_json(sink_text(top, top.fold(top.prepare_column(["a", "b", "a"])))) == {"top": ["a", "b"], "count": 2}
