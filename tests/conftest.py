"""Real PostgreSQL and Redis servers for the integration tests, each on a free loopback
port in a temporary directory, started once per run.

Debian's ``postgresql`` and ``redis-server`` packages provide them (``.ci/run``
installs them when missing); where a server cannot be found or started, its tests are
skipped with the reason.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _postgres_bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]))
    return found[-1] if found else shutil.which(name)


def _server_user() -> str | None:
    """PostgreSQL refuses to run as root: run it as the ``postgres`` user then."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam("postgres").pw_name
    except KeyError:
        pytest.skip("PostgreSQL: running as root and there is no 'postgres' user to run the server as")


def _run(command: list[str], user: str | None, what: str) -> None:
    done = subprocess.run(command, user=user, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"PostgreSQL: {what} failed: {(done.stderr or done.stdout).strip()}")


@pytest.fixture(scope="session")
def postgres_server():
    """``postgresql://`` URI of a PostgreSQL server's superuser, without a database name."""
    initdb, pg_ctl = _postgres_bin("initdb"), _postgres_bin("pg_ctl")
    if not (initdb and pg_ctl):
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not found; install Debian's postgresql package")
    user = _server_user()
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
    """``redis://`` URL of a Redis server (no persistence)."""
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("redis-server not found; install Debian's redis-server package")
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
                    pytest.skip(f"redis-server did not start on port {port}")
                time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def redis_url(redis_server):
    """URL of the Redis server, emptied for one test."""
    import redis

    redis.Redis.from_url(redis_server).flushall()
    return redis_server
