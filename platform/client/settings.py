"""One parser of a client's connection settings: :class:`ClientSettings`, with Kafka's client config names.

The CLI (``--bootstrap-server``, ``LAKELOG_*``, ``--command-config FILE``), the Spark source and sink
(``lakelog.*`` / ``kafka.*`` options) and the demo all read their connection settings here, and
:meth:`ClientSettings.client` builds the :class:`~lakelog.client.LakelogClient` of them. Modelled on
quix-streams' ``ConnectionConfig`` (``from_librdkafka_dict``); the names are Kafka's client configs
(``org.apache.kafka.clients.CommonClientConfigs``, ``SaslConfigs``, ``ProducerConfig``; librdkafka's
``ssl.ca.location`` is Python's ``ssl.cafile``).

Sources, highest precedence first (:meth:`ClientSettings.load`):

1. explicit values (CLI flags, keyword arguments);
2. a ``--command-config`` properties file when one is given (:meth:`ClientSettings.from_properties`): it
   alone holds the security settings, as Kafka tools read only the file: the environment is then not read;
3. else the environment (:meth:`ClientSettings.from_env`): ``LAKELOG_BOOTSTRAP_SERVERS`` (or the CLI's
   ``LAKELOG_BOOTSTRAP_SERVER``), ``LAKELOG_USERNAME`` / ``LAKELOG_PASSWORD`` (or ``LAKELOG_SASL_USERNAME``
   / ``LAKELOG_SASL_PASSWORD``), ``LAKELOG_TOKEN`` (or ``LAKELOG_SASL_OAUTHBEARER_TOKEN``),
   ``LAKELOG_SSL_CAFILE``, ``LAKELOG_SSL_CERTFILE``, ``LAKELOG_SSL_KEYFILE``, ``LAKELOG_SECURITY_PROTOCOL``,
   ``LAKELOG_SASL_MECHANISM``, ``LAKELOG_CLIENT_ID``;
4. the defaults below.

Spark options (:meth:`ClientSettings.from_spark_options`) are a source of their own: an executor's
environment is not the driver's, so only the options count.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, PrivateAttr, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from lakelog.client.auth import BearerToken
from lakelog.client.transport import LakelogClient, parse_bootstrap
from lakelog.config import read_properties
from lakelog.errors import ConfigError

__all__ = ["CREDENTIAL_NAMES", "ClientSettings", "SPARK_BOOTSTRAP_OPTIONS", "SPARK_OPTION_NAMES", "SaslMechanism",
           "SecurityProtocol"]

#: Kafka's ``security.protocol``: SSL and SASL_SSL mean HTTPS (``host:port`` -> ``https://host:port``);
#: PLAINTEXT and SASL_PLAINTEXT plain HTTP. Unset: HTTPS exactly when a TLS file is given.
SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
#: Kafka's ``sasl.mechanism``: PLAIN and SCRAM-SHA-512 send ``sasl.username`` / ``sasl.password`` as HTTP
#: Basic (the broker checks them against the user's SCRAM-SHA-512 credential); OAUTHBEARER sends
#: ``sasl.oauthbearer.token``. Unset: whichever credentials are given.
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-512", "OAUTHBEARER"]

#: The credentials' names in messages, per source: (user, password, token).
CREDENTIAL_NAMES: dict[str, tuple[str, str, str]] = {
    "kafka": ("sasl.username", "sasl.password", "sasl.oauthbearer.token"),
    "env": ("LAKELOG_USERNAME", "LAKELOG_PASSWORD", "LAKELOG_TOKEN"),
    "spark": ("lakelog.auth.username", "lakelog.auth.password", "lakelog.auth.token"),
}

#: Spark option -> Kafka client config, for the options whose name is not ``lakelog.`` + the config's.
SPARK_OPTION_NAMES: dict[str, str] = {
    "lakelog.auth.username": "sasl.username",
    "lakelog.auth.password": "sasl.password",
    "lakelog.auth.token": "sasl.oauthbearer.token",
}
#: The gateways' Spark options: lakelog's, and Spark's Kafka source's (an alias).
SPARK_BOOTSTRAP_OPTIONS = ("lakelog.bootstrap.servers", "kafka.bootstrap.servers")


class ClientSettings(BaseSettings):
    """How a client reaches and authenticates to the gateways (Kafka's client configs, dotted names as
    aliases: ``ClientSettings(**{"bootstrap.servers": "h:8082"})``).

    Build from a source with :meth:`load`, :meth:`from_env`, :meth:`from_properties` or
    :meth:`from_spark_options`, which check the credentials at once (:meth:`auth`); the constructor alone
    takes only its keyword arguments (no environment) and leaves that check to :meth:`auth` and
    :meth:`client`.

    Raises:
        ValueError: a value of the wrong type or out of range (a ``pydantic.ValidationError``), credentials
            that do not fit (a user without a password, a token and a user, an empty token, a token with
            ``sasl.mechanism=PLAIN``), or an unknown key.
    """

    model_config = SettingsConfigDict(env_prefix="LAKELOG_", extra="forbid", populate_by_name=True, frozen=True)

    bootstrap_servers: str = Field(
        "localhost:8082", validation_alias=AliasChoices(
            "bootstrap.servers", "bootstrap_servers", "LAKELOG_BOOTSTRAP_SERVERS", "LAKELOG_BOOTSTRAP_SERVER"),
        description="bootstrap.servers: the gateways, host:port[,host:port] or URLs; the first that answers is used. "
                    "Default: localhost:8082.")
    security_protocol: SecurityProtocol | None = Field(
        None, validation_alias=AliasChoices("security.protocol", "security_protocol", "LAKELOG_SECURITY_PROTOCOL"),
        description="security.protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL; SSL and SASL_SSL make host:port "
                    "https://host:port. Default: none (HTTPS exactly when an ssl.* file is given).")
    sasl_mechanism: SaslMechanism | None = Field(
        None, validation_alias=AliasChoices("sasl.mechanism", "sasl_mechanism", "LAKELOG_SASL_MECHANISM"),
        description="sasl.mechanism: PLAIN or SCRAM-SHA-512 (sasl.username and sasl.password as HTTP Basic) or "
                    "OAUTHBEARER (sasl.oauthbearer.token). Default: none (the credentials given).")
    sasl_username: str | None = Field(
        None, validation_alias=AliasChoices(
            "sasl.username", "sasl_username", "LAKELOG_SASL_USERNAME", "LAKELOG_USERNAME"),
        description="sasl.username: the lakelog user (HTTP Basic; brokers with authentication.methods holding basic). "
                    "With sasl.password. Default: none.")
    sasl_password: SecretStr | None = Field(
        None, validation_alias=AliasChoices(
            "sasl.password", "sasl_password", "LAKELOG_SASL_PASSWORD", "LAKELOG_PASSWORD"),
        description="sasl.password: sasl.username's password. Default: none.")
    sasl_oauthbearer_token: SecretStr | None = Field(
        None, validation_alias=AliasChoices(
            "sasl.oauthbearer.token", "sasl_oauthbearer_token", "LAKELOG_SASL_OAUTHBEARER_TOKEN", "LAKELOG_TOKEN"),
        description="sasl.oauthbearer.token: a bearer token (a JWT), sent as Authorization: Bearer (brokers with "
                    "oauthbearer), instead of a user and password. Default: none.")
    ssl_cafile: str | None = Field(
        None, validation_alias=AliasChoices("ssl.cafile", "ssl_cafile", "LAKELOG_SSL_CAFILE"),
        description="ssl.cafile: PEM CA certificate(s) the gateways' certificates are verified against. Default: the "
                    "system's trusted CAs.")
    ssl_certfile: str | None = Field(
        None, validation_alias=AliasChoices("ssl.certfile", "ssl_certfile", "LAKELOG_SSL_CERTFILE"),
        description="ssl.certfile: PEM client certificate for brokers that ask for one (ssl.client.auth; "
                    "authentication.methods=mtls). Default: none.")
    ssl_keyfile: str | None = Field(
        None, validation_alias=AliasChoices("ssl.keyfile", "ssl_keyfile", "LAKELOG_SSL_KEYFILE"),
        description="ssl.keyfile: PEM key of ssl.certfile. Default: none (in ssl.certfile).")
    client_id: str | None = Field(
        None, validation_alias=AliasChoices("client.id", "client_id", "LAKELOG_CLIENT_ID"),
        description="client.id: sent with every request (X-Lakelog-Client-Id) for the brokers' client quotas. Default: "
                    "none (the empty client id).")
    request_timeout_ms: int = Field(
        60_000, gt=0, validation_alias=AliasChoices("request.timeout.ms", "request_timeout_ms"),
        description="request.timeout.ms: how long the client waits for an answer to one request, ms. Default: 60000.")
    enable_idempotence: bool = Field(
        True, validation_alias=AliasChoices("enable.idempotence", "enable_idempotence"),
        description="enable.idempotence: produce requests carry a producer id and sequence and are retried with it. "
                    "Default: true.")
    delivery_timeout_ms: int = Field(
        120_000, gt=0, validation_alias=AliasChoices("delivery.timeout.ms", "delivery_timeout_ms"),
        description="delivery.timeout.ms: how long an idempotent produce request is retried from its first try, ms. "
                    "Default: 120000.")
    retry_backoff_ms: int = Field(
        100, ge=0, validation_alias=AliasChoices("retry.backoff.ms", "retry_backoff_ms"),
        description="retry.backoff.ms: the first wait between tries of a produce request, ms; it doubles on each retry. "
                    "Default: 100.")
    retry_backoff_max_ms: int = Field(
        1000, ge=0, validation_alias=AliasChoices("retry.backoff.max.ms", "retry_backoff_max_ms"),
        description="retry.backoff.max.ms: the longest wait between tries, ms. Default: 1000.")

    #: the names the credentials had in their source, for messages (a value of :data:`CREDENTIAL_NAMES`)
    _credential_names: tuple[str, str, str] = PrivateAttr(default=CREDENTIAL_NAMES["kafka"])

    @classmethod
    def settings_customise_sources(
            cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource) -> tuple[PydanticBaseSettingsSource, ...]:
        """Only the keyword arguments: :meth:`load` merges the sources in their precedence."""
        return (init_settings,)

    @field_validator("sasl_username", "ssl_cafile", "ssl_certfile", "ssl_keyfile", "client_id", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        """An empty value (``LAKELOG_SSL_CAFILE=``, ``ssl.cafile=``) is no value; text is stripped. (An empty
        password or token is kept: :meth:`auth` refuses it.)"""
        if isinstance(value, str):
            return value.strip() or None
        return value

    @field_validator("bootstrap_servers", mode="before")
    @classmethod
    def _stripped(cls, value: Any) -> Any:
        return value.strip() if isinstance(value, str) else value

    # -- sources --------------------------------------------------------------------------------

    @classmethod
    def _of(cls, values: Mapping[str, Any], *, names: tuple[str, str, str]) -> "ClientSettings":
        """Settings of ``values`` (dotted names or field names), their credentials checked with ``names``.

        Raises:
            ValueError: see the class.
        """
        try:
            settings = cls(**values)
        except ValidationError as e:
            raise ValueError(_describe(e)) from None
        settings._credential_names = names
        settings.auth()
        return settings

    @classmethod
    def from_env(cls, **overrides: Any) -> "ClientSettings":
        """The ``LAKELOG_*`` environment's settings (see the module), ``overrides`` (dotted names or field
        names; None: not given) winning.

        Raises:
            ValueError: see the class; credential messages name the environment variables.
        """
        values = {**cls._dotted(EnvSettingsSource(cls)()), **cls._dotted(overrides)}
        return cls._of(values, names=CREDENTIAL_NAMES["env"])

    @classmethod
    def from_properties(cls, path: str | Path, *, keys: tuple[str, ...] | None = None,
                        **overrides: Any) -> "ClientSettings":
        """The settings of a Java ``.properties`` file of Kafka client configs (Kafka tools'
        ``--command-config``: ``sasl.username=alice``), ``overrides`` winning.

        Args:
            path: the file.
            keys: the keys the file may hold. Default: every setting's dotted name.
            overrides: values that win over the file's (None: not given).

        Raises:
            ValueError: an unreadable file (naming it), an unknown key (naming the known ones), or see the class.
        """
        try:
            values = read_properties(path)
        except ConfigError as e:
            raise ValueError(str(e)) from None
        known = keys if keys is not None else cls.dotted_names()
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ValueError(f"--command-config {path}: unknown key(s) {', '.join(unknown)} "
                             f"(known: {', '.join(known)})")
        return cls._of({**values, **cls._dotted(overrides)}, names=CREDENTIAL_NAMES["kafka"])

    @classmethod
    def from_spark_options(cls, options: Mapping[str, str]) -> "ClientSettings":
        """The settings of a Spark source's or sink's options (names case-insensitive, as Spark's):
        ``lakelog.bootstrap.servers`` or its alias ``kafka.bootstrap.servers`` (required),
        ``lakelog.auth.username`` / ``lakelog.auth.password`` or ``lakelog.auth.token``, and
        ``lakelog.`` + any other setting's dotted name (``lakelog.ssl.cafile``). Other options are not
        looked at (the source checks them); the environment is not read.

        Raises:
            ValueError: no gateways, the two gateway options with different values, or see the class;
                messages name the options.
        """
        opts = {str(k).lower(): str(v) for k, v in options.items() if v is not None}
        given = {name: opts[name].strip() for name in SPARK_BOOTSTRAP_OPTIONS if opts.get(name, "").strip()}
        if len(set(given.values())) > 1:
            raise ValueError(f"Options {' and '.join(repr(n) for n in given)} are aliases (the gateways) but differ "
                             f"({given}); give one.")
        if not given:
            raise ValueError("Option 'lakelog.bootstrap.servers' (or its alias 'kafka.bootstrap.servers') must be "
                             "specified: a comma-separated list of the gateways' host:port.")
        dotted = set(cls.dotted_names())
        values: dict[str, Any] = {"bootstrap.servers": next(iter(given.values()))}
        for name, value in opts.items():
            key = SPARK_OPTION_NAMES.get(name) or (name[len("lakelog."):] if name.startswith("lakelog.") else None)
            if key in dotted and key != "bootstrap.servers":
                values[key] = value
        return cls._of(values, names=CREDENTIAL_NAMES["spark"])

    @classmethod
    def load(cls, *, command_config: str | Path | None = None, command_config_keys: tuple[str, ...] | None = None,
             **flags: Any) -> "ClientSettings":
        """The settings in their precedence: ``flags`` (dotted or field names; None: not given), then the
        ``command_config`` file when given (alone: the environment is then not read), else the environment,
        then the defaults.

        Raises:
            ValueError: see :meth:`from_properties`, :meth:`from_env`.
        """
        if command_config is not None:
            return cls.from_properties(command_config, keys=command_config_keys, **flags)
        return cls.from_env(**flags)

    @classmethod
    def _dotted(cls, values: Mapping[str, Any]) -> dict[str, Any]:
        """``values`` by dotted names (a field name, ``client_id``, becomes ``client.id``), None dropped."""
        by_field = dict(zip(cls.model_fields, cls.dotted_names()))
        return {by_field.get(k, k): v for k, v in values.items() if v is not None}

    @classmethod
    def dotted_names(cls) -> tuple[str, ...]:
        """Every setting's Kafka name (``bootstrap.servers``, ``sasl.username``, ...), in field order."""
        return tuple(f.validation_alias.choices[0] for f in cls.model_fields.values())  # type: ignore[union-attr]

    # -- what a client takes --------------------------------------------------------------------

    def auth(self) -> tuple[str, str] | BearerToken | None:
        """The credentials: ``(sasl.username, sasl.password)`` (HTTP Basic), a
        :class:`~lakelog.client.auth.BearerToken` of ``sasl.oauthbearer.token``, or None.

        Raises:
            ValueError: a token and a user or password ("give either ... not both"), a user without a
                password or the other way round ("set both ... (or neither)"), an empty token, or
                credentials of another kind than ``sasl.mechanism``; naming the settings as their source
                named them.
        """
        user_name, password_name, token_name = self._credential_names
        user = self.sasl_username
        password = None if self.sasl_password is None else self.sasl_password.get_secret_value()
        token = None if self.sasl_oauthbearer_token is None else self.sasl_oauthbearer_token.get_secret_value()
        if token is not None:
            if user is not None or password is not None:
                raise ValueError(f"give either {token_name} (a bearer token) or {user_name} and {password_name}, "
                                 "not both")
            if self.sasl_mechanism not in (None, "OAUTHBEARER"):
                raise ValueError(f"{token_name} is a bearer token: it needs sasl.mechanism=OAUTHBEARER, "
                                 f"not {self.sasl_mechanism}")
            try:
                return BearerToken(token)
            except ValueError as e:
                raise ValueError(f"{token_name}: {e}") from None
        if not user and not password:
            return None
        if not user or password is None:
            raise ValueError(f"set both {user_name} and {password_name} (or neither): they go together "
                             "(a lakelog user: lakelog users add NAME --password-stdin)")
        if self.sasl_mechanism == "OAUTHBEARER":
            raise ValueError(f"sasl.mechanism=OAUTHBEARER takes {token_name}, not {user_name} and {password_name}")
        return user, password

    def tls(self) -> dict[str, str]:
        """The TLS files as :class:`~lakelog.client.LakelogClient` keyword arguments (``ssl_cafile``,
        ``ssl_certfile``, ``ssl_keyfile``), only those given."""
        return {k: v for k, v in (("ssl_cafile", self.ssl_cafile), ("ssl_certfile", self.ssl_certfile),
                                  ("ssl_keyfile", self.ssl_keyfile)) if v}

    def bootstrap_urls(self) -> list[str]:
        """:attr:`bootstrap_servers` as URLs: ``https://`` for ``host:port`` with ``security.protocol`` SSL or
        SASL_SSL, or (unset) with a TLS file; else ``http://``.

        Raises:
            ValueError: no server given.
        """
        https = self.security_protocol in ("SSL", "SASL_SSL") or (self.security_protocol is None and bool(self.tls()))
        return parse_bootstrap(self.bootstrap_servers, scheme="https" if https else "http")

    def client_kwargs(self) -> dict[str, Any]:
        """:class:`~lakelog.client.LakelogClient` keyword arguments of the security settings: ``auth``,
        ``client_id`` when given, and the TLS files (:meth:`tls`)."""
        kwargs: dict[str, Any] = {"auth": self.auth(), **self.tls()}
        if self.client_id:
            kwargs["client_id"] = self.client_id
        return kwargs

    def as_spark_options(self, *, bootstrap: bool = True) -> dict[str, str]:
        """These settings as the Spark source's and sink's options, the inverse of
        :meth:`from_spark_options`: ``lakelog.bootstrap.servers`` (with ``bootstrap``), ``lakelog.auth.*`` and
        ``lakelog.ssl.*``, only those set (the source has no option for the other settings)."""
        secret = {"sasl.password": self.sasl_password, "sasl.oauthbearer.token": self.sasl_oauthbearer_token}
        values = {"sasl.username": self.sasl_username, "ssl.cafile": self.ssl_cafile, "ssl.certfile": self.ssl_certfile,
                  "ssl.keyfile": self.ssl_keyfile,
                  **{k: None if v is None else v.get_secret_value() for k, v in secret.items()}}
        by_setting = {setting: option for option, setting in SPARK_OPTION_NAMES.items()}
        out = {"lakelog.bootstrap.servers": self.bootstrap_servers} if bootstrap else {}
        out.update({by_setting.get(k, f"lakelog.{k}"): v for k, v in values.items() if v is not None})
        return out

    def client(self, **overrides: Any) -> LakelogClient:
        """A :class:`~lakelog.client.LakelogClient` of these settings (``overrides``: its keyword arguments
        that win, e.g. ``enable_idempotence=False``).

        Raises:
            ValueError: see :class:`~lakelog.client.LakelogClient` (an unreadable TLS file, ...).
        """
        kwargs: dict[str, Any] = {
            "timeout_s": self.request_timeout_ms / 1000, "enable_idempotence": self.enable_idempotence,
            "delivery_timeout_ms": self.delivery_timeout_ms, "retry_backoff_ms": self.retry_backoff_ms,
            "retry_backoff_max_ms": self.retry_backoff_max_ms, **self.client_kwargs(), **overrides}
        return LakelogClient(self.bootstrap_urls(), **kwargs)


def _describe(error: ValidationError) -> str:
    """A pydantic error as one line per bad setting, by its Kafka name: ``request.timeout.ms: ...``."""
    lines = []
    for e in error.errors():
        name = ".".join(str(p) for p in e["loc"]) or "settings"
        secret = e["type"] == "extra_forbidden" or any(w in name for w in ("password", "token"))
        lines.append(f"{name}: {e['msg']}" + ("" if secret else f" (got {e.get('input')!r})"))
    return "; ".join(lines)
