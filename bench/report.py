"""The benchmark's outputs: a text table, ``results.json``, two plots, and the figures of
docs/performance.md, written from a ``results.json``:

    python -m bench.report [--results bench/results/results.json]
                           [--scale-results bench/results/scale/results.json]
                           [--doc docs/performance.md] [--check]

rewrites the two parts of the document between their marker lines (``markers``) with
the figures of the results (``figures``): ``results`` those of the benchmark, and
``scale-results`` those of a run of the case ``scale`` alone at tens of millions of
keys, which takes about an hour; ``--check`` rewrites nothing and exits 1 if a part
differs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from bench.measure import CPU_KINDS, Batch, RunResult

__all__ = ["table", "cpu_table", "write_json", "plot", "read_json", "figures", "with_figures", "trigger",
           "by_part", "main", "memory_bytes_per_key", "markers", "with_all_figures", "BEGIN", "END"]

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "results.json"
SCALE_RESULTS = ROOT / "bench" / "results" / "scale" / "results.json"
DOC = ROOT / "docs" / "performance.md"


def markers(name: str) -> tuple[str, str]:
    """The lines around the figures ``name`` in the document."""
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


BEGIN, END = markers("results")

_COLUMNS = ("implementation", "keys", "rows/s", "median batch ms", "driver MB", "workers MB",
            "ckpt KB/batch", "vs native")


def _cell(value, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _name(r: RunResult, each_run: bool = True) -> str:
    """The run's name, its distribution and its note; a pooled run's note (each run's
    rows/s) only with ``each_run``."""
    name = r.name if r.distribution == "uniform" else f"{r.name} ({r.distribution})"
    return name + (f" [{r.note}]" if r.note and (each_run or not r.runs) else "")


def spread(lowest_median_highest: tuple[float, float, float]) -> str:
    """A ratio's spread over runs (``bench.measure.ratio_spread``) as ``lowest/median/highest``."""
    return "/".join(f"{value:.2f}" for value in lowest_median_highest)


def _vs(r: RunResult) -> str:
    """The run's ratio to its baseline, with its spread over the runs, and the baseline
    unless it is native."""
    return (_cell(r.ratio, ".2f") + (f" [{spread(r.ratio_spread)}]" if r.ratio_spread else "")
            + (f" ({r.baseline})" if r.baseline and r.baseline != "native" else ""))


def _row(r: RunResult, each_run: bool) -> list[str]:
    return [
        _name(r, each_run),
        f"{r.keys:,}",
        _cell(r.rows_per_s, ",.0f"),
        _cell(r.median_batch_ms, ",.0f"),
        _cell(r.peak_driver_mb, ",.0f"),
        _cell(r.peak_worker_mb, ",.0f"),
        _cell(None if r.checkpoint_bytes_per_batch is None else r.checkpoint_bytes_per_batch / 1024, ",.0f"),
        _vs(r),
    ]


def table(results: list[RunResult], each_run: bool = True) -> str:
    """A Markdown table of the runs; a pooled run's name lists each run's rows/s only
    with ``each_run``."""
    return _markdown([list(_COLUMNS)] + [_row(r, each_run) for r in results])


def cpu_table(results: list[RunResult]) -> str:
    """A Markdown table of the CPU seconds each run used, by kind (``bench.measure.cpu_used``),
    with its wall seconds: what a run on few cores shares its cores with."""
    header = ["implementation", "keys", "wall s", *(f"{kind} s" for kind in CPU_KINDS)]
    rows = [[_name(r), f"{r.keys:,}", f"{r.wall_s:.1f}", *(_cell(r.cpu_s.get(kind), ".1f") for kind in CPU_KINDS)]
            for r in results if r.cpu_s]
    return _markdown([header] + rows)


def trigger(run: dict) -> str:
    """A latency run's trigger (``trigger_ms``, None: Spark's default)."""
    return "default" if run.get("trigger_ms") is None else f"{run['trigger_ms']:,} ms"


def by_part(ms_by_part: dict | None) -> str:
    """Milliseconds by part of a micro-batch (Spark's ``durationMs``, the state
    operators' times), the longest first, those under 0.5 ms left out."""
    parts = sorted((ms_by_part or {}).items(), key=lambda part: -part[1])
    return ", ".join(f"{name} {ms:,.0f}" for name, ms in parts if ms >= 0.5)


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


def read_json(path: Path) -> dict:
    """A ``results.json`` (``write_json``), its ``runs`` as ``RunResult``s; keys that an
    older benchmark did not write are left at their defaults."""
    data = json.loads(Path(path).read_text())
    data["runs"] = [_run(run) for run in data.get("runs", [])]
    return data


def _known(cls, data: dict) -> dict:
    return {name: data[name] for name in (f.name for f in dataclasses.fields(cls)) if name in data}


def _run(data: dict) -> RunResult:
    batches = [Batch(**_known(Batch, batch)) for batch in data.get("batches", [])]
    run = RunResult(**{**_known(RunResult, data), "batches": batches})
    if run.ratio_spread is not None:
        run.ratio_spread = tuple(run.ratio_spread)
    return run


