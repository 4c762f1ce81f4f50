"""The driver's Kafka clients on secured Kafka: the options a Spark user writes in the
Java client's spelling, translated for librdkafka (``persistent.sources.kafka_client``),
each rule on its own, then against the SASL_SSL listener of a real broker
(``secured_kafka``: SCRAM-SHA-512 over TLS), where a wrong password and a truststore
that does not hold the broker's certificate are refused in one line. The whole job on
that listener is tests/spark/test_secured_kafka.py."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from urllib.parse import urlencode

import pytest

from kafka_topics import Results, Topic, committed, new_topic, spread
from persistent.core.errors import ConfigError, SetupError
from persistent.sources.kafka_client import JAVA_ONLY, _detail, check_brokers, client, client_settings
from persistent.sinks.base import BatchId
from persistent.sinks.kafka import KafkaSink
from persistent.sinks.uri import sink_from_uri
from persistent.sources.kafka import KafkaSource
from secured_broker import SCRAM_LOGIN, TRUSTSTORE_PASSWORD, keytool, self_signed

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def translated(**options: str) -> dict[str, str]:
    """``client_settings`` of the source's options ``kafka.NAME`` (``NAME`` with ``_`` for ``.``)."""
    return client_settings("kafka source", "b:9093", {f"kafka.{name.replace('_', '.')}": value
                                                       for name, value in options.items()})


@pytest.mark.parametrize("line, user, password", [
    (SCRAM_LOGIN.format("alice", "s3cret"), "alice", "s3cret"),
    (f'{SCRAM} required username="al ice" password="a \\"quoted\\" pass;word";', "al ice", 'a "quoted" pass;word'),
    (f"{PLAIN} REQUIRED\n  username=bob\n  password='x=y';", "bob", "x=y"),
])
def test_a_scram_or_plain_login_line_becomes_the_user_and_password(line, user, password):
    assert translated(sasl_jaas_config=line) == {"bootstrap.servers": "b:9093", "sasl.username": user,
                                                 "sasl.password": password}


@pytest.mark.parametrize("line, message", [
    (f'{SCRAM} required username="alice" password="hunter2"', "kafka.sasl.jaas.config does not parse: it is a "
                                                               "login module, a flag and the module's options"),
    (f'{SCRAM} required username="alice password=hunter2;', "kafka.sasl.jaas.config does not parse"),
    (f'{SCRAM} required username="alice";', "kafka.sasl.jaas.config has no password"),
    (f'{SCRAM} required username="alice" password="hunter2" tokenauth="true";',
     "kafka.sasl.jaas.config: the driver's Kafka client takes username and password only, not tokenauth"),
    ('com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab="/k" principal="hunter2";',
     "kafka.sasl.jaas.config: the driver's Kafka client (librdkafka) logs in with ScramLoginModule or "
     "PlainLoginModule only, not com.sun.security.auth.module.Krb5LoginModule"),
])
def test_a_login_line_the_driver_cannot_use_is_one_error_naming_the_option_and_not_the_password(line, message):
    with pytest.raises(ConfigError) as refused:
        translated(sasl_jaas_config=line)
    assert str(refused.value).startswith(f"kafka source: {message}")
    assert "hunter2" not in str(refused.value) and "\n" not in str(refused.value)


def test_security_protocol_mechanism_and_the_other_client_options_pass_as_written_and_sparks_do_not():
    options = {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-256",
               "kafka.client.id": "counting", "kafka.isolation.level": "read_committed", "failOnDataLoss": "false"}
    assert client_settings("kafka source", "b:9093", options) == {
        "bootstrap.servers": "b:9093", "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
        "client.id": "counting", "isolation.level": "read_committed"}


def test_the_java_clients_own_machinery_is_left_out_and_librdkafka_takes_the_rest():
    java = {f"kafka.{name}": "x" for name in JAVA_ONLY}
    settings = client_settings("kafka source", "b:9093", {**java, "kafka.security.protocol": "SSL"})
    assert settings == {"bootstrap.servers": "b:9093", "security.protocol": "SSL"}
    client("Consumer", "kafka source", {**settings, "group.id": "g"}).close()


@pytest.mark.parametrize("java, librdkafka", [("", "none"), ("https", "https")])
def test_javas_empty_endpoint_identification_is_librdkafkas_none(java, librdkafka):
    assert translated(ssl_endpoint_identification_algorithm=java)["ssl.endpoint.identification.algorithm"] == librdkafka


def test_a_pem_truststore_is_the_ca_location_and_certificates_in_an_option_are_the_ca_pem():
    assert translated(ssl_truststore_location="/etc/ca.pem", ssl_truststore_type="PEM") == {
        "bootstrap.servers": "b:9093", "ssl.ca.location": "/etc/ca.pem"}
    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    assert translated(ssl_truststore_certificates=pem, ssl_truststore_type="PEM")["ssl.ca.pem"] == pem


