"""Bad input to a job's program is refused before Spark starts: in a second, with one
line naming what and where, starting no JVM and creating nothing. The examples' own
``main`` runs in this process (``persistent.tools.options.run_app``), so that
``SparkContext._jvm`` shows whether a JVM started."""

from __future__ import annotations

import os
import re
import socket
import sys
from pathlib import Path
from urllib.parse import urlencode

import pytest
from pyspark import SparkContext

from persistent.core.errors import ConfigError, SetupError
from persistent.storage.fs import LocalFileSystem
from persistent.storage.job_directory import JobDirectory
from persistent.storage.lease import JobLease
from persistent.tools.preflight import check_master

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def examples(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    import count
    import wordcount

    return count, wordcount


def files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def refused(capsys, main, argv: list[str], cwd: Path) -> tuple[int, str]:
    """``(exit status, error)`` of an example's ``main(argv)`` run in ``cwd``, which
    must start no JVM, leave ``cwd`` as it was and print one line,
    ``PROGRAM: error: ERROR``."""
    before = files(cwd)
    with pytest.raises(SystemExit) as ended:
        main(argv)
    assert SparkContext._jvm is None and SparkContext._gateway is None
    assert files(cwd) == before
    out, err = capsys.readouterr()
    program, colon, error = err.partition(": error: ")
    assert out == "" and colon and len(err.splitlines()) == 1 and program == os.path.basename(sys.argv[0])
    return ended.value.code, error


@pytest.fixture
def here(tmp_path, monkeypatch) -> Path:
    """A working directory holding a file ``afile`` and a directory ``corpus``."""
    (tmp_path / "afile").write_text("not a directory\n")
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "a.txt").write_text("one line\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("argv, message", [
    (["--checkpoint", "afile"], "checkpoint directory afile is a file, not a directory"),
    (["--checkpoint", "afile/ck"], "checkpoint directory afile/ck cannot be made: {here}/afile is a file, not a "
                                   "directory"),
    (["--checkpoint", "file://{here}/afile/deeper/ck"], "checkpoint directory file://{here}/afile/deeper/ck cannot "
                                                        "be made: {here}/afile is a file, not a directory"),
    (["--output", "mysql://me@db/jobs"], "output 'mysql://me@db/jobs': no sink has the scheme mysql://"),
    (["--output", "sqlite:/tmp/out.db"], "output 'sqlite:/tmp/out.db': a SQLite database is sqlite:// then its path"),
    (["--output", "sqlite://afile/out.db"], "SQLite database afile/out.db cannot be made: {here}/afile is a file"),
    (["--output", "sqlite://corpus"], "SQLite database corpus is a directory, not a file"),
    (["--output", "afile"], "Parquet output directory afile is a file, not a directory"),
    (["--input", "nope"], "input directory nope does not exist"),
    (["--input", "afile"], "input directory afile is a file, not a directory"),
    (["--master", "locl[2]"], "--master 'locl[2]' is not a Spark master: give local[N], local[*], spark://HOST:PORT"),
    (["--master", "spark://127.0.0.1"], "--master 'spark://127.0.0.1' is not a Spark master"),
])
def test_bad_input_is_one_line_naming_it_before_spark_starts_and_creates_nothing(capsys, examples, here, argv,
                                                                               message):
    count, _ = examples
    given = dict(zip(["--checkpoint", "--output"], ["ck", f"sqlite://{here / 'out' / 'counts.db'}"]))
    given.update(zip(argv[::2], (a.format(here=here) for a in argv[1::2])))
    code, err = refused(capsys, count.main, [a for pair in given.items() for a in pair], here)
    assert code == 2
    assert err.startswith(message.format(here=here))


def test_a_missing_input_directory_of_word_count_creates_no_checkpoint_and_no_database(capsys, examples, here):
    _, wordcount = examples
    code, err = refused(capsys, wordcount.main, ["--input", "corpus/missing", "--checkpoint", "ck1", "--output",
                                                 f"sqlite://{here / 'wc.db'}", "--available-now"], here)
    assert (code, err) == (2, "input directory corpus/missing does not exist\n")


def test_a_standalone_master_that_does_not_answer_is_refused_naming_it(capsys, examples, here, free_port):
    count, _ = examples
    port = free_port()
    code, err = refused(capsys, count.main, ["--checkpoint", "ck", "--output", "console", "--master",
                                             f"spark://127.0.0.1:{port}"], here)
    assert code == 1
    assert err.startswith(f"--master spark://127.0.0.1:{port}: no Spark master answers "
                          f"(127.0.0.1:{port}: ")


