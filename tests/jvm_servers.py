"""Real Kafka, HDFS and YARN servers for the integration tests, on loopback ports.

Their jars come from Maven Central as ``tests/jvm/pom.xml`` lists them: ``fetch`` copies them
with ``mvn`` into a cache (``.venv/jvm/`` of this checkout, which every virtual environment of
the checkout shares) and fetches again only when the pom, ``tests/jvm/MiniHdfs.java``,
``tests/jvm/MiniYarn.java``, this module or the JDK has changed.

``KafkaBroker`` runs a single-node Kafka (KRaft: broker and controller in one process),
``MiniHdfs`` an HDFS NameNode with one DataNode and WebHDFS, and ``MiniYarn`` a YARN
ResourceManager with one NodeManager. Each is a context manager that starts its server in a
directory of its own, which holds the server's log (``log_tail()`` returns its end, for a
failure message), and stops it on exit::

    with KafkaBroker() as kafka, MiniHdfs() as hdfs, MiniYarn(default_fs=hdfs.uri) as yarn:
        kafka.bootstrap      # "127.0.0.1:PORT"
        hdfs.uri             # "hdfs://127.0.0.1:PORT"
        hdfs.webhdfs         # "127.0.0.1:PORT"
        yarn.conf_dir        # a HADOOP_CONF_DIR for spark-submit --master yarn
        hdfs.restart_namenode()
        kafka.kill(); kafka.start_again()

``fetch`` also resolves Spark's Kafka connector (``kafka_connector``) and records a class data
sharing archive for the tests' Spark JVMs (``spark_class_archive``: a run of the count example
with ``spark-submit`` writes it), into a cache of the running Python's virtual environment
(``jvm-spark/``): these follow its pyspark.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import os
import queue
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
import zipfile
from pathlib import Path

JVM_SOURCES = Path(__file__).resolve().parent / "jvm"
POM = JVM_SOURCES / "pom.xml"
#: The Hadoop servers' main classes, compiled against the jars of the pom's profile ``hadoop``.
MINI_SERVER_SOURCES = (JVM_SOURCES / "MiniHdfs.java", JVM_SOURCES / "MiniYarn.java")
#: The servers' jars and class archives follow the pom, the mini servers' sources and the
#: JDK, not the pyspark: one cache for the checkout's virtual environments (``make compat``
#: makes one per Spark version), 850 MB fetched once.
_CHECKOUT_VENV = JVM_SOURCES.parents[1] / ".venv"
SERVERS_CACHE = _CHECKOUT_VENV / "jvm"
#: Spark's Kafka connector and its JVM's class archive follow the pyspark: in the virtual
#: environment of the running Python, else in .venv.
SPARK_CACHE = (Path(sys.prefix) if sys.prefix != sys.base_prefix else _CHECKOUT_VENV) / "jvm-spark"
MAVEN_CENTRAL = "https://repo.maven.apache.org"

# Quick to start and small: the servers of a test handle little data.
JVM_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true")

# Hadoop's web servers look through the jars that hold their web apps on every start (Jersey
# for its resource classes, Jetty to unpack the app), inflating each whole: seconds for the
# shaded jars. ``fetch`` moves these entries into a small jar of their own.
HADOOP_WEB_ENTRIES = (
    "webapps/",
    "org/apache/hadoop/hdfs/server/namenode/web/resources/",
    "org/apache/hadoop/hdfs/web/resources/",
)


class ServersUnavailable(RuntimeError):
    """The servers cannot be fetched; the message says why, in one sentence."""


def fetch(cache_dir: str | os.PathLike | None = None) -> Path:
    """The directory with the servers' jars (``cache_dir``, else ``SERVERS_CACHE``), fetched
    if they are missing or stale.

    It has ``kafka/`` and ``hadoop/``, the jars of the pom's profiles of those names (``hadoop/``
    with ``MiniHdfs`` and ``MiniYarn`` compiled), and a class data sharing archive per server,
    which makes its JVM start faster; ``maven/``, Maven's repository for them (not ``~/.m2``: Spark's
    ``--packages`` looks there first, and fails on a pom whose jar Maven did not need).
    Spark's pieces in ``SPARK_CACHE`` are brought up to date too: spark-submit fetches Spark's
    Kafka connector (``kafka_connector``: ``--packages``, into Ivy's cache), as the Kafka
    tests' runs load it, and records the Spark JVMs' class archive (``spark_class_archive``).
    Concurrent calls wait for each other.
    """
    cache = Path(cache_dir) if cache_dir is not None else SERVERS_CACHE
    # A class data sharing archive serves only the JVM that wrote it, with the very jars
    # it read (the JVM compares their times and sizes): a reinstalled pyspark needs another.
    java = subprocess.run([_java(), "-version"], capture_output=True, text=True).stderr.encode()
    this = Path(__file__).read_bytes()
    servers = b"".join(path.read_bytes() for path in (POM, *MINI_SERVER_SOURCES)) + this + java
    _refresh(cache, servers, _fetch_servers)
    _refresh(SPARK_CACHE, this + java + _spark_version().encode() + _spark_jars_signature(), _fetch_spark_pieces)
    return cache


def _refresh(cache: Path, sources: bytes, fill) -> None:
    """Has ``fill(cache)`` fill ``cache`` again, emptied but for Maven's repository, unless it
    was filled from the same ``sources``; under a lock, which other processes wait for."""
    cache.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(sources).hexdigest()
    stamp = cache / "stamp"
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.is_file() and stamp.read_text() == digest:
            return
        for entry in cache.iterdir():
            if entry.is_dir() and entry.name != "maven":
                shutil.rmtree(entry)
            elif entry.is_file() and entry.name != ".lock":
                entry.unlink()
        fill(cache)
        stamp.write_text(digest)


def _fetch_servers(cache: Path) -> None:
    for tool, what in (("mvn", "Maven 3"), ("javac", "a JDK 17")):
        if shutil.which(tool) is None:
            raise ServersUnavailable(
                f"the real Kafka, HDFS and YARN servers need {what}: `{tool}` is not on the PATH"
            )
    for profile in sorted({server.profile for server in SERVERS}):
        _copy_dependencies(profile, cache / profile)
    _compile_mini_servers(cache / MiniHdfs.profile)
    _split_hadoop_web_entries(cache / MiniHdfs.profile)
    for server in SERVERS:
        server(cache_dir=cache).record_class_archive()


def _fetch_spark_pieces(cache: Path) -> None:
    _fetch_kafka_connector(cache)
    _record_spark_class_archive(cache / SPARK_ARCHIVE)


#: The file name of the Spark JVMs' class data sharing archive in the cache.
SPARK_ARCHIVE = "spark.jsa"


def spark_class_archive() -> Path | None:
    """The class data sharing archive of the tests' Spark JVMs (``-XX:SharedArchiveFile``),
    or None before ``fetch`` recorded it. With it a Spark JVM maps the classes Spark loads
    instead of reading and parsing them from its jars: a fifth less CPU for each
    ``spark-submit`` of a test. A JVM with another class path ignores it."""
    archive = SPARK_CACHE / SPARK_ARCHIVE
    return archive if archive.is_file() else None


def _record_spark_class_archive(archive: Path) -> None:
    """Runs the count example once (``spark-submit``, local master, a few thousand
    generated messages, checkpoints and a SQLite sink) with a JVM that writes the classes
    it loaded to ``archive`` when it exits."""
    from pyspark.find_spark_home import _find_spark_home

    archive.unlink(missing_ok=True)
    submit = Path(_find_spark_home()) / "bin" / "spark-submit"
    count = JVM_SOURCES.parents[1] / "examples" / "count.py"
    with tempfile.TemporaryDirectory() as work:
        # The example's Python processes need this interpreter's packages (make test
        # exports these; a bare `pytest` of the fast tests may not).
        environment = {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable, **os.environ,
                       "SPARK_SUBMIT_OPTS": f"-XX:ArchiveClassesAtExit={archive}"}
        done = subprocess.run(
            [str(submit), "--master", "local[2]", str(count), "--checkpoint", f"{work}/ck",
             "--output", f"sqlite://{work}/out.db", "--total", "3000", "--keys", "5",
             "--rows-per-batch", "1000", "--available-now", "--key-groups", "2", "--interval-ms", "500"],
            capture_output=True, text=True, env=environment, cwd=work,
        )
    if done.returncode != 0 or not archive.is_file():
        raise RuntimeError(f"recording the Spark JVM's class archive failed ({done.returncode}): "
                           f"{failure(done.stderr)}")


def failure(stderr: str) -> str:
    """Why a ``spark-submit`` run failed, from its ``stderr``: the Python traceback of its
    driver (Spark's warnings and its own stack traces around it left out), or without
    one, the last 2,000 characters."""
    start = stderr.find("Traceback (most recent call last):")
    if start < 0:
        return stderr[-2000:]
    lines = stderr[start:].splitlines()
    # The traceback ends at its first line not indented after the header: the error's.
    end = next((i for i, line in enumerate(lines[1:], 1) if line and not line[0].isspace()), len(lines) - 1)
    return "\n".join(lines[:end + 1])


def _spark_version() -> str:
    """The version of the installed pyspark, without importing it."""
    from importlib.metadata import version

    return version("pyspark")


def _spark_jars_signature() -> bytes:
    """The names, sizes and modification times of the installed pyspark's jars."""
    from pyspark.find_spark_home import _find_spark_home

    jars = sorted((Path(_find_spark_home()) / "jars").glob("*.jar"))
    return "".join(f"{jar.name}:{jar.stat().st_size}:{jar.stat().st_mtime_ns};" for jar in jars).encode()


#: The file in the cache naming the Kafka connector ``fetch`` resolved.
KAFKA_CONNECTOR = "kafka-connector"


def kafka_connector() -> str:
    """Spark's Kafka connector for the installed pyspark, as ``--packages`` names it: the
    one ``fetch`` resolved (``_fetch_kafka_connector``), else of the installed version."""
    resolved = SPARK_CACHE / KAFKA_CONNECTOR
    return resolved.read_text() if resolved.is_file() else _kafka_connectors()[0]


def _kafka_connectors() -> list[str]:
    """The Kafka connectors that serve the installed pyspark, best first: of its own
    version, then of the first release of its minor version, which serves each of its
    patch releases (Maven Central may not have the connector of the newest one yet)."""
    version = _spark_version()
    first = ".".join(version.split(".")[:2]) + ".0"
    return [f"org.apache.spark:spark-sql-kafka-0-10_2.13:{v}" for v in dict.fromkeys((version, first))]


def _fetch_kafka_connector(cache: Path) -> None:
    """Has spark-submit resolve Spark's Kafka connector (``--packages``) into Ivy's cache:
    the first of ``_kafka_connectors`` that resolves, which ``cache`` then names."""
    from pyspark.find_spark_home import _find_spark_home

    failures = []
    for package in _kafka_connectors():
        with tempfile.TemporaryDirectory() as empty:
            nothing = Path(empty) / "nothing.py"
            nothing.write_text("")
            submit = Path(_find_spark_home()) / "bin" / "spark-submit"
            done = subprocess.run([str(submit), "--packages", package, str(nothing)], capture_output=True, text=True)
        if done.returncode == 0:
            (cache / KAFKA_CONNECTOR).write_text(package)
            return
        # Ivy's verdict is the message of the exception that ends its output.
        verdict = re.search(r"RuntimeException: \[(.*)\]", done.stderr)
        failures.append(f"spark-submit --packages {package} failed "
                        f"({verdict.group(1) if verdict else done.stderr.strip()[-300:]})")
    raise ServersUnavailable(
        f"the Kafka tests need Spark's Kafka connector from Maven Central ({MAVEN_CENTRAL}): {'; '.join(failures)}")


def _copy_dependencies(profile: str, into: Path) -> None:
    # The plugin by its full name (its version is in the pom): a prefix would need Maven
    # Central's plugin index, and fail less clearly offline.
    command = [
        "mvn", "--batch-mode", "--quiet", "-Dstyle.color=never", "--file", str(POM),
        "--activate-profiles", profile,
        "org.apache.maven.plugins:maven-dependency-plugin:copy-dependencies",
        f"-DoutputDirectory={into}", f"-Dmaven.repo.local={into.parent / 'maven'}",
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise ServersUnavailable(_maven_failure(done.stdout + done.stderr))


def _maven_failure(output: str) -> str:
    """One sentence from mvn's error output: what it could not download, and why."""
    output = re.sub(r"\x1b\[[0-9;]*m", "", output)
    errors = [line.removeprefix("[ERROR]").strip() for line in output.splitlines()
              if line.startswith("[ERROR]")]
    first = next((line for line in errors if line), output.strip() or "no output")
    first = first.removesuffix("-> [Help 1]").strip()
    artifact = re.search(r"(?:dependencies at|artifact|Plugin) ([\w.\-]+(?::[\w.\-]+){2,})", first)
    what = artifact.group(1) if artifact else "the artifacts of tests/jvm/pom.xml"
    transfer = re.search(r"transfer failed for \S+: (.*)", first)
    reason = transfer.group(1) if transfer else first.rsplit(": ", 1)[-1]
    return (
        f"the real Kafka, HDFS and YARN servers need Maven Central ({MAVEN_CENTRAL}): "
        f"mvn could not download {what} ({reason.rstrip('. ')})"
    )


def _compile_mini_servers(jars: Path) -> None:
    """Compiles MINI_SERVER_SOURCES against the jars in ``jars`` into ``jars/mini-servers.jar``."""
    with tempfile.TemporaryDirectory() as classes:
        command = ["javac", "-nowarn", "-d", classes, "-cp", _classpath(jars),
                   *map(str, MINI_SERVER_SOURCES)]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            names = ", ".join(source.name for source in MINI_SERVER_SOURCES)
            raise ServersUnavailable(f"javac could not compile {names} in {JVM_SOURCES}: {done.stderr}")
        with zipfile.ZipFile(jars / "mini-servers.jar", "w") as jar:
            for path in sorted(Path(classes).glob("*.class")):
                jar.write(path, path.name)


def _split_hadoop_web_entries(jars: Path) -> None:
    """Moves HADOOP_WEB_ENTRIES out of the jars in ``jars`` into ``jars/hadoop-web.jar``.

    The jars are written back uncompressed: quick to write, and to read.
    """
    with zipfile.ZipFile(jars / "hadoop-web.jar", "w") as web:
        for path in sorted(jars.glob("hadoop-client-*.jar")):
            with zipfile.ZipFile(path) as jar:
                if not any(name.startswith(HADOOP_WEB_ENTRIES) for name in jar.namelist()):
                    continue
                rest = path.with_suffix(".tmp")
                with zipfile.ZipFile(rest, "w") as out:
                    for entry in jar.infolist():
                        into = web if entry.filename.startswith(HADOOP_WEB_ENTRIES) else out
                        if entry.filename not in into.NameToInfo:
                            into.writestr(entry, jar.read(entry), zipfile.ZIP_STORED)
            rest.replace(path)


def _classpath(jars: Path) -> str:
    """The jars in ``jars``, in a fixed order."""
    return os.pathsep.join(str(path) for path in sorted(jars.glob("*.jar")))


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else "java"


class _JavaServer:
    """A server in a JVM of its own, with a directory for its data and its log."""

    name: str  # also of its log, and of its JVM's class data sharing archive in the cache
    profile: str  # the pom's profile whose jars (the cache's folder of that name) its JVM runs on
    main: str  # the main class of its JVM
    heap = "512m"
    start_timeout = 120

    def __init__(self, directory: str | os.PathLike | None = None,
                 cache_dir: str | os.PathLike | None = None):
        """``directory``, kept on exit; without it a temporary one, removed on exit."""
        self._given_directory = directory
        self._cache_dir = cache_dir
        self._recording = False
        self.directory: Path | None = None
        self.process: subprocess.Popen | None = None
        self.startup_seconds: float | None = None

    @property
    def log(self) -> Path:
        return self.directory / f"{self.name}.log"

    def log_tail(self, lines: int = 60) -> str:
        """The last lines of the server's log."""
        try:
            text = self.log.read_text(errors="replace")
        except OSError as error:
            return f"({self.log} unreadable: {error})"
        return "\n".join(text.splitlines()[-lines:])

    def record_class_archive(self) -> None:
        """Starts and stops the server to write the class data sharing archive of its JVM.

        The archive holds the classes the server loaded, parsed; later starts map them
        instead, a third faster. A JVM other than the one that wrote it ignores it (with a
        warning in the server's log).
        """
        self._recording = True
        try:
            with self:
                pass
        finally:
            self._recording = False

    def __enter__(self):
        jars = self._cache_dir if self._recording else fetch(self._cache_dir)
        self._jars = Path(jars)
        if self._given_directory is None:
            self.directory = Path(tempfile.mkdtemp(prefix=f"{self.name}-"))
        else:
            self.directory = Path(self._given_directory)
            self.directory.mkdir(parents=True, exist_ok=True)
        try:
            started = time.monotonic()
            self._start(_classpath(self._jars / self.profile))
            self.startup_seconds = time.monotonic() - started
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        if self.process is not None:
            self._stop()
            self.process = None
        if self._given_directory is None:
            shutil.rmtree(self.directory, ignore_errors=True)

    def _start(self, classpath: str) -> None:
        raise NotImplementedError

    def _stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def _command(self, classpath: str, main: str, *args: str, options=()) -> list[str]:
        """The java command line, with the class data sharing archive once there is one.

        The JVM's temporary files (Jetty's unpacked web apps) go to the server's directory.
        """
        options = (*options, f"-Djava.io.tmpdir={self.directory}")
        archive = self._jars / f"{self.name}.jsa"
        if self._recording and main == self.main:
            options = (*options, f"-XX:ArchiveClassesAtExit={archive}")
        elif archive.is_file():
            options = (*options, f"-XX:SharedArchiveFile={archive}")
        return [_java(), f"-Xmx{self.heap}", *JVM_OPTIONS, *options, "-cp", classpath, main, *args]

    def _failed(self, what: str) -> RuntimeError:
        return RuntimeError(f"{self.name} {what}; the end of {self.log}:\n{self.log_tail()}")


class KafkaBroker(_JavaServer):
    """A single-node Kafka broker (KRaft, no ZooKeeper) on a free loopback port.

    Topics have one partition and one replica unless created otherwise; records keep the
    timestamps their producers give them, however old or new, and are never deleted for their
    age unless their topic sets ``retention.ms``. The retention check runs every second.
    """

    name = profile = "kafka"
    main = "kafka.Kafka"

    def __init__(self, directory=None, cache_dir=None, *, properties: dict | None = None):
        """``properties`` are added to the broker's settings, or replace them."""
        super().__init__(directory, cache_dir)
        self.properties = dict(properties or {})
        self.port: int | None = None

    @property
    def bootstrap(self) -> str:
        """The ``bootstrap.servers`` of a client: ``127.0.0.1:PORT``."""
        return f"127.0.0.1:{self.port}"

    def _settings(self, controller_port: int) -> dict:
        return {
            "process.roles": "broker,controller",
            "node.id": 1,
            "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
            "listeners": (f"PLAINTEXT://127.0.0.1:{self.port},"
                          f"CONTROLLER://127.0.0.1:{controller_port}"),
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": self.directory / "data",
            "num.partitions": 1,
            "default.replication.factor": 1,
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "transaction.state.log.num.partitions": 1,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
            # Test records carry event times far in the past or future: keep them all, and
            # delete old records only where a topic asks for it, and then soon.
            "log.retention.ms": -1,
            "log.message.timestamp.after.max.ms": 2**63 - 1,
            "log.retention.check.interval.ms": 1000,
            "log.initial.task.delay.ms": 0,
            # The broker's task that deletes segments reschedules itself this long after
            # each look: at 0 it runs without pause, 6 CPU-seconds a minute of an idle broker
            # (1.5 at 1,000 ms). A segment is out of the log at once either way.
            "log.segment.delete.delay.ms": 1000,
            "num.network.threads": 2,
            "num.io.threads": 2,
            **self.properties,
        }

    def kill(self) -> None:
        """SIGKILLs the broker, as a crash would: its clients' requests fail until ``start_again``."""
        self.process.kill()
        self.process.wait()

    def start_again(self) -> None:
        """Starts the killed broker on its ports and data, as its machine's restart would."""
        self._launch(_classpath(self._jars / self.profile))

    def _start(self, classpath: str) -> None:
        self.port, self._controller_port = _free_ports(2)
        config = self.directory / "server.properties"
        config.write_text(
            "".join(f"{key}={value}\n" for key, value in self._settings(self._controller_port).items())
        )
        (self.directory / "log4j2.properties").write_text(_KAFKA_LOG4J)
        with open(self.log, "ab") as log:
            formatted = subprocess.run(
                self._command(classpath, "kafka.tools.StorageTool", "format",
                              "--cluster-id", _cluster_id(), "--config", str(config),
                              options=self._logging()),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            )
        if formatted.returncode != 0:
            raise self._failed("storage could not be formatted")
        self._launch(classpath)

    def _logging(self) -> tuple[str, ...]:
        return (f"-Dlog4j2.configurationFile={self.directory / 'log4j2.properties'}",)

    def _launch(self, classpath: str) -> None:
        """Starts the broker of ``server.properties``; returns once it serves."""
        started = self.log.stat().st_size if self.log.exists() else 0
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                self._command(classpath, self.main, str(self.directory / "server.properties"),
                              options=self._logging()),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + self.start_timeout
        while b"Kafka Server started" not in self.log.read_bytes()[started:]:
            if self.process.poll() is not None:
                raise self._failed(f"exited with status {self.process.returncode}")
            if time.monotonic() > deadline:
                raise self._failed(f"did not start within {self.start_timeout} s")
            time.sleep(0.05)


def _cluster_id() -> str:
    """A random Kafka cluster id: 16 bytes in URL-safe base64, not starting with '-'."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


_KAFKA_LOG4J = """\
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
"""


class _PipedServer(_JavaServer):
    """A server whose JVM writes a line of JSON on stdout once it has started, then answers
    each command, a line on stdin, with a line (``ok`` or ``error: ...``); the end of its
    stdin shuts it down."""

    def __init__(self, directory=None, cache_dir=None):
        super().__init__(directory, cache_dir)
        self._replies: queue.Queue[str | None] = queue.Queue()

    def _launch(self, classpath: str, *args: str) -> dict:
        """Starts the JVM with ``args``; returns the JSON of its first line."""
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                self._command(classpath, self.main, *args),
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
            )
        threading.Thread(target=self._read_replies, name=f"{self.main} replies", daemon=True).start()
        return json.loads(self._reply("start"))

    def _read_replies(self) -> None:
        for line in self.process.stdout:
            self._replies.put(line.strip())
        self._replies.put(None)

    def _reply(self, what: str) -> str:
        try:
            reply = self._replies.get(timeout=self.start_timeout)
        except queue.Empty:
            raise self._failed(f"did not {what} within {self.start_timeout} s") from None
        if reply is None:
            raise self._failed(f"exited with status {self.process.wait()} on {what}")
        return reply

    def _request(self, command: str) -> None:
        try:
            self.process.stdin.write(command + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            status = self.process.wait()
            raise self._failed(f"exited with status {status} before {command}") from None
        reply = self._reply(command)
        if reply != "ok":
            raise self._failed(f"{command}: {reply}")

    def _stop(self) -> None:
        """Closing its stdin shuts the server down; it is terminated if that takes too long."""
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            super()._stop()


class MiniHdfs(_PipedServer):
    """HDFS on loopback: a NameNode and one DataNode, with WebHDFS.

    Files have one replica and permissions are off, so any user may write anywhere. The
    NameNode and the DataNode can be restarted while the cluster runs; each keeps its ports.
    """

    name = "hdfs"
    profile = "hadoop"
    main = "MiniHdfs"

    def __init__(self, directory=None, cache_dir=None, *, rpc_port: int = 0, http_port: int = 0):
        """``rpc_port`` and ``http_port`` (WebHDFS) of the NameNode: 0 takes free ones."""
        super().__init__(directory, cache_dir)
        self.rpc_port = rpc_port
        self.http_port = http_port

    @property
    def uri(self) -> str:
        """The file system's URI: ``hdfs://127.0.0.1:PORT``."""
        return f"hdfs://127.0.0.1:{self.rpc_port}"

    @property
    def webhdfs(self) -> str:
        """The NameNode's HTTP address, where WebHDFS is: ``127.0.0.1:PORT``."""
        return f"127.0.0.1:{self.http_port}"

    def restart_namenode(self) -> None:
        """Stops the NameNode and starts it again on its ports; returns once it is out of safe mode.

        With the DataNode stopped it returns as soon as the NameNode runs: while the file system
        has blocks it stays in safe mode until the DataNode is back and has reported them.
        """
        self._request("restart-namenode")

    def stop_datanode(self) -> None:
        """Stops the DataNode: its blocks cannot be read, nor new ones written."""
        self._request("stop-datanode")

    def start_datanode(self) -> None:
        """Starts the stopped DataNode again.

        Returns once the NameNode has it registered, with its blocks, and is out of safe mode.
        """
        self._request("start-datanode")

    def _start(self, classpath: str) -> None:
        addresses = self._launch(classpath, str(self.directory / "data"), str(self.rpc_port), str(self.http_port))
        self.rpc_port = addresses["rpc_port"]
        self.http_port = addresses["http_port"]


class MiniYarn(_PipedServer):
    """YARN on loopback: a ResourceManager and one NodeManager, for ``spark-submit --master yarn``.

    ``conf_dir`` holds its clients' ``core-site.xml`` and ``yarn-site.xml``: a
    ``HADOOP_CONF_DIR``. Its file system (``fs.defaultFS``, where Spark stages an
    application's files) is ``default_fs``, an HDFS's URI, or without one the local file
    system. The NodeManager gives containers 4 GB and 2 cores, in steps of 128 MB, without
    checking what their processes use; their processes run as this process's user, with the
    cluster's JDK as ``JAVA_HOME``, and may start any program of this machine by its path
    (this Python). Applications run in one queue, whose application masters may take all of
    it, and a failed application master is started again once (YARN's default of at most 2
    attempts).
    """

    name = "yarn"
    profile = "hadoop"
    main = "MiniYarn"

    def __init__(self, directory=None, cache_dir=None, *, default_fs: str | None = None):
        super().__init__(directory, cache_dir)
        self.default_fs = default_fs
        #: The ResourceManager's addresses, ``localhost:PORT``: ``address`` (its clients'),
        #: ``scheduler_address`` (the application masters'), ``resource_tracker_address``,
        #: ``admin_address`` and ``web_address`` (its web UI and REST API).
        self.addresses: dict[str, str] = {}
        #: The NodeManager's log directory: ``APPLICATION/CONTAINER/{stdout,stderr}``.
        self.log_dir: Path | None = None

    @property
    def conf_dir(self) -> Path:
        """The clients' Hadoop configuration, a ``HADOOP_CONF_DIR``."""
        return self.directory / "conf"

    def nodes(self) -> list[dict]:
        """The NodeManagers the ResourceManager knows, as its REST API describes them."""
        return (self._rest("nodes")["nodes"] or {}).get("node", [])

    def end_applications(self) -> None:
        """Kills the applications that run; returns once their containers have ended."""
        self._request("end-applications")

    def running_applications(self) -> list[str]:
        """The ids of the applications that have not ended (``application_..._0001``): those
        that run, and those waiting for their application master."""
        answer = self._rest("apps?states=NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING")
        return [app["id"] for app in (answer["apps"] or {}).get("app", [])]

    def attempts(self, application: str) -> list[dict]:
        """The attempts of ``application``, first first, as the REST API describes them."""
        return self._rest(f"apps/{application}/appattempts")["appAttempts"]["appAttempt"]

    def container_logs(self, application: str) -> dict[str, str]:
        """The output (``stdout``, then ``stderr``) of each container of ``application``, by
        the container's id; the application master of attempt N is ``container_..._0N_000001``."""
        containers = sorted((self.log_dir / application).glob("container_*"))
        return {container.name: "".join((container / name).read_text(errors="replace")
                                        for name in ("stdout", "stderr") if (container / name).is_file())
                for container in containers}

    def _rest(self, path: str) -> dict:
        url = f"http://{self.addresses['web_address']}/ws/v1/cluster/{path}"
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.load(answer)

    def _start(self, classpath: str) -> None:
        self.addresses = self._launch(classpath, str(self.directory / "cluster"), str(self.conf_dir),
                                      *([self.default_fs] if self.default_fs else []))
        self.log_dir = Path(self.addresses.pop("log_dir"))


#: The servers, each with a class data sharing archive of its own in the cache.
SERVERS = (KafkaBroker, MiniHdfs, MiniYarn)


if __name__ == "__main__":  # `make test` fetches before the tests run: one sentence if it cannot
    try:
        fetch()
    except ServersUnavailable as unavailable:
        sys.exit(f"make test: {unavailable}")