@pytest.mark.parametrize("store_type, given", [("JKS", "JKS"), ("PKCS12", "PKCS12"), ("PKCS12", None)])
def test_a_jks_or_pkcs12_truststore_becomes_its_certificates_in_pem(tmp_path, store_type, given):
    _, truststore = self_signed(tmp_path, "ca", store_type)
    settings = translated(ssl_truststore_location=str(truststore), ssl_truststore_password=TRUSTSTORE_PASSWORD,
                          **({"ssl_truststore_type": given} if given else {}))
    assert settings == {"bootstrap.servers": "b:9093", "ssl.ca.pem": (tmp_path / "ca.pem").read_text()}


def test_a_truststore_keytool_cannot_read_is_refused_naming_it_and_why(tmp_path):
    _, truststore = self_signed(tmp_path, "ca")
    for password, why in (("hunter2", "Keystore was tampered with, or password was incorrect"),
                          (TRUSTSTORE_PASSWORD, "Invalid keystore format")):
        location = truststore if password != TRUSTSTORE_PASSWORD else tmp_path / "ca.pem"
        with pytest.raises(ConfigError) as refused:
            translated(ssl_truststore_location=str(location), ssl_truststore_password=password,
                       ssl_truststore_type="JKS")
        assert str(refused.value) == (f"kafka source: kafka.ssl.truststore.location {location}: keytool cannot "
                                      f"read it ({why})")
    with pytest.raises(ConfigError, match=f"^kafka source: kafka.ssl.truststore.location {tmp_path}/nowhere.jks: "
                                          f"No such file or directory$"):
        translated(ssl_truststore_location=str(tmp_path / "nowhere.jks"))


def test_without_keytool_a_jks_truststore_is_a_setup_error_that_names_the_way_out(tmp_path, monkeypatch):
    _, truststore = self_signed(tmp_path, "ca")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SetupError, match=r"^kafka sink: kafka.ssl.truststore.location .*: the driver reads a JKS or "
                                         r"PKCS12 truststore with Java's keytool, .* or give a PEM truststore"):
        client_settings("kafka sink", "b:9093", {"kafka.ssl.truststore.location": str(truststore)})


def test_a_pkcs12_keystore_passes_and_a_jks_one_is_refused_naming_the_conversion():
    keystore = {"ssl_keystore_location": "/etc/me.p12", "ssl_keystore_password": "pw", "ssl_key_password": "pw"}
    assert translated(**keystore, ssl_keystore_type="PKCS12") == {
        "bootstrap.servers": "b:9093", "ssl.keystore.location": "/etc/me.p12", "ssl.keystore.password": "pw",
        "ssl.key.password": "pw"}
    with pytest.raises(ConfigError, match="kafka.ssl.keystore.type JKS: the driver's Kafka client \\(librdkafka\\) "
                                          "reads PKCS12 keystores only; convert it with keytool -importkeystore"):
        translated(**keystore, ssl_keystore_type="JKS")


def test_an_option_librdkafka_does_not_know_is_refused_when_the_client_is_made_naming_it():
    source = KafkaSource("b:9093", "events", kafka_options={"kafka.fetch.wait.forever": "1"})
    with pytest.raises(ConfigError, match='^kafka source: the driver\'s Kafka client \\(librdkafka\\) refuses the '
                                          'options: .*fetch.wait.forever'):
        source.rewind_positions()


def test_the_source_and_the_sink_translate_alike():
    options = {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.jaas.config": SCRAM_LOGIN.format("a", "b"),
               "kafka.ssl.endpoint.identification.algorithm": ""}
    assert (KafkaSource("b:9093", "events", kafka_options={**options, "failOnDataLoss": "true"})._settings()
            == KafkaSink("b:9093", "results", options)._settings())


@pytest.fixture(scope="module")
def pkcs12_truststore(secured_kafka, untrusted_truststore, tmp_path_factory) -> Path:
    """A PKCS12 truststore holding another certificate, then the secured broker's
    (``keytool`` lists them by alias: the broker's is not the first of the PEM)."""
    truststore = tmp_path_factory.mktemp("pkcs12") / "two.truststore.p12"
    for alias, certificate in (("a-stranger", untrusted_truststore.with_name("stranger.pem")),
                               ("z-broker", secured_kafka.directory / "broker.pem")):
        keytool("-importcert", "-noprompt", "-keystore", str(truststore), "-storetype", "PKCS12", "-storepass",
                TRUSTSTORE_PASSWORD, "-alias", alias, "-file", str(certificate))
    return truststore


