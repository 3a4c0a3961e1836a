"""MkDocs hook: the configuration page's tables, generated from the settings' own field descriptions.

``docs/configuration.md`` holds three markers, ``<!-- settings: broker -->``, ``<!-- settings: topic -->``
and ``<!-- settings: client -->``; :func:`on_page_markdown` replaces each with an HTML table of every field
of :class:`lakelog.config.BrokerSettings`, :class:`lakelog.config.TopicConfig` or
:class:`lakelog.client.settings.ClientSettings`: its Kafka-style dotted name (with its ``LAKELOG_*``
environment variable, the broker setting that gives its default, or a client setting's environment
variables and Spark option), type, default and description. A field without a description fails the build (:class:`ValueError`), so a new
setting cannot go undocumented. The rendering functions need only lakelog, not MkDocs
(``tests/test_docs.py`` calls them).
"""

from __future__ import annotations

import enum
import html
import types
import typing
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, SecretStr

from lakelog import config as lakelog_config
from lakelog.client import settings as client_settings

#: What a table documents: the broker's settings, the topic configs, the clients' connection settings.
SettingsKind = Literal["broker", "topic", "client"]

MARKERS: dict[str, SettingsKind] = {
    "<!-- settings: broker -->": "broker",
    "<!-- settings: topic -->": "topic",
    "<!-- settings: client -->": "client",
}


def dotted_name(model: type[BaseModel], field_name: str) -> str:
    """A field's Kafka-style name: the alias of a :class:`TopicConfig` field (``retention.ms``), else the
    field name with dots for underscores (``log_dirs`` -> ``log.dirs``, as ``BrokerSettings.load`` reads
    a properties file)."""
    alias = model.model_fields[field_name].alias
    return alias if alias else field_name.replace("_", ".")


def type_name(annotation: Any) -> str:
    """A short, user-facing name of a field's type: ``int``, ``path``, ``one of: a, b``, ``... or none``."""
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return "one of: " + ", ".join(f"`{a}`" for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        inner = " or ".join(type_name(a) for a in args)
        return f"{inner} or none" if len(args) < len(typing.get_args(annotation)) else inner
    if isinstance(annotation, type):
        if issubclass(annotation, bool):
            return "boolean"
        if issubclass(annotation, Path):
            return "path"
        if issubclass(annotation, SecretStr):
            return "password (secret)"
        if issubclass(annotation, enum.Enum):
            return "one of: " + ", ".join(f"`{m.value}`" for m in annotation)
        return {int: "int", float: "float", str: "string"}.get(annotation, annotation.__name__)
    return str(annotation)


def default_text(value: Any) -> str:
    """A default as a properties file would spell it: ``true``, ``none``, ``9223372036854775807``."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and not value:
        return "(empty)"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`"


def _html(text: str) -> str:
    """Escaped text with its ``code`` spans as ``<code>``."""
    parts = html.escape(text, quote=False).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def _description(model: type[BaseModel], field_name: str) -> str:
    field = model.model_fields[field_name]
    text = (field.description or "").strip()
    if not text:
        raise ValueError(f"{model.__name__}.{field_name} has no description: give it "
                         "Field(..., description=...) in platform/config.py")
    name = dotted_name(model, field_name)
    for prefix in (f"{name}: ", f"{name}. "):  # the name is in the first column already
        if text.startswith(prefix):
            text = text[len(prefix):]
    return text


def client_source(field_name: str) -> str:
    """Where a client setting comes from besides flags and a ``--command-config`` file: its ``LAKELOG_*``
    environment variables (none for some) and its Spark option."""
    model = client_settings.ClientSettings
    name = dotted_name(model, field_name)
    choices = model.model_fields[field_name].validation_alias.choices  # type: ignore[union-attr]
    env = [f"`{c}`" for c in choices if isinstance(c, str) and c.startswith("LAKELOG_")]
    spark_names = {kafka: option for option, kafka in client_settings.SPARK_OPTION_NAMES.items()}
    if name == "bootstrap.servers":
        spark = " or ".join(f"`{o}`" for o in client_settings.SPARK_BOOTSTRAP_OPTIONS)
    else:
        spark = f"`{spark_names.get(name, 'lakelog.' + name)}`"
    return ", ".join(env + [f"Spark {spark}"])


def settings_rows(kind: SettingsKind) -> list[dict[str, str]]:
    """One row per field of ``BrokerSettings`` (``kind="broker"``), ``TopicConfig`` (``"topic"``) or
    ``ClientSettings`` (``"client"``): ``{"name", "source", "type", "default", "description"}``, in
    declaration order.

    Raises :class:`ValueError` for a field without a description."""
    model: type[BaseModel] = {"broker": lakelog_config.BrokerSettings, "topic": lakelog_config.TopicConfig,
                              "client": client_settings.ClientSettings}[kind]
    kafka_alias = {v: k for k, v in lakelog_config.KAFKA_SETTING_ALIASES.items()}
    rows = []
    for field_name, field in model.model_fields.items():
        name = dotted_name(model, field_name)
        if kind == "broker":
            source = f"`LAKELOG_{field_name.upper()}`"
            if name in kafka_alias:
                source += f", Kafka's `{kafka_alias[name]}`"
        elif kind == "client":
            source = client_source(field_name)
        else:
            synonym = lakelog_config.TOPIC_CONFIG_BROKER_SYNONYMS.get(name)
            source = f"default from broker `{synonym}`" if synonym else ""
        rows.append({"name": name, "source": source, "type": type_name(field.annotation),
                     "default": default_text(field.default), "description": _description(model, field_name)})
    return rows


def _breakable(text: str) -> str:
    """``text`` with a line-break opportunity after every dot and underscore (long dotted names)."""
    return text.replace(".", ".<wbr>").replace("_", "_<wbr>")


def settings_table(kind: SettingsKind) -> str:
    """The rows of :func:`settings_rows` as an HTML table inside ``<div class="lakelog-settings">`` (its
    style, ``docs/stylesheets/extra.css``, breaks names only after a dot or an underscore)."""
    lines = ['<div class="lakelog-settings" markdown="0"><table>',
             "<thead><tr><th>name</th><th>type</th><th>default</th><th>description</th></tr></thead>", "<tbody>"]
    for row in settings_rows(kind):
        anchor = f"{kind}-{row['name']}"
        name = f'<code id="{anchor}">{_breakable(html.escape(row["name"]))}</code>'
        if row["source"]:
            name += f"<br><small>{_breakable(_html(row['source']))}</small>"
        lines.append(f"<tr><td>{name}</td><td>{_html(row['type'])}</td><td>{_html(row['default'])}</td>"
                     f"<td>{_html(row['description'])}</td></tr>")
    lines += ["</tbody>", "</table></div>"]
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:  # noqa: ARG001 (MkDocs' signature)
    """MkDocs' page event: fill the configuration page's markers with the generated tables."""
    for marker, kind in MARKERS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, settings_table(kind))
    return markdown
