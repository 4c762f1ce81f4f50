"""Law checks to run in the tests of any monoid, built-in or your own.

``check_laws(monoid, a, b, c)`` checks every law on three values;
``check_monoid_laws(monoid, values)`` draws the values (and columns with random keys)
from a hypothesis strategy and runs the same checks on each draw (hypothesis comes with
the ``laws`` extra: ``pip install 'persistent-state[laws]'``). A broken law raises
``AssertionError`` naming the law, the monoid and the values.

Values are compared with ``equiv``, by default the monoid's ``equivalent`` (``==``
unless the monoid rounds or sketches). The laws:

* associativity, left and right identity, commutativity (if ``monoid.commutative``);
* for a ``Group``: ``plus(minus(a, b), b) ≈ a`` and ``plus(a, negate(a)) ≈ zero()``;
* ``sum`` equals repeated ``plus`` from ``zero()``;
* ``plus`` (and every other operation) leaves its arguments unchanged, judged by their
  encodings;
* encode/decode round trips of values and columns;
* the column operations equal the scalar ones: ``column``/``values``, ``fold``,
  ``reduce_by_key`` (per key, in row order, ``zero()`` for empty keys),
  ``plus_columns``, ``zeros``, ``present_column``;
* where results reach a sink as JSON (``json_results``), ``present_json`` gives text
  that ``json.loads`` reads without NaN or the infinities, which JSON lacks.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from monoids.base import Group, Monoid, MonoidError

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = ["check_laws", "check_monoid_laws"]

Equivalence = Callable[[Any, Any], bool]

#: Keys of the drawn code vectors: few, so that keys repeat and some stay empty.
_KEYS = 4
_MAX_ROWS = 12
_MAX_REPR = 300


def _show(monoid: Monoid, value: Any) -> str:
    text = repr(value)
    if text.startswith("<"):  # an opaque object (a sketch): show what it presents instead
        text = f"{type(value).__name__}(present={monoid.present(value)!r})"
    return text if len(text) <= _MAX_REPR else text[: _MAX_REPR - 3] + "..."


def _same_shown(x: Any, y: Any) -> bool:
    return bool(x == y) or (x != x and y != y)  # NaN presents as NaN


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def _equivalence(monoid: Monoid, equiv: Equivalence | None) -> Equivalence:
    return equiv or getattr(monoid, "equivalent", operator.eq)


class _Checker:
    """Compares results for one set of inputs and reports failures naming them.

    ``inputs`` maps names to a value or, for ``values``, a list of values.
    """

    def __init__(self, monoid: Monoid, equiv: Equivalence, **inputs: Any):
        self.monoid = monoid
        self.equiv = equiv
        self.inputs = ", ".join(
            f"{name}=[{', '.join(_show(monoid, v) for v in value)}]"
            if name == "values"
            else f"{name}={_show(monoid, value)}"
            for name, value in inputs.items()
        )

    def fail(self, law: str, detail: str) -> NoReturn:
        raise AssertionError(f"{law} fails for {self.monoid!r} with {self.inputs}: {detail}")

    def same(self, law: str, left: Any, right: Any) -> None:
        if not self.equiv(left, right):
            self.fail(
                law,
                f"{_show(self.monoid, left)} is not equivalent to {_show(self.monoid, right)}",
            )

    def same_all(self, law: str, left: Sequence[Any], right: Sequence[Any], unit: str = "row") -> None:
        if len(left) != len(right):
            self.fail(law, f"{len(left)} results, expected {len(right)}")
        for i, (x, y) in enumerate(zip(left, right)):
            self.same(f"{law} ({unit} {i})", x, y)

    def unchanged(self, operation: str, before: list[bytes], after: list[bytes]) -> None:
        if before != after:
            self.fail("immutability", f"{operation} mutated its arguments")

    def plus(self, x: Any, y: Any) -> Any:
        """``monoid.plus(x, y)``, failing if it mutates ``x`` or ``y``."""
        before = [self.monoid.encode(x), self.monoid.encode(y)]
        out = self.monoid.plus(x, y)
        self.unchanged("plus", before, [self.monoid.encode(x), self.monoid.encode(y)])
        return out


def _check_scalar_laws(ch: _Checker, a: Any, b: Any, c: Any) -> None:
    m, plus = ch.monoid, ch.plus
    zero = m.zero()
    ch.same("associativity", plus(plus(a, b), c), plus(a, plus(b, c)))
    for v in (a, b, c):
        ch.same("left identity", plus(zero, v), v)
        ch.same("right identity", plus(v, zero), v)
    if m.commutative:
        ch.same("commutativity", plus(a, b), plus(b, a))
    if isinstance(m, Group):
        ch.same("inverse (plus(minus(a, b), b) == a)", plus(m.minus(a, b), b), a)
        ch.same("inverse (plus(a, negate(a)) == zero)", plus(a, m.negate(a)), zero)
    ch.same("sum", m.sum([a, b, c]), plus(plus(plus(zero, a), b), c))
    ch.same("sum of nothing", m.sum([]), zero)
    for v in (a, b, c, zero):
        ch.same("encoding round trip", m.decode(m.encode(v)), v)


def _check_columns(ch: _Checker, values: list[Any], codes: np.ndarray, n: int) -> None:
    m = ch.monoid
    column = m.column(values)
    if column.dtype != m.dtype or column.shape != (len(values),):
        ch.fail("column", f"got {column.dtype} shape {column.shape}, expected {m.dtype} ({len(values)},)")
    encoded = m.encode_column(column)
    ch.same_all("column round trip", m.values(column), values)
    ch.same("fold", m.fold(column), m.sum(values))
    by_key = m.values(m.reduce_by_key(codes, n, column))
    expected = [m.sum(v for v, code in zip(values, codes.tolist()) if code == k) for k in range(n)]
    ch.same_all("reduce_by_key", by_key, expected, unit="key")
    rotated = values[1:] + values[:1]
    ch.same_all(
        "plus_columns",
        m.values(m.plus_columns(column, m.column(rotated))),
        [m.plus(x, y) for x, y in zip(values, rotated)],
    )
    ch.same_all("zeros", m.values(m.zeros(n)), [m.zero()] * n)
    ch.same_all("column encoding round trip", m.values(m.decode_column(encoded)), values)
    shown = m.present_column(column)
    if shown.dtype != m.result_dtype or len(shown) != len(values):
        ch.fail("present_column", f"got {shown.dtype} of {len(shown)}, expected {m.result_dtype}")
    for i, (x, v) in enumerate(zip(shown.tolist(), values)):
        if not _same_shown(x, m.present(v)):
            ch.fail(f"present_column (row {i})", f"{x!r} differs from present: {m.present(v)!r}")
        if m.json_results:
            _check_json(ch, f"present_json (row {i})", x)
    ch.unchanged("a column operation", [encoded], [m.encode_column(column)])


def _check_json(ch: _Checker, law: str, shown: Any) -> None:
    try:
        text = ch.monoid.present_json(shown)
    except MonoidError as exc:
        ch.fail(law, str(exc))
    if not isinstance(text, str):
        ch.fail(law, f"returned {type(text).__name__} {text!r}, not text")
    try:
        json.loads(text, parse_constant=_refuse_constant)
    except ValueError as exc:
        ch.fail(law, f"{text!r} is not JSON: {exc}")


def check_laws(monoid: Monoid, a: Any, b: Any, c: Any, equiv: Equivalence | None = None) -> None:
    """Checks every law (see the module) on ``a``, ``b`` and ``c``; raises ``AssertionError``.

    The column laws run on the column ``[a, b, c]`` with keys ``[0, 1, 0]`` out of 3
    (so key 2 is empty). ``equiv`` defaults to ``monoid.equivalent`` (else ``==``).
    """
    a, b, c = (monoid.validate(v, name) for v, name in ((a, "a"), (b, "b"), (c, "c")))
    encoded = [monoid.encode(v) for v in (a, b, c)]
    ch = _Checker(monoid, _equivalence(monoid, equiv), a=a, b=b, c=c)
    _check_scalar_laws(ch, a, b, c)
    _check_columns(ch, [a, b, c], np.array([0, 1, 0], dtype=np.intp), 3)
    ch.unchanged("an operation", encoded, [monoid.encode(v) for v in (a, b, c)])


def check_monoid_laws(
    monoid: Monoid,
    values: SearchStrategy[Any],
    equiv: Equivalence | None = None,
    max_examples: int = 100,
) -> None:
    """Runs ``check_laws`` on triples drawn from the hypothesis strategy ``values``, and
    the column laws on drawn lists of values with random keys (0..3, some empty).

    Uses the active hypothesis settings profile, with ``max_examples`` and no deadline;
    raises the ``AssertionError`` of the simplest failing example hypothesis finds.
    """
    try:
        from hypothesis import HealthCheck, given, settings
        from hypothesis import strategies as st
    except ImportError as exc:
        raise ImportError(
            "check_monoid_laws draws its values with hypothesis, which is not installed: "
            "pip install 'persistent-state[laws]'"
        ) from exc

    rows = st.lists(st.tuples(st.integers(0, _KEYS - 1), values), max_size=_MAX_ROWS)

    @settings(
        max_examples=max_examples,
        deadline=None,
        report_multiple_bugs=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(a=values, b=values, c=values, rows=rows)
    def laws(a: Any, b: Any, c: Any, rows: list[tuple[int, Any]]) -> None:
        check_laws(monoid, a, b, c, equiv)
        drawn = [monoid.validate(v, f"row {i}") for i, (_, v) in enumerate(rows)]
        codes = np.array([code for code, _ in rows], dtype=np.intp)
        ch = _Checker(monoid, _equivalence(monoid, equiv), values=drawn, codes=codes.tolist())
        _check_columns(ch, drawn, codes, _KEYS)

    laws()
