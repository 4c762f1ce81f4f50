"""Draws ``docs/timeline.svg``: a job's event-time timeline, its checkpoints, the
global minimum checkpoint clock, and the two recovery paths.

    python docs/diagrams.py           # rewrite the picture (``make docs``)
    python docs/diagrams.py --check   # exit 1 if the committed picture is out of date

The picture is computed, not drawn by hand: the scenario below runs through the
project's own key groups (``persistent.runtime.keygroup.KeyGroup``, the code the Spark
runtime calls per key group and micro-batch), so the checkpoint times, the clock and
the recovery outcomes it shows are what the code does. The SVG is written with the
standard library only.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

import pandas as pd

from persistent.core.task import MESSAGE_COLUMNS
from persistent.examples.count import VectorizedCount
from persistent.runtime.keygroup import Applied, KeyGroup
from persistent.storage.job_directory import task_name

__all__ = ["Scenario", "simulate", "render", "main", "TIMELINE"]

TIMELINE = Path(__file__).resolve().with_name("timeline.svg")

INTERVAL_MS = 1000
#: One key per key group: key "a" hashes to group 0, key "b" to group 1.
KEYS = {0: "a", 1: "b"}
#: Event times (ms) of the messages each micro-batch reads, per key group.
BATCHES: list[dict[int, list[int]]] = [
    {0: [200, 600, 900], 1: [400, 800]},
    {0: [1300, 1700], 1: [1500, 2100]},
    {0: [2400, 2800, 3200], 1: []},
    {0: [3500, 3900], 1: []},
    {0: [4300], 1: [4600]},
]
#: Path B: the sources rewind to the clock, but the first input they re-read (the
#: files of batch 2) also holds messages before it.
REPLAY_FROM_BATCH = 2


def _frame(by_group: dict[int, list[int]], group: int) -> pd.DataFrame:
    times = by_group.get(group, [])
    return pd.DataFrame({"key": [KEYS[group]] * len(times), "timestamp": times, "value": [1] * len(times)},
                        columns=list(MESSAGE_COLUMNS))


def _micro_batch(group: KeyGroup, messages: pd.DataFrame,
                 watermark_ms: int) -> tuple[Applied, pd.DataFrame, tuple[int, bytes] | None]:
    """What ``GroupFunction`` has the group do in a micro-batch at ``watermark_ms``: what it
    applied, its results, and the checkpoint it took (time, bytes), if one was due."""
    applied = group.apply(messages, watermark_ms=watermark_ms)
    results, checkpoint = group.advance(watermark_ms)
    return applied, results, checkpoint


def _counts(groups: dict[int, KeyGroup]) -> dict[str, int]:
    return {KEYS[g]: int(group.table.get(KEYS[g])) for g, group in groups.items()}


@dataclass
class Scenario:
    """What the scenario did, batch by batch, and how each recovery path ended."""

    #: Watermark (ms) each micro-batch ran with: Spark's, the newest event time of the
    #: batches before it (watermark delay 0).
    watermarks: list[int] = field(default_factory=list)
    #: Checkpoint time taken per batch and key group.
    checkpoints: list[dict[int, int]] = field(default_factory=list)
    #: Global minimum checkpoint clock after each batch (None: no clock yet).
    clocks: list[int | None] = field(default_factory=list)
    #: Counts per key after the last batch, without any failure.
    counts: dict[str, int] = field(default_factory=dict)
    #: Path B: restore point, messages re-read before it (dropped), counts after the replay.
    floor_ms: int = 0
    dropped: list[int] = field(default_factory=list)
    path_b_counts: dict[str, int] = field(default_factory=dict)


def simulate() -> Scenario:
    """Runs the scenario through ``KeyGroup``; raises if a recovery path changes a result."""
    task = VectorizedCount()
    groups = {g: KeyGroup(task, INTERVAL_MS) for g in KEYS}
    s = Scenario()
    stored: dict[int, dict[int, bytes]] = {g: {} for g in KEYS}
    task_clocks: dict[int, int] = {}
    watermark = 0
    spark_state: dict[int, bytes] = {}
    last_results: dict[int, pd.DataFrame] = {}
    for number, batch in enumerate(BATCHES):
        if number == len(BATCHES) - 1:
            spark_state = {g: group.encode() for g, group in groups.items()}
        taken = {}
        for g, group in groups.items():
            _, last_results[g], checkpoint = _micro_batch(group, _frame(batch, g), watermark)
            if checkpoint is not None:
                taken[g] = checkpoint[0]
                stored[g][checkpoint[0]] = checkpoint[1]
                task_clocks[g] = max(checkpoint[0], task_clocks.get(g, 0))
        s.watermarks.append(watermark)
        s.checkpoints.append(taken)
        s.clocks.append(min(task_clocks.values()) if task_clocks else None)
        watermark = max([watermark, *(t for times in batch.values() for t in times)])
    s.counts = _counts(groups)

    # Path A: Spark re-runs the unfinished last batch on its stored state, same offsets.
    replayed = {g: KeyGroup.decode(task, INTERVAL_MS, 0, data) for g, data in spark_state.items()}
    same_results = all(
        _micro_batch(replayed[g], _frame(BATCHES[-1], g), s.watermarks[-1])[1].equals(last_results[g])
        for g in KEYS
    )

    # Path B: every group restored at the clock, the sources re-read from batch 2 on.
    s.floor_ms = s.clocks[-1]
    restored = {g: KeyGroup.restore(task, INTERVAL_MS, s.floor_ms, stored[g][s.floor_ms]) for g in KEYS}
    rereads = {g: sorted(t for b in BATCHES[REPLAY_FROM_BATCH:] for t in b.get(g, [])) for g in KEYS}
    s.dropped = sorted(t for times in rereads.values() for t in times if t < s.floor_ms)
    dropped_by_groups = sum(_micro_batch(restored[g], _frame(rereads, g), s.floor_ms)[0].replayed for g in KEYS)
    s.path_b_counts = _counts(restored)

    if not same_results:
        raise AssertionError("path A: re-running the last batch gave other results")
    if s.path_b_counts != s.counts or dropped_by_groups != len(s.dropped):
        raise AssertionError(f"path B: counts {s.path_b_counts} after the replay, {s.counts} without failure")
    return s


# -- SVG ------------------------------------------------------------------------------

WIDTH, HEIGHT = 960, 625
X0, X1 = 190, 935
END_MS = 5000
COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#e15759"]
INK, GRID, MUTED = "#222222", "#bbbbbb", "#666666"


def _num(value: float) -> str:
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def _x(ms: int) -> float:
    return X0 + (X1 - X0) * ms / END_MS


class _Svg:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def element(self, name: str, body: str | None = None, **attrs) -> None:
        text = " ".join(
            f'{k.rstrip("_").replace("_", "-")}="{_num(v) if isinstance(v, float) else escape(str(v), {chr(34): "&quot;"})}"'
            for k, v in attrs.items()
        )
        self.parts.append(f"<{name} {text}/>" if body is None else f"<{name} {text}>{escape(body)}</{name}>")

    def text(self, x: float, y: float, body: str, size: int = 12, anchor: str = "start", **attrs) -> None:
        self.element("text", body, x=float(x), y=float(y), font_size=size, text_anchor=anchor, fill=INK, **attrs)

    def line(self, x1: float, y1: float, x2: float, y2: float, stroke: str = INK, **attrs) -> None:
        self.element("line", x1=float(x1), y1=float(y1), x2=float(x2), y2=float(y2), stroke=stroke, **attrs)

    def dot(self, x: float, y: float, color: str) -> None:
        self.element("circle", cx=float(x), cy=float(y), r=5, fill=color, stroke="white")

    def diamond(self, x: float, y: float, fill: str) -> None:
        points = f"{_num(x)},{_num(y - 7)} {_num(x + 7)},{_num(y)} {_num(x)},{_num(y + 7)} {_num(x - 7)},{_num(y)}"
        self.element("polygon", points=points, fill=fill, stroke=INK)

    def triangle(self, x: float, y: float, fill: str) -> None:
        points = f"{_num(x)},{_num(y - 7)} {_num(x - 6)},{_num(y + 5)} {_num(x + 6)},{_num(y + 5)}"
        self.element("polygon", points=points, fill=fill, stroke=INK)

    def square(self, x: float, y: float) -> None:
        self.element("rect", x=float(x - 5), y=float(y - 5), width=10, height=10, fill=INK)

    def cross(self, x: float, y: float, color: str) -> None:
        self.line(x - 5, y - 5, x + 5, y + 5, stroke=color, stroke_width=2)
        self.line(x - 5, y + 5, x + 5, y - 5, stroke=color, stroke_width=2)

    def lines(self, x: float, y: float, texts: list[str]) -> None:
        """Lines of small text, one under the other."""
        for number, body in enumerate(texts):
            self.text(x, y + 16 * number, body, size=11)

    def span(self, start_ms: int, end_ms: int, y: float, label: str, **attrs) -> None:
        """A bracket over ``[start_ms, end_ms)`` with ``label`` above it."""
        a, b = _x(start_ms) + 2, _x(end_ms) - 2
        self.element("path", d=f"M{_num(a)},{_num(y - 5)} V{_num(y)} H{_num(b)} V{_num(y - 5)}",
                     fill="none", stroke=INK)
        self.text((a + b) / 2, y - 9, label, size=11, anchor="middle", **attrs)


def render() -> str:
    """The SVG text of the timeline."""
    s = simulate()
    svg = _Svg()
    lanes = {g: 120 + 45 * g for g in KEYS}
    svg.text(20, 28, "One job: two key groups counting keys a and b, checkpoint interval "
             f"{INTERVAL_MS} ms, watermark delay 0", size=14, font_weight="bold")
    svg.text(X1, 56, "event time (ms)", size=11, anchor="end", fill_opacity="0.7")

    # Checkpoint boundaries.
    for t in range(0, END_MS + 1, INTERVAL_MS):
        svg.line(_x(t), 72, _x(t), 335, stroke=GRID, stroke_dasharray="4 4")
        svg.text(_x(t), 68, str(t), size=11, anchor="middle")

    # Lanes: messages by batch, checkpoints by batch (white: the group had no message).
    for g, y in lanes.items():
        svg.text(20, y + 4, f"key group {g} ({task_name(g)})")
        svg.line(X0, y, X1, y, stroke=GRID)
        for number, batch in enumerate(BATCHES):
            for t in batch.get(g, []):
                svg.dot(_x(t), y, COLORS[number])
        for number, taken in enumerate(s.checkpoints):
            if g in taken:
                idle = not BATCHES[number].get(g)
                svg.diamond(_x(taken[g]), y - 17, "white" if idle else COLORS[number])
                svg.text(_x(taken[g]) + 10, y - 13, f"in batch {number}" + (" (idle)" if idle else ""),
                         size=10)

    # Watermark each batch ran with, and the clock after each batch.
    wm_y, clock_y = 230, 275
    svg.text(20, wm_y + 4, "watermark of batch")
    svg.text(20, clock_y + 4, "clock after batch")
    for y in (wm_y, clock_y):
        svg.line(X0, y, X1, y, stroke=GRID)
    for number, watermark in enumerate(s.watermarks):
        svg.triangle(_x(watermark), wm_y, COLORS[number])
        svg.text(_x(watermark), wm_y - 11, str(number), size=10, anchor="middle")
    previous = None
    for number, clock in enumerate(s.clocks):
        if clock is not None and clock != previous:
            svg.square(_x(clock), clock_y)
            svg.text(_x(clock) + 9, clock_y + 4, f"{clock} after batch {number}", size=10)
            previous = clock

    # Left and right of the newest checkpoint time.
    newest = s.clocks[-1]
    svg.span(0, newest, 318, f"left of {newest}: what each checkpoint at {newest} holds")
    svg.span(newest, END_MS, 318, f"right of {newest}: for later checkpoints")

    # Recovery.
    last = len(BATCHES) - 1
    svg.text(20, 372, f"A crash during batch {last}, after the clock reached {newest}:", size=13, font_weight="bold")
    a_y, b_y = 410, 490
    svg.text(20, a_y + 4, "path A: spark/ intact")
    times = [t for ts in BATCHES[last].values() for t in ts]
    svg.element("rect", x=_x(s.watermarks[last]), y=float(a_y - 6), width=_x(max(times)) - _x(s.watermarks[last]),
                height=12, fill=COLORS[last], fill_opacity="0.35")
    for t in times:
        svg.dot(_x(t), a_y, COLORS[last])
    svg.lines(X0, a_y + 26, [
        f"Spark restores its state store as of batch {last - 1} and re-runs batch {last} with the same offsets: "
        "the same results.",
        f"A sink that already holds BatchId(0, {last}) changes nothing.",
    ])

    svg.text(20, b_y + 4, "path B: spark/ lost")
    svg.element("rect", x=float(X0), y=float(b_y - 8), width=_x(s.floor_ms) - X0, height=16, fill="url(#hatch)",
                stroke=GRID)
    svg.element("rect", x=_x(s.floor_ms), y=float(b_y - 8), width=X1 - _x(s.floor_ms), height=16,
                fill=COLORS[2], fill_opacity="0.15", stroke=GRID)
    for number, batch in enumerate(BATCHES[REPLAY_FROM_BATCH:], REPLAY_FROM_BATCH):
        for t in (t for ts in batch.values() for t in ts):
            if t < s.floor_ms:
                svg.cross(_x(t), b_y, COLORS[number])
            else:
                svg.dot(_x(t), b_y, COLORS[number])
    counts = ", ".join(f"{k}={v}" for k, v in sorted(s.path_b_counts.items()))
    svg.lines(X0, b_y + 26, [
        f"Every group is restored from its checkpoint at the clock {s.floor_ms}, the sources rewind to it, "
        "and a new generation starts: BatchId(1, 0), ...",
        f"Re-read messages before {s.floor_ms} ({', '.join(map(str, s.dropped))}) are dropped: the checkpoint "
        "holds them already.",
        f"Counts after the replay: {counts}, as without the crash.",
    ])

    # Legend.
    y = 600
    svg.text(20, y + 4, "micro-batch")
    x = X0 + 8
    for number in range(len(BATCHES)):
        svg.dot(x, y, COLORS[number])
        svg.text(x + 9, y + 4, str(number), size=11)
        x += 40
    for draw, label in (
        (lambda x: svg.diamond(x, y, "white"), "checkpoint (white: the group had no message)"),
        (lambda x: svg.square(x, y), "clock advanced"),
        (lambda x: svg.cross(x, y, MUTED), "dropped"),
    ):
        draw(x + 10)
        svg.text(x + 20, y + 4, label, size=11)
        x += 30 + 6.2 * len(label)
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">\n'
        "<title>Event-time timeline: checkpoints, the global minimum checkpoint clock, "
        "and recovery paths A and B</title>\n"
        '<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" stroke="#999999" stroke-width="2"/>'
        "</pattern></defs>\n"
        f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="white"/>\n'
    )
    return head + "\n".join(svg.parts) + "\n</svg>\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Regenerate the pictures of the documentation.")
    p.add_argument("--check", action="store_true", help="only check that the committed picture is current")
    args = p.parse_args(argv)
    text = render()
    if args.check:
        current = TIMELINE.read_text(encoding="utf-8") if TIMELINE.exists() else ""
        if current != text:
            print(f"{TIMELINE} is out of date: run 'make docs'", file=sys.stderr)
            return 1
        return 0
    TIMELINE.write_text(text, encoding="utf-8")
    print(f"wrote {TIMELINE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