@pytest.mark.parametrize("store", ["JKS", "PKCS12"])
def test_the_translated_options_produce_and_consume_on_the_secured_listener(secured_kafka, pkcs12_truststore,
                                                                            store):
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    options = secured_kafka.options()
    if store == "PKCS12":
        options |= {"kafka.ssl.truststore.location": str(pkcs12_truststore), "kafka.ssl.truststore.type": store}
    settings = client_settings("kafka sink", secured_kafka.secured, options)
    topic = new_topic(secured_kafka.bootstrap, "secured", 1)
    producer = client("Producer", "kafka sink", settings)
    for i in range(3):
        producer.produce(topic, value=str(i).encode())
    assert producer.flush(30) == 0
    consumer = client("Consumer", "kafka sink", {**settings, "group.id": "readers"})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    values = []
    try:
        while len(values) < 3:
            message = consumer.poll(30)
            assert message is not None and message.error() is None, message and message.error()
            values.append(message.value().decode())
    finally:
        consumer.close()
    assert values == ["0", "1", "2"]


def test_the_rewind_lookups_of_path_b_work_on_the_secured_listener(secured_kafka):
    topic = Topic(secured_kafka.bootstrap)  # written on the PLAINTEXT listener
    topic.write(spread(10, 30, 10))
    source = KafkaSource(secured_kafka.secured, topic.name, kafka_options=secured_kafka.options())
    source.check_brokers()
    with closing(source.rewind_positions()) as positions:
        assert positions(45) == {topic.name: {"0": 2, "1": 1, "2": 1}}
        assert positions(1_000) == {topic.name: {"0": 10, "1": 10, "2": 10}}


def test_the_kafka_sink_writes_its_transactions_to_the_secured_listener(secured_kafka):
    topic = new_topic(secured_kafka.bootstrap, "results", 1)
    sink = sink_from_uri(f"kafka://{secured_kafka.secured}/{topic}?{urlencode(secured_kafka.options())}")
    sink.check_brokers()
    assert sink.newest_generation(None) is None
    sink.write(Results([("a", 1), ("b", 2)]), BatchId(0, 0), False)
    assert KafkaSink(secured_kafka.secured, topic, secured_kafka.options()).newest_generation(None) == 0
    assert [(key, value) for key, value, _, _, _ in committed(secured_kafka.bootstrap, topic)] == [("a", "1"),
                                                                                                 ("b", "2")]


@pytest.mark.parametrize("what", ["source", "sink"])
def test_a_wrong_password_is_refused_in_one_line_naming_the_brokers(secured_kafka, what):
    options = secured_kafka.options(password="hunter2")
    kafka = (KafkaSource(secured_kafka.secured, "events", kafka_options=options) if what == "source"
             else KafkaSink(secured_kafka.secured, "results", options))
    with pytest.raises(ConfigError) as refused:
        kafka.check_brokers()
    assert str(refused.value).startswith(f"kafka {what}: brokers {secured_kafka.secured}: authentication failed "
                                         f"(SASL authentication error: Authentication failed during authentication "
                                         f"due to invalid credentials with SASL mechanism SCRAM-SHA-512); check the "
                                         f"user and password of kafka.sasl.jaas.config")
    assert "\n" not in str(refused.value) and "hunter2" not in str(refused.value)


def test_a_truststore_without_the_brokers_certificate_is_refused_in_one_line_naming_the_brokers(
        secured_kafka, untrusted_truststore):
    settings = client_settings("kafka source", secured_kafka.secured,
                               secured_kafka.options(truststore=untrusted_truststore))
    with pytest.raises(ConfigError) as refused:
        check_brokers("kafka source", settings)
    assert str(refused.value) == (
        f"kafka source: brokers {secured_kafka.secured}: certificate not trusted (SSL handshake failed: "
        f"error:0A000086:SSL routines::certificate verify failed: broker certificate could not be verified); "
        f"kafka.ssl.truststore.location must hold the broker's certificate or its CA's")


class _Met:
    """A connection error as librdkafka's error callback hands it."""

    def __init__(self, text):
        self.text = text

    def str(self):
        return self.text


@pytest.mark.parametrize("text", [
    "127.0.0.1:9/bootstrap: Connect to ipv4#127.0.0.1:9 failed: Connection refused (after 0ms in state CONNECT)",
    "127.0.0.1:9/bootstrap: Connect to ipv4#127.0.0.1:9 failed: Connection refused "
    "(after 0ms in state CONNECT, 1 identical error(s) suppressed)",
    "sasl_ssl://127.0.0.1:9/bootstrap: Connect to ipv4#127.0.0.1:9 failed: Connection refused "
    "(after 12ms in state CONNECT, 31 identical error(s) suppressed)",
])
def test_what_a_connection_met_reads_without_its_name_time_and_repeat_count(text):
    assert _detail(_Met(text)) == "Connect to ipv4#127.0.0.1:9 failed: Connection refused"


def test_brokers_that_do_not_answer_are_a_setup_error_naming_them(free_port):
    settings = client_settings("kafka source", f"127.0.0.1:{free_port()}", {})
    with pytest.raises(SetupError, match=r"^kafka source: brokers 127\.0\.0\.1:\d+: no broker answered within 2 s "
                                         r"\(Connect to ipv4#127\.0\.0\.1:\d+ failed: Connection refused\)$"):
        check_brokers("kafka source", settings, timeout_s=2)
