"""The driver's Kafka clients: confluent-kafka (librdkafka), set up from the options a
Spark user writes for Spark's Kafka source (``kafka.NAME``, in the Java client's
spelling).

Spark reads Kafka with Kafka's Java client, which takes the ``kafka.*`` options as
written. The driver looks up offsets (``persistent.sources.kafka``) and writes the
Kafka sink's transactions (``persistent.sinks.kafka``) with librdkafka, which spells
most options the same way, but not those of security. ``client_settings`` turns the
options into librdkafka's by these rules:

- ``sasl.jaas.config``: the line of Kafka's ``ScramLoginModule`` or
  ``PlainLoginModule`` (``... required username="U" password="P";``) becomes
  ``sasl.username`` and ``sasl.password``. Another login module, another option in the
  line, or a line that does not parse is refused in one line naming the option (never
  the password).
- ``ssl.truststore.location``: librdkafka reads certificates in PEM only. A PEM
  truststore (``ssl.truststore.type=PEM``) is its ``ssl.ca.location``. Any other (JKS,
  PKCS12, JCEKS: what ``ssl.truststore.type`` names, JKS by default) is read with Java's
  ``keytool -list -rfc`` with ``ssl.truststore.password``, and its certificates become
  ``ssl.ca.pem``, held in memory: no file is written. ``keytool`` comes with the Java
  every Spark driver runs on, and reads every truststore Java's client reads, checking
  its password as Java does (Python's ``cryptography`` reads PKCS12 only, and is no
  dependency of the package). It runs once per truststore and process (a JVM start,
  under a second), again when the file changes. ``ssl.truststore.certificates``
  (PEM text) is ``ssl.ca.pem``.
- ``ssl.endpoint.identification.algorithm``: Java's empty value (no host name check) is
  librdkafka's ``none``; ``https`` stays.
- ``ssl.keystore.location``, a client certificate: librdkafka reads a PKCS12 keystore
  (``ssl.keystore.type`` PKCS12 or unset) with ``ssl.keystore.password``; another type
  is refused, naming the command that converts it.
- Settings of the Java client's own machinery (``JAVA_ONLY``: classes it loads, the JVM's
  TLS provider, protocols and algorithms) mean nothing to librdkafka, which has OpenSSL
  negotiate TLS: they are left out.
- Every other option passes under its name (``security.protocol``, ``sasl.mechanism``,
  ``client.id``, ``isolation.level``, ...). One librdkafka does not know is refused when
  the client is made (``client``), in one line naming it. Options without the
  ``kafka.`` prefix are Spark's (``failOnDataLoss``, ...), not the client's.

``check_brokers`` is the check a job passes at start (``persistent.tools.preflight``):
a metadata request with the settings, whose refusal names the brokers and why: the
login failed, or the broker's certificate is not trusted.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import time
from collections.abc import Mapping

from persistent.core.errors import ConfigError, SetupError
from persistent.storage.fs import LocalFileSystem

__all__ = ["client_settings", "client", "check_brokers", "JAVA_ONLY", "CHECK_TIMEOUT_S"]

#: The Java client's settings that librdkafka has no use for, without the ``kafka.`` prefix.
JAVA_ONLY = frozenset({
    "key.deserializer", "value.deserializer", "key.serializer", "value.serializer", "interceptor.classes",
    "metric.reporters", "sasl.login.class", "sasl.client.callback.handler.class",
    "sasl.login.callback.handler.class", "security.providers", "ssl.engine.factory.class", "ssl.provider",
    "ssl.protocol", "ssl.enabled.protocols", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
    "ssl.secure.random.implementation",
})
#: Seconds ``check_brokers`` waits for the brokers' answer.
CHECK_TIMEOUT_S = 10
#: The login modules whose user and password librdkafka takes (``sasl.username``, ``sasl.password``).
_LOGIN_MODULES = ("org.apache.kafka.common.security.scram.ScramLoginModule",
                  "org.apache.kafka.common.security.plain.PlainLoginModule")
#: A JAAS line's option: ``NAME=VALUE``, the value a word or quoted (backslash escapes a character).
_JAAS_OPTION = re.compile(r"""([^\s=;"']+)\s*=\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[^\s=;"']+)""", re.S)
#: A JAAS line of one login module: its class, its flag, its options, ``;``.
_JAAS_LINE = re.compile(
    rf"""\s*([^\s=;"']+)\s+(?:required|requisite|sufficient|optional)((?:\s+{_JAAS_OPTION.pattern})*)\s*;\s*""",
    re.S | re.I)
#: The variable that hands ``keytool`` the truststore's password (not its command line, which ``ps`` shows).
_PASSWORD_VARIABLE = "PERSISTENT_TRUSTSTORE_PASSWORD"
_PEM_CERTIFICATE = re.compile(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.S)


def client_settings(what: str, bootstrap_servers: str, options: Mapping[str, str]) -> dict[str, str]:
    """librdkafka's settings for the brokers ``bootstrap_servers`` and the ``kafka.*``
    options among ``options``, by the rules of the module docstring; ``what`` (``kafka
    source``, ...) begins a refusal's message (``ConfigError``, ``SetupError``)."""
    java = {name.removeprefix("kafka."): value for name, value in options.items() if name.startswith("kafka.")}
    settings = {"bootstrap.servers": bootstrap_servers}
    for name, value in java.items():
        if name == "sasl.jaas.config":
            settings["sasl.username"], settings["sasl.password"] = _login(what, value)
        elif name == "ssl.truststore.location":
            settings |= _trusted(what, value, java.get("ssl.truststore.password"), java.get("ssl.truststore.type"))
        elif name == "ssl.truststore.certificates":
            settings["ssl.ca.pem"] = value
        elif name == "ssl.endpoint.identification.algorithm":
            settings[name] = value or "none"
        elif name == "ssl.keystore.type":
            if value.upper() != "PKCS12":
                raise ConfigError(
                    f"{what}: kafka.ssl.keystore.type {value}: the driver's Kafka client (librdkafka) reads PKCS12 "
                    f"keystores only; convert it with keytool -importkeystore -srckeystore KEYSTORE "
                    f"-destkeystore KEYSTORE.p12 -deststoretype PKCS12")
        elif name not in JAVA_ONLY and name not in ("ssl.truststore.password", "ssl.truststore.type"):
            settings[name] = value
    return settings


def client(kind: str, what: str, settings: Mapping[str, object]):
    """A confluent-kafka ``Consumer`` or ``Producer`` (``kind``) with ``settings``; a
    setting librdkafka refuses is a ``ConfigError`` naming it, a missing confluent-kafka
    a ``SetupError``."""
    try:
        import confluent_kafka
    except ImportError:
        raise SetupError(f"{what}: the driver reaches Kafka with confluent-kafka: "
                         f"pip install 'persistent-state[kafka]'") from None
    try:
        return getattr(confluent_kafka, kind)(dict(settings))
    except confluent_kafka.KafkaException as exc:
        raise ConfigError(f"{what}: the driver's Kafka client (librdkafka) refuses the options: "
                          f"{reason(exc)}") from None


def check_brokers(what: str, settings: Mapping[str, object], timeout_s: float = CHECK_TIMEOUT_S) -> None:
    """Refuses settings (``client_settings``) the brokers do not take: a failed login or
    a broker certificate the truststore does not trust is a ``ConfigError``, no broker
    answering within ``timeout_s`` a ``SetupError``; each in one line naming the brokers."""
    from confluent_kafka import KafkaError, KafkaException

    errors: list = []
    consumer = client("Consumer", what, {**settings, "group.id": "persistent-state-check", "log_level": 0,
                                         "error_cb": errors.append})
    brokers = settings["bootstrap.servers"]
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                consumer.list_topics(timeout=min(0.25, timeout_s))
                return
            except KafkaException as exc:
                consumer.poll(0)  # serves error_cb: what the connections met
                for error in errors:
                    if error.code() == KafkaError._AUTHENTICATION:
                        raise ConfigError(f"{what}: brokers {brokers}: authentication failed ({_detail(error)}); "
                                          f"check the user and password of kafka.sasl.jaas.config") from None
                    if error.code() == KafkaError._SSL and "certificate verify failed" in error.str():
                        raise ConfigError(f"{what}: brokers {brokers}: certificate not trusted ({_detail(error)}); "
                                          f"kafka.ssl.truststore.location must hold the broker's certificate or "
                                          f"its CA's") from None
                if time.monotonic() >= deadline:
                    met = [error for error in errors if error.code() != KafkaError._ALL_BROKERS_DOWN]
                    last = _detail(met[-1]) if met else reason(exc)
                    raise SetupError(f"{what}: brokers {brokers}: no broker answered within {timeout_s:g} s "
                                     f"({last})") from None
    finally:
        consumer.close()


def reason(exc) -> str:
    """A Kafka client error's reason, in one line."""
    error = exc.args[0] if exc.args else exc
    return error.str() if hasattr(error, "str") else str(error)


def _detail(error) -> str:
    """librdkafka's text of a connection's ``error`` without the connection's name, how
    long it took, how often it repeated, and advice in librdkafka's own option names."""
    text = re.sub(r"^(\w+://)?[^\s/]+/\w+: ", "", error.str())
    return re.sub(r"(, verify that .*?)?( \(after \d+ms in state \w+(, \d+ identical error\(s\) suppressed)?\))?$",
                  "", text)


def _login(what: str, line: str) -> tuple[str, str]:
    """The user and password of a ``sasl.jaas.config`` line of a login module of
    ``_LOGIN_MODULES``; a refusal quotes no value of the line."""
    parsed = _JAAS_LINE.fullmatch(line)
    if parsed is None:
        raise ConfigError(f"{what}: kafka.sasl.jaas.config does not parse: it is a login module, a flag and the "
                          f"module's options, as in ScramLoginModule required username=\"USER\" "
                          f"password=\"PASSWORD\";")
    module, options = parsed.group(1, 2)
    if module not in _LOGIN_MODULES:
        raise ConfigError(f"{what}: kafka.sasl.jaas.config: the driver's Kafka client (librdkafka) logs in with "
                          f"{' or '.join(m.rpartition('.')[2] for m in _LOGIN_MODULES)} only, not {module}")
    found = {key: re.sub(r"\\(.)", r"\1", value[1:-1]) if value[0] in "\"'" else value
             for key, value in _JAAS_OPTION.findall(options)}
    odd = sorted(set(found) - {"username", "password"})
    if odd:
        raise ConfigError(f"{what}: kafka.sasl.jaas.config: the driver's Kafka client takes username and password "
                          f"only, not {', '.join(odd)}")
    missing = [key for key in ("username", "password") if key not in found]
    if missing:
        raise ConfigError(f"{what}: kafka.sasl.jaas.config has no {' and no '.join(missing)}")
    return found["username"], found["password"]


def _trusted(what: str, location: str, password: str | None, store_type: str | None) -> dict[str, str]:
    """librdkafka's CA settings for the truststore at ``location``."""
    if (store_type or "").upper() == "PEM":
        return {"ssl.ca.location": location}
    try:
        file = LocalFileSystem().status(location)
        return {"ssl.ca.pem": _truststore_pem(location, password, store_type, file.mtime_ns, file.size)}
    except OSError as exc:
        raise ConfigError(f"{what}: kafka.ssl.truststore.location {location}: {exc.strerror}") from None
    except (ConfigError, SetupError) as exc:
        raise type(exc)(f"{what}: {exc}") from None


@functools.lru_cache(maxsize=None)
def _truststore_pem(location: str, password: str | None, store_type: str | None, mtime_ns: int, size: int) -> str:
    """The certificates of the truststore at ``location`` (the file of ``mtime_ns`` and
    ``size``) in PEM, as Java's ``keytool`` lists them."""
    home = os.environ.get("JAVA_HOME")
    keytool = (shutil.which("keytool", path=os.path.join(home, "bin")) if home else None) or shutil.which("keytool")
    if keytool is None:
        raise SetupError(f"kafka.ssl.truststore.location {location}: the driver reads a JKS or PKCS12 truststore "
                         f"with Java's keytool, which is neither in JAVA_HOME/bin nor on the PATH; install a Java "
                         f"runtime, or give a PEM truststore (kafka.ssl.truststore.type=PEM)")
    command = [keytool, "-list", "-rfc", "-keystore", location]
    command += ["-storepass:env", _PASSWORD_VARIABLE] if password else []
    command += ["-storetype", store_type] if store_type else []
    listed = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60,
                            env={**os.environ, _PASSWORD_VARIABLE: password or ""})
    if listed.returncode != 0:
        last = ((listed.stdout + listed.stderr).strip().splitlines() or ["no output"])[-1]
        why = re.sub(r"^keytool error: (?:[\w.$]+(?:Exception|Error): )?", "", last)
        raise ConfigError(f"kafka.ssl.truststore.location {location}: keytool cannot read it ({why})")
    certificates = _PEM_CERTIFICATE.findall(listed.stdout)
    if not certificates:
        raise ConfigError(f"kafka.ssl.truststore.location {location} holds no certificate")
    return "\n".join(certificates) + "\n"
