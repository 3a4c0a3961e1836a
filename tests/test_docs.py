"""The configuration page of the docs site (docs/hooks/config_reference.py) documents every setting.

``make docs`` renders the page with MkDocs; these tests call the hook's rendering functions directly
(they need only lakelog), so a setting without a description, or one the page would leave out, fails
here too.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from lakelog.client.settings import ClientSettings
from lakelog.config import BrokerSettings, TopicConfig

ROOT = Path(__file__).resolve().parents[1]


def _hook():
    spec = importlib.util.spec_from_file_location("config_reference", ROOT / "docs" / "hooks" / "config_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("model", [BrokerSettings, TopicConfig, ClientSettings])
def test_every_setting_has_a_description(model):
    missing = [name for name, field in model.model_fields.items() if not (field.description or "").strip()]
    assert not missing, f"give these {model.__name__} fields Field(..., description=...): {missing}"


def test_the_page_lists_every_setting_with_kafka_names():
    hook = _hook()
    broker = {row["name"]: row for row in hook.settings_rows("broker")}
    topic = {row["name"]: row for row in hook.settings_rows("topic")}
    assert len(broker) == len(BrokerSettings.model_fields)
    assert set(topic) == {field.alias for field in TopicConfig.model_fields.values()}
    assert broker["log.dirs"]["source"] == "`LAKELOG_LOG_DIRS`"
    assert broker["log.retention.check.interval.ms"]["default"] == "`300000`"
    assert "sasl.oauthbearer.jwks.endpoint.url" in broker["oauth.jwks.url"]["source"]
    assert topic["retention.ms"]["source"] == "default from broker `log.retention.ms`"
    assert topic["cleanup.policy"]["type"] == "one of: `delete`, `compact`, `compact,delete`"
    assert broker["rack"]["type"] == "string or none" and broker["rack"]["default"] == "none"
    assert broker["controlled.shutdown.enable"]["default"] == "true"
    # the name leads the row, so the description does not repeat it
    assert not broker["message.max.bytes"]["description"].startswith("message.max.bytes")


def test_a_field_without_a_description_fails_the_page():
    hook = _hook()

    class Bare(TopicConfig):
        extra_ms: int = 0

    with pytest.raises(ValueError, match="Bare.extra_ms has no description"):
        hook._description(Bare, "extra_ms")


def test_the_markers_are_on_the_configuration_page():
    page = (ROOT / "docs" / "configuration.md").read_text()
    for marker in _hook().MARKERS:
        assert marker in page


def test_the_page_lists_every_client_setting_with_its_environment_and_spark_names():
    hook = _hook()
    client = {row["name"]: row for row in hook.settings_rows("client")}
    assert tuple(client) == ClientSettings.dotted_names()
    assert client["bootstrap.servers"]["source"] == ("`LAKELOG_BOOTSTRAP_SERVERS`, `LAKELOG_BOOTSTRAP_SERVER`, "
                                                     "Spark `lakelog.bootstrap.servers` or `kafka.bootstrap.servers`")
    assert client["sasl.username"]["source"].endswith("`LAKELOG_USERNAME`, Spark `lakelog.auth.username`")
    assert client["ssl.cafile"]["source"] == "`LAKELOG_SSL_CAFILE`, Spark `lakelog.ssl.cafile`"
    assert client["request.timeout.ms"]["source"] == "Spark `lakelog.request.timeout.ms`"
    assert client["request.timeout.ms"]["default"] == "`60000`" and client["request.timeout.ms"]["type"] == "int"
    assert client["sasl.password"]["type"] == "password (secret) or none"
    assert client["security.protocol"]["type"] == "one of: `PLAINTEXT`, `SSL`, `SASL_PLAINTEXT`, `SASL_SSL` or none"
    assert not client["client.id"]["description"].startswith("client.id")
    assert '<code id="client-sasl.mechanism">' in hook.settings_table("client").replace("<wbr>", "")
