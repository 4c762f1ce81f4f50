"""Word count over a directory of text files, exactly once by default.

    spark-submit examples/wordcount.py --input DIR --checkpoint DIR --output sqlite:///PATH [--available-now]
    spark-submit --packages org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0 examples/wordcount.py \
        --kafka HOST:PORT --topic TOPIC --checkpoint DIR --output sqlite:///PATH [--available-now]

A Kafka record's value is a line of text, at the record's timestamp.

With SQLite output the counts are in table ``wordcount(word TEXT PRIMARY KEY, count INTEGER)``.
Running it again on the same checkpoint continues where it stopped and changes no count.
With ``--delivery at-least-once`` or ``at-most-once`` each micro-batch appends its own
counts to ``wordcount(word, count, generation, batch)`` instead; the totals are
``SELECT word, SUM(count) FROM wordcount GROUP BY word`` (docs/delivery.md).
"""

from __future__ import annotations

import argparse
import sys

from persistent import FilesSource, Job
from persistent.core.errors import ConfigError
from persistent.examples.count import VectorizedCount
from persistent.tools.options import (
    add_job_options,
    add_kafka_options,
    job_settings,
    kafka_source,
    run_app,
)


class WordCount(VectorizedCount):
    """Counts each word: every message (one word) adds 1."""


def split_words(lines):
    """One message per word (letters, digits, underscores and apostrophes, in any
    script): key = the lower-cased word, time = the line's time."""
    from pyspark.sql import functions as F

    # (?U): Unicode words, as Python's \w has them; Java's \w alone is ASCII, and splits "café".
    words = lines.select(F.explode(F.split(F.lower("value"), r"(?U)[^\w']+")).alias("key"), "timestamp")
    return words.where(F.length("key") > 0).withColumn("value", F.lit(1))


def build_job(args) -> Job:
    if args.kafka or args.topic:
        source = kafka_source(args)
    elif args.input:
        source = FilesSource(args.input, "text", max_files_per_batch=args.files_per_batch,
                             webhdfs_address=args.webhdfs_address)
    else:
        raise ConfigError("wordcount reads --input DIR or --kafka BOOTSTRAP --topic TOPIC: give one")
    return Job(
        task=WordCount(),
        source=source,
        prepare=split_words,
        **job_settings(args, table="wordcount", key_column="word", value_column="count"),
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--input",
                   help="directory of text files: a local path, or a file://, hdfs://, s3:// or gs:// URI (new files are "
                        "taken in the order they were written; a file once read must not change)")
    p.add_argument("--files-per-batch", type=int, default=1, help="files read per micro-batch")
    add_kafka_options(p)
    add_job_options(p)
    return p


def main(argv=None) -> int:
    return run_app(parser(), build_job, "wordcount", argv)


if __name__ == "__main__":
    sys.exit(main())
