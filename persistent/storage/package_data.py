"""The install's own files: the Spark defaults and the driver's logging configuration,
package data of ``persistent`` (``persistent/conf/``, also ``conf/`` in a checkout),
so an installed wheel carries them."""

from __future__ import annotations

from importlib.resources import files

__all__ = ["CONF_DIR", "DEFAULTS_FILE", "LOGGING_FILE", "spark_defaults"]

#: The project's configuration directory: a directory, or a place inside the zip of
#: the packages shipped with ``--py-files``.
CONF_DIR = files("persistent") / "conf"
#: Spark properties for every job.
DEFAULTS_FILE = CONF_DIR / "spark-defaults.conf"
#: The driver's log4j2 configuration for ``persistent run``: warnings and errors only.
LOGGING_FILE = CONF_DIR / "log4j2.properties"


def spark_defaults() -> dict[str, str]:
    """The properties ``DEFAULTS_FILE`` sets, by name (``NAME VALUE`` lines; ``#`` starts
    a comment line)."""
    settings = {}
    for line in DEFAULTS_FILE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition(" ")
            settings[key] = value.strip()
    return settings