def test_a_checkpoint_directory_another_job_holds_is_refused_naming_it(capsys, examples, here):
    count, _ = examples
    directory = JobDirectory(LocalFileSystem(), str(here / "ck"))
    with JobLease.acquire(directory, "Spark application app-running") as running:
        code, err = refused(capsys, count.main, ["--checkpoint", "ck", "--output", "console"], here)
    assert code == 1
    assert err.startswith(f"ck is in use by another job: Spark application app-running on host {running.record.host}, "
                          f"pid {os.getpid()}, running since ")


def test_metrics_without_their_extra_are_refused_naming_it(capsys, examples, here, monkeypatch):
    count, _ = examples
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # import fails
    code, err = refused(capsys, count.main, ["--checkpoint", "ck", "--output", "console", "--metrics-port", "9108"],
                        here)
    assert (code, err) == (1, "metrics port 9108 needs prometheus_client, which is not installed: "
                              "pip install 'persistent-state[metrics]'\n")


@pytest.mark.parametrize("refusal", ["a wrong password of --kafka", "an untrusted certificate of a kafka:// output"])
def test_kafka_brokers_refusing_the_options_are_named_with_the_reason_and_nothing_is_created(
        capsys, examples, here, secured_kafka, untrusted_truststore, refusal):
    count, _ = examples
    brokers = secured_kafka.secured
    if refusal.endswith("--kafka"):  # the options a Spark user writes, one --kafka-option each
        options = secured_kafka.options(password="wrong").items()
        argv = ["--kafka", brokers, "--topic", "events", *(f"--kafka-option={n}={v}" for n, v in options),
                "--output", f"sqlite://{here / 'out.db'}"]
        reason = f"kafka source: brokers {brokers}: authentication failed (SASL authentication error: "
    else:  # in the output's query
        query = urlencode(secured_kafka.options(truststore=untrusted_truststore))
        argv = ["--output", f"kafka://{brokers}/results?{query}"]
        reason = f"kafka sink: brokers {brokers}: certificate not trusted (SSL handshake failed: "
    code, err = refused(capsys, count.main, ["--checkpoint", "ck", *argv], here)
    assert code == 2 and err.startswith(reason), err


def test_a_kafka_option_that_is_no_kafka_name_and_value_is_refused_without_its_value(capsys, examples, here):
    count, _ = examples
    code, err = refused(capsys, count.main, ["--kafka", "127.0.0.1:9092", "--topic", "events", "--kafka-option",
                                             "sasl.jaas.config=secret", "--checkpoint", "ck", "--output", "console"],
                        here)
    assert (code, err) == (2, "--kafka-option sasl.jaas.config: give kafka.NAME=VALUE, an option of Kafka's client\n")


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local[4,3]", "local[*,2]",
                                    "local-cluster[2,1,1024]", "yarn", "k8s://https://kube.example:6443"])
def test_spark_master_urls_pass(master):
    check_master(master)


def test_a_standalone_master_passes_when_one_of_its_hosts_answers(free_port):
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        check_master(f"spark://127.0.0.1:{free_port()},127.0.0.1:{port}")


@pytest.mark.parametrize("master", ["local[]", "local[two]", "spark://", "spark://host", "mesos://host:5050",
                                    "localhost", "yarn-cluster"])
def test_what_is_no_master_url_is_a_config_error(master):
    with pytest.raises(ConfigError, match=re.escape(f"--master '{master}' is not a Spark master")):
        check_master(master)


def test_an_unreachable_master_is_a_setup_error(free_port):
    with pytest.raises(SetupError, match="no Spark master answers"):
        check_master(f"spark://127.0.0.1:{free_port()}", option="spark.master")


def test_good_input_goes_on_to_the_spark_session(examples, here, monkeypatch):
    count, _ = examples
    started = []

    def session(app_name, master=None):
        started.append((app_name, master, files(here)))
        raise SystemExit(0)

    monkeypatch.setattr("persistent.tools.session.spark_session", session)
    with pytest.raises(SystemExit):
        count.main(["--checkpoint", "ck", "--output", f"sqlite://{here / 'out.db'}", "--input", "corpus",
                    "--master", "local[1]"])
    assert started == [("count", "local[1]", {"afile", "corpus", "corpus/a.txt"})]
