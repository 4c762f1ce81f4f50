"""Run by every Python process of the tests' Spark applications (this directory is on
their ``PYTHONPATH``, ``conftest.test_jvm_options``).

Spark puts its zips of pyspark and py4j first on the path of each Python process it
starts: the driver of a ``spark-submit``, each worker daemon, each planner of a Python
data source. Python compiles every module it imports from a zip anew, 0.6 s of CPU a
process. When the zips are the ones inside an installed pyspark, the very same files are
installed beside it with compiled bytecode: the zips leave the path, and the imports
find the installed packages.
"""

import os
import sys


def _inside_installed_pyspark(entry: str) -> bool:
    # SITE/pyspark/python/lib/pyspark.zip or SITE/pyspark/python/lib/py4j-*-src.zip
    lib = os.path.dirname(entry)
    package = os.path.dirname(os.path.dirname(lib))
    return (entry.endswith(".zip") and os.path.basename(package) == "pyspark"
            and os.path.isfile(os.path.join(package, "__init__.py"))
            and os.path.isdir(os.path.join(os.path.dirname(package), "py4j")))


sys.path[:] = [entry for entry in sys.path if not _inside_installed_pyspark(entry)]
