"""MessageCount from the generator, per-message task form, against counts computed here."""

from __future__ import annotations

import sqlite3

import pytest

pytestmark = pytest.mark.spark


def test_generated_message_counts_are_exact(spark, tmp_path):
    import count

    total, keys = 5_000, 7
    args = count.parser().parse_args(
        ["--checkpoint", str(tmp_path / "ck"), "--output", f"sqlite://{tmp_path / 'out.db'}",
         "--total", str(total), "--keys", str(keys), "--rows-per-batch", "2000", "--available-now",
         "--key-groups", "4"]
    )
    job = count.build_job(args)
    job.on_progress = None
    job.run(spark)
    with sqlite3.connect(tmp_path / "out.db") as db:
        counted = dict(db.execute("SELECT key, count FROM counts").fetchall())
    expected = {f"k{k}": len(range(k, total, keys)) for k in range(keys)}
    assert counted == expected
