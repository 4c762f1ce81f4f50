"""What the two halves of the fold agree on: the names of the local properties through
which the driver tells Spark's half (``persistent/jvm/Fold.scala``) the micro-batch's
watermark and whether to fold, and the names of the aggregate functions a partial fold
asks of Spark.

Defined here only: ``build_jars.py`` writes each of them into ``Wire.scala``
(``object Wire``, under the same names) before it compiles Spark's half; this module
imports nothing, since the build reads it before the project is installed.
"""

#: The local property that carries the micro-batch's watermark to its tasks (``BatchWatermark``).
WATERMARK_PROPERTY = "persistent.watermark_ms"
#: The local property of the query's thread that, ``PASS`` when Spark plans a micro-batch,
#: makes each of its rows a partial of its own (``PartialFold``).
FOLD_PROPERTY = "persistent.fold"
PASS = "pass"
#: The aggregate functions a partial fold asks of Spark.
COUNT, SUM, MAX, MIN = "count", "sum", "max", "min"
