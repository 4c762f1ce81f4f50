"""Event times at the edges of micro-batches: messages that share a millisecond with the
end of the previous batches are in order, never late, whatever the batch cuts; messages
behind the watermark are counted as late, and output with the watermark they missed
when the job asks."""

from __future__ import annotations

import json
import sqlite3

import pytest

pytestmark = pytest.mark.spark


def _count_job(tmp_path, source, **settings):
    from count import MessageCount

    from persistent import Job, sink_from_uri

    progress = []
    job = Job(
        task=MessageCount(),
        source=source,
        sink=sink_from_uri(f"sqlite://{tmp_path / 'out.db'}", table="counts", value_column="count"),
        checkpoint_dir=str(tmp_path / "ck"),
        checkpoint_interval_ms=10,
        key_groups=2,
        on_progress=progress.append,
        **settings,
    )
    return job, progress


def _counts(tmp_path) -> dict[str, int]:
    with sqlite3.connect(tmp_path / "out.db") as db:
        return dict(db.execute("SELECT key, count FROM counts").fetchall())


def test_redis_entries_of_one_millisecond_cut_into_several_batches_are_all_counted(spark, tmp_path, redis_url):
    import redis

    from persistent import RedisSource

    # Seven entries at each millisecond, three per batch: most batches end inside a
    # millisecond, and some hold nothing but the millisecond the previous ones ended in.
    with redis.Redis.from_url(redis_url) as client:
        for ms in range(1, 11):
            for seq in range(7):
                client.xadd("events", {"key": f"k{seq % 3}", "value": "1"}, id=f"{ms}-{seq}")
    job, progress = _count_job(tmp_path, RedisSource(redis_url, ("events",), max_entries_per_batch=3))
    job.run(spark)
    assert _counts(tmp_path) == {"k0": 30, "k1": 20, "k2": 20}
    assert sum(p.rows for p in progress) == 70 and sum(p.late for p in progress) == 0


def _write_lines(path, times: list[int]) -> None:
    path.write_text("".join(json.dumps({"key": f"k{i % 2}", "timestamp": t}) + "\n" for i, t in enumerate(times)))


def test_json_lines_whose_files_share_their_boundary_time_are_all_counted(spark, tmp_path):
    from persistent import FilesSource

    inputs = tmp_path / "in"
    inputs.mkdir()
    _write_lines(inputs / "a.jsonl", [1, 5, 20])
    _write_lines(inputs / "b.jsonl", [20, 20])
    _write_lines(inputs / "c.jsonl", [20, 20, 21])
    job, progress = _count_job(tmp_path, FilesSource(str(inputs), file_format="jsonl", max_files_per_batch=1))
    job.run(spark)
    assert _counts(tmp_path) == {"k0": 5, "k1": 3}
    assert sum(p.rows for p in progress) == 8 and sum(p.late for p in progress) == 0


def test_files_written_while_the_job_was_stopped_are_read_in_the_order_they_were_written(spark, tmp_path):
    import os

    from persistent import FilesSource

    inputs = tmp_path / "in"
    inputs.mkdir()

    def write(name: str, first_ms: int, written_s: int) -> None:
        _write_lines(inputs / name, list(range(first_ms, first_ms + 100)))
        os.utime(inputs / name, (written_s, written_s))

    # Two producers each write a file of 100 ms at a time; a file a micro-batch, the
    # watermark delay of a file's span keeps the other producer's file in order.
    write("p-1.jsonl", 1, 1_000)
    write("q-1.jsonl", 1, 1_001)
    source = FilesSource(str(inputs), file_format="jsonl", max_files_per_batch=1)
    _count_job(tmp_path, source, watermark_delay_ms=100)[0].run(spark)
    # They went on while the job was stopped; by name, p-3 sorts before q-2.
    write("p-2.jsonl", 101, 1_002)
    write("q-2.jsonl", 101, 1_003)
    write("p-3.jsonl", 201, 1_004)
    job, progress = _count_job(tmp_path, source, watermark_delay_ms=100)
    job.run(spark)
    assert _counts(tmp_path) == {"k0": 250, "k1": 250}
    assert sum(p.late for p in progress) == 0


def test_messages_behind_the_watermark_are_counted_as_late(spark, tmp_path):
    from persistent import FilesSource

    inputs = tmp_path / "in"
    inputs.mkdir()
    _write_lines(inputs / "a.jsonl", [10, 30])
    _write_lines(inputs / "b.jsonl", [31])
    _write_lines(inputs / "c.jsonl", [2, 3, 40])  # 2 and 3 are behind a watermark of 30 (or 31)
    job, progress = _count_job(tmp_path, FilesSource(str(inputs), file_format="jsonl", max_files_per_batch=1))
    job.run(spark)
    assert sum(_counts(tmp_path).values()) == 4
    assert sum(p.rows for p in progress) == 4 and sum(p.late for p in progress) == 2
    records = [json.loads(p.read_text()) for p in sorted((tmp_path / "ck" / "progress").glob("*.json"))]
    assert sum(r["late"] for r in records) == 2


def test_late_messages_go_to_the_dead_letter_output_with_the_watermark_they_missed(spark, tmp_path):
    from persistent import FilesSource

    inputs = tmp_path / "in"
    inputs.mkdir()
    _write_lines(inputs / "a.jsonl", [10, 30])
    _write_lines(inputs / "b.jsonl", [31])
    # Behind the watermark of 31: 2 (Spark's own filter would have dropped it) and 30
    # (one that filter, a micro-batch behind, would have let through); 31 is in order.
    _write_lines(inputs / "c.jsonl", [2, 30, 31, 40])
    job, progress = _count_job(tmp_path, FilesSource(str(inputs), file_format="jsonl", max_files_per_batch=1),
                               late_records="output")
    job.run(spark)
    assert _counts(tmp_path) == {"k0": 3, "k1": 2}
    assert sum(p.late for p in progress) == 2 and sum(p.dead_letters for p in progress) == 2
    letters = job.dead_letters.read().sort_values("event_time_ms")
    assert letters[["reason", "event_time_ms", "watermark_ms"]].values.tolist() == [["late", 2, 31], ["late", 30, 31]]
    assert [json.loads(r)["key"] for r in letters["record"]] == ["k0", "k1"]
