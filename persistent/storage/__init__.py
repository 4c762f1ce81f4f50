"""Where a job keeps what outlives it, and the only package that touches a file system:
the file systems a Python process reaches (``fs``: local, WebHDFS, ``pyarrow.fs``),
Hadoop's through Spark's JVM, the checkpoint and clock stores, the job directory (its
layout and every path under it, its small records, what Spark's offset log holds, the
dead-letter output, the lease) and the files source's log. It reads and writes; which
way a job starts is the runtime's decision. Imports ``core`` and ``state`` only."""
