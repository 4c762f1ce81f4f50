"""The benchmark's outputs: a text table, ``results.json`` and two plots."""

from __future__ import annotations

import json
from pathlib import Path

from bench.measure import CPU_KINDS, RunResult

__all__ = ["table", "cpu_table", "write_json", "plot"]

_COLUMNS = ("implementation", "keys", "rows/s", "median batch ms", "driver MB", "workers MB",
            "ckpt KB/batch", "vs native")


def _cell(value, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _name(r: RunResult) -> str:
    name = r.name if r.distribution == "uniform" else f"{r.name} ({r.distribution})"
    return name + (f" [{r.note}]" if r.note else "")


def spread(lowest_median_highest: tuple[float, float, float]) -> str:
    """A ratio's spread over runs (``bench.measure.ratio_spread``) as ``lowest/median/highest``."""
    return "/".join(f"{value:.2f}" for value in lowest_median_highest)


def _row(r: RunResult) -> list[str]:
    return [
        _name(r),
        f"{r.keys:,}",
        _cell(r.rows_per_s, ",.0f"),
        _cell(r.median_batch_ms, ",.0f"),
        _cell(r.peak_driver_mb, ",.0f"),
        _cell(r.peak_worker_mb, ",.0f"),
        _cell(None if r.checkpoint_bytes_per_batch is None else r.checkpoint_bytes_per_batch / 1024, ",.0f"),
        _cell(r.ratio, ".2f") + (f" [{spread(r.ratio_spread)}]" if r.ratio_spread else "")
        + (f" ({r.baseline})" if r.baseline and r.baseline != "native" else ""),
    ]


def table(results: list[RunResult]) -> str:
    """A Markdown table of the runs."""
    return _markdown([list(_COLUMNS)] + [_row(r) for r in results])


def cpu_table(results: list[RunResult]) -> str:
    """A Markdown table of the CPU seconds each run used, by kind (``bench.measure.cpu_used``),
    with its wall seconds: what a run on few cores shares its cores with."""
    header = ["implementation", "keys", "wall s", *(f"{kind} s" for kind in CPU_KINDS)]
    rows = [[_name(r), f"{r.keys:,}", f"{r.wall_s:.1f}", *(_cell(r.cpu_s.get(kind), ".1f") for kind in CPU_KINDS)]
            for r in results if r.cpu_s]
    return _markdown([header] + rows)


def _markdown(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        cells = [c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))]
        lines.append("| " + " | ".join(cells) + " |")
        if n == 0:
            lines.append("|" + "|".join("-" * (w + 1) + (":" if i else "-") for i, w in enumerate(widths)) + "|")
    return "\n".join(lines)


def write_json(path: Path, results: list[RunResult], extra: dict) -> None:
    """``results.json``: every run with its batches, plus ``extra`` (machine, recovery, targets)."""
    path.write_text(json.dumps({**extra, "runs": [r.to_json() for r in results]}, indent=1) + "\n")


def plot(directory: Path, results: list[RunResult]) -> list[Path]:
    """``throughput.png`` (rows/s by key count) and ``latency.png`` (median batch
    time by key count), one line per implementation, uniform keys."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # The case whose state grows runs over data sets of its own: a table row, not a line here.
    uniform = [r for r in results if r.distribution == "uniform" and r.rows_per_s and not r.name.endswith("-scale")]
    # The key-count series share one batch size; the small-batch case is a table row.
    sizes = [r.batch_rows for r in uniform]
    batch_rows = max(sizes, key=sizes.count) if sizes else 0
    uniform = [r for r in uniform if r.batch_rows == batch_rows]
    names = list(dict.fromkeys(r.name for r in uniform))
    written = []
    for filename, attribute, label in (
        ("throughput.png", "rows_per_s", "rows per second"),
        ("latency.png", "median_batch_ms", "median time per micro-batch (ms)"),
    ):
        figure, axes = plt.subplots(figsize=(7, 4.5))
        for name in names:
            runs = sorted((r for r in uniform if r.name == name), key=lambda r: r.keys)
            axes.plot([r.keys for r in runs], [getattr(r, attribute) for r in runs], marker="o", label=name)
        axes.set_xscale("log")
        axes.set_yscale("log")
        axes.set_xlabel("distinct keys")
        axes.set_ylabel(label)
        axes.set_title(f"{label}, {batch_rows:,} rows per micro-batch")
        axes.grid(True, which="both", alpha=0.3)
        axes.legend(fontsize="small")
        figure.tight_layout()
        figure.savefig(directory / filename, dpi=100)
        plt.close(figure)
        written.append(directory / filename)
    return written
