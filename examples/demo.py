"""``make demo``: the word count example on the corpus in examples/data/corpus.

Runs on a local Spark master with the defaults in conf/, prints the top words and
the global minimum checkpoint clock. Run it twice: the second run continues from the
checkpoint and changes no count. Installed, it is ``python -m persistent.examples.demo``
(the corpus is package data); it writes ``demo-output/`` in the working directory.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys

from persistent.examples import wordcount
from persistent.storage.hadoop_fs import HadoopFileSystem
from persistent.storage.job_directory import JobDirectory
from persistent.tools.session import spark_session

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = "demo-output"


def main(argv: list[str] | None = None) -> int:
    options = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    options.add_argument("--out", default=OUT, help="directory of the checkpoint and the database (default %(default)s)")
    out = options.parse_args(argv).out
    database = os.path.join(out, "wordcount.db")
    args = wordcount.parser().parse_args(
        ["--input", os.path.join(HERE, "data", "corpus"), "--checkpoint", os.path.join(out, "checkpoint"),
         "--output", f"sqlite://{database}", "--available-now", "--files-per-batch", "1"]
    )
    spark = spark_session("wordcount-demo")
    job = wordcount.build_job(args)
    job.run(spark)
    with sqlite3.connect(database) as db:
        top = db.execute("SELECT word, count FROM wordcount ORDER BY count DESC, word LIMIT 10").fetchall()
    print("\ntop words:")
    for word, count in top:
        print(f"  {count:4d}  {word}")
    clock = JobDirectory(HadoopFileSystem(spark, job.checkpoint_dir), job.checkpoint_dir).clock.read()
    print(f"\ncheckpoint clock: {clock.clock_ms if clock else 'none yet'} ms "
          f"({len(clock.task_clocks) if clock else 0} tasks)  in {job.checkpoint_dir}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
