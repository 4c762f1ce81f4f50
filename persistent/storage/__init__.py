"""Where a job keeps what outlives it, and the only package that touches a file system:
the file systems a Python process reaches (``fs``: local, WebHDFS, ``pyarrow.fs``),
Hadoop's through Spark's JVM, the checkpoint and clock stores, the job directory (its
layout and every path under it, its small records, what Spark's offset log holds, the
dead-letter output, the lease), the files source's log, the runs of the local store
on local disk (``local_runs``), the install's own files
(``package_data``) and the crash points of the failure tests, whose marker files a
test waits for (``faults``). It reads and writes; which way a job starts is the
runtime's decision. Imports ``core`` and ``state`` only."""
