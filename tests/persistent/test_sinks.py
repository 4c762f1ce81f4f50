"""Reading a Parquet sink's final results, without Spark."""

from __future__ import annotations

import pandas as pd

from persistent.sinks.parquet import ParquetSink


def write_batch(directory, generation, batch, frame, complete=True):
    """A batch's directory as Spark writes it: its files, then ``_SUCCESS`` once complete."""
    target = directory / f"generation={generation}" / f"batch={batch:010d}"
    target.mkdir(parents=True)
    frame.to_parquet(target / "part-0.parquet", index=False)
    if complete:
        (target / "_SUCCESS").touch()


def test_the_newest_batch_of_the_newest_generation_wins(tmp_path):
    write_batch(tmp_path, 0, 1, pd.DataFrame({"word": ["a", "b"], "count": [1, 1]}))
    write_batch(tmp_path, 0, 10, pd.DataFrame({"word": ["a"], "count": [3]}))
    # Path B: generation 1 restarts its batch numbers and recomputes "b" from the clock.
    write_batch(tmp_path, 1, 0, pd.DataFrame({"word": ["b"], "count": [2]}))
    final = ParquetSink(str(tmp_path), "word", "count").read()
    assert final.to_dict("list") == {"word": ["a", "b"], "count": [3, 2]}


def test_windowed_results_are_final_per_key_and_window(tmp_path):
    frame = pd.DataFrame({"key": ["k", "k"], "window_start": [0, 10], "window_end": [20, 30], "value": [1.0, 2.0]})
    write_batch(tmp_path, 0, 0, frame)
    write_batch(tmp_path, 0, 1, frame.assign(value=[1.5, 2.0]).iloc[:1])
    final = ParquetSink(f"file://{tmp_path}").read(windowed=True)
    assert final.to_dict("list") == {"key": ["k", "k"], "window_start": [0, 10], "window_end": [20, 30],
                                     "value": [1.5, 2.0]}


def test_a_batch_without_its_success_marker_is_not_read(tmp_path):
    write_batch(tmp_path, 0, 0, pd.DataFrame({"word": ["a", "b"], "count": [1, 1]}))
    # A write that died midway (before Spark's job commit wrote _SUCCESS): the replay rewrites it.
    write_batch(tmp_path, 0, 1, pd.DataFrame({"word": ["a"], "count": [99]}), complete=False)
    final = ParquetSink(str(tmp_path), "word", "count").read()
    assert final.to_dict("list") == {"word": ["a", "b"], "count": [1, 1]}
    assert set(ParquetSink(str(tmp_path), "word", "count").rows()["batch"]) == {0}
