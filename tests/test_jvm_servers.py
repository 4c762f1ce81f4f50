"""What the tests' server and archive set-up says when a run fails, the secured Kafka
broker's listeners (``secured_broker``), and the YARN cluster's NodeManager and client
configuration."""

from __future__ import annotations

import pytest

from jvm_servers import failure

TRACEBACK = """Traceback (most recent call last):
  File "examples/count.py", line 1, in <module>
    from monoids import Count
ModuleNotFoundError: No module named 'monoids'"""


def test_a_failed_runs_python_traceback_is_its_failure_without_sparks_lines_around_it():
    stderr = ("26/11/27 WARN Utils: Your hostname resolves to a loopback address\n" * 100 + TRACEBACK
              + "\n26/11/27 INFO ShutdownHookManager: Shutdown hook called\n" * 100)
    assert failure(stderr) == TRACEBACK


def test_without_a_traceback_the_failure_is_the_end_of_stderr():
    stderr = "x" * 5_000 + "Error: Missing application resource."
    assert failure(stderr) == stderr[-2_000:]


def test_the_secured_broker_takes_its_user_over_tls_beside_its_plaintext_listener(secured_kafka):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    def brokers(bootstrap: str, timeout_s: float = 10, **settings) -> dict:
        return AdminClient({"bootstrap.servers": bootstrap, **settings}).list_topics(timeout=timeout_s).brokers

    login = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": secured_kafka.user,
             "ssl.ca.location": str(secured_kafka.directory / "broker.pem")}
    assert brokers(secured_kafka.secured, **login, **{"sasl.password": secured_kafka.password})
    assert brokers(secured_kafka.bootstrap)
    with pytest.raises(KafkaException):
        brokers(secured_kafka.secured, 2, **login, **{"sasl.password": "wrong"})
    # The truststore of the Spark user's options is Java's own format (JKS's magic number).
    assert secured_kafka.truststore.read_bytes()[:4] == bytes.fromhex("feedfeed")
    assert secured_kafka.options()["kafka.ssl.truststore.location"] == str(secured_kafka.truststore)


def test_the_yarn_clusters_nodemanager_registers_and_its_client_configuration_is_written(yarn_cluster, hdfs_cluster):
    [node] = yarn_cluster.nodes()
    assert node["state"] == "RUNNING" and node["nodeHostName"] == "localhost"
    assert node["usedMemoryMB"] + node["availMemoryMB"] == 4096
    yarn_site = (yarn_cluster.conf_dir / "yarn-site.xml").read_text()
    assert all(f"<value>{address}</value>" in yarn_site for address in yarn_cluster.addresses.values())
    assert f"<value>{hdfs_cluster.uri}</value>" in (yarn_cluster.conf_dir / "core-site.xml").read_text()
    assert yarn_cluster.log_dir.is_dir()
