"""A Kafka broker with a SASL_SSL listener (SCRAM-SHA-512 over TLS) beside its PLAINTEXT
one, and the certificates the tests make for it with Java's keytool.

    with SecuredKafkaBroker() as kafka:
        kafka.bootstrap      # the PLAINTEXT listener, for the tests' own set-up
        kafka.secured        # "127.0.0.1:PORT", the SASL_SSL listener
        kafka.user, kafka.password
        kafka.truststore     # a JKS truststore holding the broker's certificate, kafka.truststore_password
        kafka.options()      # the kafka.* options a Spark user writes to reach the SASL_SSL listener

The broker's key and its self-signed certificate for 127.0.0.1 are made in its directory
as it starts; the user's SCRAM credentials are created with the admin API on the
PLAINTEXT listener once the broker serves, and ``start`` returns once they let a client
in on the SASL_SSL listener. The class lives beside ``jvm_servers``, not in it: the jar
cache is keyed by that module's text, and this listener needs no other jars.
"""

from __future__ import annotations

import secrets
import subprocess
import time
from pathlib import Path

from jvm_servers import KafkaBroker, _free_ports, _java

#: The password of every keystore and truststore the tests make.
TRUSTSTORE_PASSWORD = "truststore-secret"
#: The SASL mechanism of the secured listener.
MECHANISM = "SCRAM-SHA-512"
#: The JAAS line of a client that logs in with SCRAM, as Kafka's Java client takes it.
SCRAM_LOGIN = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="{}" password="{}";'


def keytool(*args: str) -> None:
    """Runs Java's keytool (next to the tests' ``java``); its error fails the caller."""
    done = subprocess.run([str(Path(_java()).with_name("keytool")), *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise RuntimeError(f"keytool {args[0]} failed: {(done.stderr or done.stdout).strip()}")


def self_signed(directory: Path, name: str, store_type: str = "JKS") -> tuple[Path, Path]:
    """A key and its self-signed certificate for 127.0.0.1, in the PKCS12 keystore
    ``directory/NAME.p12``, and a truststore of ``store_type`` holding the certificate,
    ``directory/NAME.truststore.TYPE``: the keystore's path and the truststore's, both
    with ``TRUSTSTORE_PASSWORD``."""
    directory.mkdir(parents=True, exist_ok=True)
    keystore, certificate = directory / f"{name}.p12", directory / f"{name}.pem"
    truststore = directory / f"{name}.truststore.{store_type.lower()}"
    store = ("-storepass", TRUSTSTORE_PASSWORD)
    keytool("-genkeypair", "-keystore", str(keystore), "-storetype", "PKCS12", *store, "-alias", name,
            "-keyalg", "EC", "-validity", "7", "-dname", f"CN={name}", "-ext", "SAN=ip:127.0.0.1,dns:localhost")
    keytool("-exportcert", "-rfc", "-keystore", str(keystore), *store, "-alias", name, "-file", str(certificate))
    keytool("-importcert", "-noprompt", "-keystore", str(truststore), "-storetype", store_type, *store,
            "-alias", name, "-file", str(certificate))
    return keystore, truststore


class SecuredKafkaBroker(KafkaBroker):
    """``KafkaBroker`` with a SASL_SSL listener at ``secured`` that takes ``user`` with
    ``password`` (SCRAM-SHA-512) and shows a certificate ``truststore`` trusts."""

    truststore_password = TRUSTSTORE_PASSWORD

    def __init__(self, directory=None, cache_dir=None, *, properties: dict | None = None):
        super().__init__(directory, cache_dir, properties=properties)
        self.user, self.password = "alice", secrets.token_hex(8)
        self.secured_port: int | None = None
        self.truststore: Path | None = None

    @property
    def secured(self) -> str:
        """The ``bootstrap.servers`` of the SASL_SSL listener: ``127.0.0.1:PORT``."""
        return f"127.0.0.1:{self.secured_port}"

    def options(self, password: str | None = None, truststore: Path | None = None) -> dict[str, str]:
        """The options of Spark's Kafka source (and of the Kafka sink) that reach the
        SASL_SSL listener as ``user``; another ``password`` or ``truststore`` (of
        ``self_signed``) for a test of a refusal."""
        return {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": MECHANISM,
                "kafka.sasl.jaas.config": SCRAM_LOGIN.format(self.user, password or self.password),
                "kafka.ssl.truststore.location": str(truststore or self.truststore),
                "kafka.ssl.truststore.password": TRUSTSTORE_PASSWORD, "kafka.ssl.truststore.type": "JKS"}

    def _settings(self, controller_port: int) -> dict:
        settings = super()._settings(controller_port)
        listener = f"SASL_SSL://127.0.0.1:{self.secured_port}"
        return {
            **settings,
            "listeners": f"{settings['listeners']},{listener}",
            "advertised.listeners": f"{settings['advertised.listeners']},{listener}",
            "listener.security.protocol.map": f"{settings['listener.security.protocol.map']},SASL_SSL:SASL_SSL",
            "sasl.enabled.mechanisms": MECHANISM,
            f"listener.name.sasl_ssl.{MECHANISM.lower()}.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "ssl.keystore.location": self.directory / "broker.p12",
            "ssl.keystore.password": TRUSTSTORE_PASSWORD,
            "ssl.keystore.type": "PKCS12",
            **self.properties,
        }

    def _start(self, classpath: str) -> None:
        (self.secured_port,) = _free_ports(1)
        _, self.truststore = self_signed(self.directory, "broker")
        super()._start(classpath)
        self._add_user()

    def _add_user(self) -> None:
        """Creates the user's SCRAM credentials; returns once they let a client in."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                           UserScramCredentialUpsertion)

        upsert = UserScramCredentialUpsertion(self.user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                              self.password.encode())
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.alter_user_scram_credentials([upsert])[self.user].result(30)
        client = AdminClient({"bootstrap.servers": self.secured, "security.protocol": "SASL_SSL",
                              "sasl.mechanism": MECHANISM, "sasl.username": self.user,
                              "sasl.password": self.password, "ssl.ca.location": str(self.directory / "broker.pem")})
        deadline = time.monotonic() + self.start_timeout
        while True:
            try:
                client.list_topics(timeout=1)
                return
            except KafkaException:
                if time.monotonic() > deadline:
                    raise self._failed(f"took no SCRAM login on {self.secured} within {self.start_timeout} s")
