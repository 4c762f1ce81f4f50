"""Where a job keeps what outlives it: the file systems a Python process reaches
(local, WebHDFS, ``pyarrow.fs``), Hadoop's through Spark's JVM, the job directory
(its layout, the generation record, the choice of recovery path) and the files
source's log. Imports ``core`` and ``state`` only."""