#: The cases whose runs have tables of their own in ``figures``, by the end of their names.
_CASES = ("-small", "-kafka", "-kafka-out", "-scale")


def _case(r: RunResult) -> str:
    return next((case for case in _CASES if r.name.endswith(case)), "")


def figures(results: dict, ran_only: bool = False) -> str:
    """The Markdown of a ``results.json`` (``read_json``) for docs/performance.md: the run,
    then a section each for throughput, the cases ``scale``, ``kafka``, ``small``,
    ``latency`` and ``recovery``, and the targets ("Not run." where the results have
    none, or, ``ran_only``, no section). The CPU seconds by kind (``cpu_table``) stay in
    ``results.json`` and the benchmark's output."""
    runs = results.get("runs", [])
    by_case = {case: [r for r in runs if _case(r) == case] for case in ("", *_CASES)}
    events = ""
    if by_case["-scale"]:
        counts = (results.get("scale") or {}).get("events", 0)  # one for all data sets, or one each
        events = ", " + "/".join(f"{count:,}" for count in (counts if isinstance(counts, list) else [counts])) \
            + " events a data set"
    sections = (
        ("Throughput", by_case[""], lambda rs: table(rs, each_run=False)),
        (f"State that grows (the case `scale`{events})", by_case["-scale"], _scale),
        ("Kafka in, and in and out (the case `kafka`)", by_case["-kafka"] + by_case["-kafka-out"],
         lambda rs: table(rs, each_run=False)),
        ("Small micro-batches (the case `small`)", by_case["-small"], _small),
        ("Latency, Kafka in and out (the case `latency`)", results.get("latency") or [], _latency),
        ("Recovery (the case `recovery`)", results.get("recovery") or [], _recovery),
        ("Targets", results.get("targets") or [], _targets),
    )
    lines = [_the_run(results, bool(by_case[""]))]
    for heading, items, render in sections:
        if items or not ran_only:
            lines += ["", f"### {heading}", "", render(items) if items else "Not run."]
    return "\n".join(lines)


def _the_run(results: dict, with_events: bool = True) -> str:
    """The run's time, machine and versions, master, and (``with_events``) the events of
    the data sets of its main cases."""
    machine, versions = results.get("machine", {}), results.get("versions", {})
    return (f"One run of `bench/run.py`, {results.get('seconds', 0):,.0f} s: {machine.get('cores', '?')} cores "
            f"({machine.get('cpu', '?')}), {machine.get('memory_gb', '?')} GB, {machine.get('system', '?')}; "
            + ", ".join(f"{name} `{version}`" if " " in str(version) else f"{name} {version}"
                        for name, version in versions.items())
            + f"; master `{results.get('master', '?')}`, "
            + (f"{results.get('events', 0):,} events a data set, " if with_events else "")
            + f"{results.get('batch_rows', 0):,} a micro-batch.")


def _small(runs: list[RunResult]) -> str:
    return _markdown([["implementation", "keys", "rows a batch", "median batch ms", "p99 batch ms",
                       "mean ms by part"]]
                     + [[_name(r, each_run=False), f"{r.keys:,}", f"{r.batch_rows:,}", f"{r.median_batch_ms:,.0f}",
                         f"{r.p99_batch_ms:,.0f}", by_part(r.mean_parts_ms) or "-"] for r in runs])


def _latency(runs: list[dict]) -> str:
    return _markdown([["implementation", "trigger", "records/s", "micro-batches", "p50 ms", "p99 ms [each run]",
                       "median ms by part"]]
                     + [[r.get("implementation", "?"), trigger(r), _cell(r.get("rate"), ",.0f"),
                         _cell(r.get("batches"), ",d"), _cell(r.get("p50_ms"), ",.0f"), _p99(r),
                         by_part(r.get("median_ms")) or "-"] for r in runs])


def _p99(run: dict) -> str:
    """A latency row's p99 over all its runs, then each run's in brackets."""
    each = "/".join(f"{ms:,.0f}" for ms in run.get("p99_by_run_ms") or [])
    return _cell(run.get("p99_ms"), ",.0f") + (f" [{each}]" if each else "")


def _recovery(recovery: list[dict]) -> str:
    """Seconds from a restart (or from the SIGKILL before it) to the end of its first
    micro-batch, a row per implementation and key count (``vectorized`` where a record
    names none)."""
    def implementation(r: dict) -> str:
        name = r.get("implementation", "vectorized")
        return f"{name}, killed" if r.get("killed") else name

    rows = list(dict.fromkeys((implementation(r), r["keys"]) for r in recovery))
    seconds = {(implementation(r), r["keys"], r["path"]): r["seconds"] for r in recovery}
    return _markdown([["implementation", "keys", "path A s (Spark's checkpoint)", "path B s (from the clock)"]]
                     + [[name, f"{k:,}", _cell(seconds.get((name, k, "A")), ".1f"),
                         _cell(seconds.get((name, k, "B")), ".1f")] for name, k in rows])


