"""The driver's side of a source's Python data source runs in a process of its own,
pyspark's stream runner, which the JVM asks for offsets and partitions over a socket.
When a query stops, that socket can close before Spark kills the process: a runner
waiting on the socket then must end without a traceback on the job's terminal (a
Ctrl-C stopping the query). The test plays the JVM's part over a real socket and hangs
up with a reset, as a JVM's socket closed with data unread does."""

from __future__ import annotations

import os
import secrets
import socket
import struct
import subprocess
import sys

from pyspark.serializers import CloudPickleSerializer, UTF8Deserializer, read_int, write_int, write_with_length
from pyspark.sql.types import LongType, StringType, StructType

from persistent.sources.base import STREAM_RUNNER
from persistent.sources.generator import GeneratorSource


#: The generator's rows (``GeneratorSource.row_schema``), parsed without Spark's JVM.
MESSAGES = StructType().add("key", StringType()).add("timestamp", LongType()).add("value", LongType())


def _write_text(text: str, out) -> None:
    write_with_length(text.encode("utf-8"), out)


def test_a_stream_runner_that_spark_hangs_up_on_ends_without_a_traceback(tmp_path):
    source = GeneratorSource(keys=3)  # endless: read by its Python data source
    options = source.options(0)
    data_source = source.data_source()(options)
    secret = secrets.token_hex(16)
    with socket.create_server(("127.0.0.1", 0)) as server:
        environment = {**os.environ, "PYTHON_WORKER_FACTORY_PORT": str(server.getsockname()[1]),
                       "PYTHON_WORKER_FACTORY_SECRET": secret}
        runner = subprocess.Popen([sys.executable, "-m", STREAM_RUNNER], env=environment, cwd=tmp_path,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            server.settimeout(60)
            connection, _ = server.accept()
            stream = connection.makefile("rwb")
            assert UTF8Deserializer().loads(stream) == secret
            _write_text("ok", stream)
            stream.flush()
            assert read_int(stream) == runner.pid
            _write_text("%d.%d" % sys.version_info[:2], stream)
            _write_text(str(tmp_path), stream)  # Spark's files directory
            write_int(0, stream)  # no Python includes
            write_with_length(CloudPickleSerializer().dumps(data_source), stream)
            _write_text(MESSAGES.json(), stream)
            write_int(10_000, stream)  # Arrow rows per batch
            stream.flush()
            assert read_int(stream) == 0  # the reader is made, the runner waits for calls
            connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            stream.close()
            connection.close()
            _, errors = runner.communicate(timeout=60)
        finally:
            if runner.poll() is None:
                runner.kill()
    assert runner.returncode != 0 and "Traceback" not in errors, errors


#: A process that passes for a stream runner, lets a source quiet it, then fails with ``{error}``.
PASSES_FOR_A_RUNNER = """
import sys, types
sys.modules["__main__"].__spec__ = types.SimpleNamespace(name={runner!r})
from persistent.sources.base import _quiet_when_spark_hangs_up
_quiet_when_spark_hangs_up()
raise {error}
"""


def test_in_a_stream_runner_only_a_lost_connection_ends_quietly():
    def stderr(error: str) -> str:
        code = PASSES_FOR_A_RUNNER.format(runner=STREAM_RUNNER, error=error)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert done.returncode == 1
        return done.stderr

    assert stderr("ConnectionResetError(104, 'Connection reset by peer')") == ""
    assert stderr("BrokenPipeError(32, 'Broken pipe')") == ""
    failed = stderr("ValueError('a bug')")
    assert "Traceback" in failed and "ValueError: a bug" in failed