def memory_bytes_per_key(r: RunResult) -> float | None:
    """The run's peak resident memory, the JVMs' (the driver's, which holds the executors
    of ``local[N]``, and those of ``local-cluster``'s) and the Python workers', over its keys."""
    if r.peak_jvm_rss_mb is None or r.peak_worker_mb is None or not r.keys:
        return None
    return (r.peak_jvm_rss_mb + r.peak_worker_mb) * 2**20 / r.keys


def _scale(runs: list[RunResult]) -> str:
    """The case whose state grows: each run's rate, batch times, memory and bytes on disk,
    by key."""
    return _markdown([["implementation", "keys", "rows/s", "median batch ms", "p99 batch ms", "driver MB",
                       "JVM RSS MB", "workers MB", "memory B/key", "disk B/key", "ckpt KB/batch", "groups decoded",
                       "vs"]]
                     + [[_name(r, each_run=False), f"{r.keys:,}", _cell(r.rows_per_s, ",.0f"),
                         _cell(r.median_batch_ms, ",.0f"), _cell(r.p99_batch_ms, ",.0f"),
                         _cell(r.peak_driver_mb, ",.0f"), _cell(r.peak_jvm_rss_mb, ",.0f"),
                         _cell(r.peak_worker_mb, ",.0f"),
                         _cell(memory_bytes_per_key(r), ",.0f"),
                         _cell(sum(r.checkpoint_bytes.values()) / r.keys if r.checkpoint_bytes else None, ",.0f"),
                         _cell(None if r.checkpoint_bytes_per_batch is None else r.checkpoint_bytes_per_batch / 1024,
                               ",.0f"),
                         _cell(r.decoded_groups, ","), _vs(r)] for r in runs])


def _targets(targets: list[dict]) -> str:
    """A row per target; a ratio of pools that took turns with its runs' spread."""
    def measured(t: dict) -> str:
        return f"{t['measured']:,}" + (f" [{spread(t['runs'])}]" if t.get("runs") else "")

    return _markdown([["target", "goal", "measured", "met"]]
                     + [[t["target"], _goal(t), measured(t), "met" if t["met"] else "missed"] for t in targets])


def _goal(target: dict) -> str:
    """A target's goal with its direction, which ``met`` tells unless the figure is the goal."""
    measured, goal = target["measured"], target["goal"]
    if measured == goal:
        return f"{goal:,}"
    return (">= " if (measured > goal) == target["met"] else "<= ") + f"{goal:,}"


def with_figures(document: str, block: str, name: str = "results") -> str:
    """``document`` with ``block`` between its marker lines of ``name``."""
    first, last = markers(name)
    head, begin, rest = document.partition(first + "\n")
    _, end, tail = rest.partition(last + "\n")
    if not begin or not end:
        raise ValueError(f"the document has no lines {first} and {last}, in that order")
    return f"{head}{first}\n{block}\n{last}\n{tail}"


def with_all_figures(document: str, results: Path = RESULTS, scale_results: Path = SCALE_RESULTS) -> str:
    """``document`` with the figures of ``results`` and those of ``scale_results`` (the
    sections it ran only) in their places."""
    document = with_figures(document, figures(read_json(results)))
    return with_figures(document, figures(read_json(scale_results), ran_only=True), "scale-results")


def plot(directory: Path, results: list[RunResult]) -> list[Path]:
    """``throughput.png`` (rows/s by key count) and ``latency.png`` (median batch
    time by key count), one line per implementation, uniform keys; none for results
    without such runs (those of the case ``scale`` alone)."""
    # The case whose state grows runs over data sets of its own: a table row, not a line here.
    uniform = [r for r in results if r.distribution == "uniform" and r.rows_per_s and not r.name.endswith("-scale")]
    if not uniform:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # The key-count series share one batch size; the small-batch case is a table row.
    sizes = [r.batch_rows for r in uniform]
    batch_rows = max(sizes, key=sizes.count)
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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="Writes a results.json's figures into docs/performance.md.")
    p.add_argument("--results", type=Path, default=RESULTS, help="the results (default bench/results/results.json)")
    p.add_argument("--scale-results", type=Path, default=SCALE_RESULTS,
                   help="the results of the case scale alone (default bench/results/scale/results.json)")
    p.add_argument("--doc", type=Path, default=DOC, help="the document (default docs/performance.md)")
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 if the document's figures differ")
    args = p.parse_args(argv)
    document = args.doc.read_text(encoding="utf-8")
    try:
        updated = with_all_figures(document, args.results, args.scale_results)
    except ValueError as exc:
        print(f"{args.doc}: {exc}", file=sys.stderr)
        return 1
    if args.check:
        if updated != document:
            print(f"{args.doc}: its figures are not those of {args.results} and {args.scale_results}: "
                  "run python -m bench.report", file=sys.stderr)
            return 1
    elif updated != document:
        args.doc.write_text(updated, encoding="utf-8")
        print(f"{args.doc}: figures of {args.results} and {args.scale_results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
