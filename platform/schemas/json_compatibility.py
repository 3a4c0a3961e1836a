"""JSON Schema compatibility: Confluent Schema Registry's rules (``JsonSchemaDiff`` / ``SchemaDiff`` of
``io.confluent.kafka.schemaregistry.json.diff``) over two parsed schemas.

A check compares an *original* schema (what data was written with) with an *update* (what reads it):
BACKWARD compares the latest version (original) with the new schema (update), FORWARD the other way round.
Every difference found has a Confluent difference type; the pair is compatible when each is one of the
compatible types. The rules kept (Confluent's names):

==========================================  ============================================================
compatible                                  incompatible
==========================================  ============================================================
``SCHEMA_REMOVED`` (update is ``{}``),      ``SCHEMA_ADDED`` (original ``{}``, update constrains),
``TYPE_EXTENDED`` (integer -> number, a     ``TYPE_NARROWED``, ``TYPE_CHANGED``
type added)
``ENUM_ARRAY_EXTENDED``                     ``ENUM_ARRAY_NARROWED`` / ``_CHANGED``
``MAX_*_INCREASED`` / ``_REMOVED``,         ``MAX_*_ADDED`` / ``_DECREASED``, ``MIN_*_ADDED`` /
``MIN_*_DECREASED`` / ``_REMOVED`` (length,  ``_INCREASED``, ``PATTERN_ADDED`` / ``_CHANGED``,
maximum, items, properties), ``PATTERN_     ``MULTIPLE_OF_ADDED`` / ``_CHANGED``
REMOVED``, ``MULTIPLE_OF_REMOVED`` /
``_REDUCED``
``REQUIRED_ATTRIBUTE_REMOVED``,             ``REQUIRED_ATTRIBUTE_ADDED``
``REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED``
``PROPERTY_REMOVED_FROM_OPEN_CONTENT_       ``PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL``,
MODEL``, ``PROPERTY_REMOVED_IS_COVERED_BY_  ``PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_
PARTIALLY_OPEN_CONTENT_MODEL``              MODEL``
``PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN  ``PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL``,
_CONTENT_MODEL``, ``OPTIONAL_PROPERTY_      ``REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL``,
ADDED_TO_UNOPEN_CONTENT_MODEL``, ``PROPERTY ``PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_
_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_        MODEL``
CONTENT_MODEL``
``ADDITIONAL_PROPERTIES_ADDED`` / ``_       ``ADDITIONAL_PROPERTIES_REMOVED`` / ``_NARROWED``,
EXTENDED``, ``UNIQUE_ITEMS_REMOVED``        ``UNIQUE_ITEMS_ADDED``
``SUM_TYPE_EXTENDED`` (a oneOf / anyOf      ``SUM_TYPE_NARROWED`` (an original branch that no update
branch added)                               branch reads), ``PRODUCT_TYPE_EXTENDED`` (an allOf branch
                                            added)
==========================================  ============================================================

An object's content model is *open* when ``additionalProperties`` is left out or true, *closed* when it is
false, *partially open* when it is a schema. As Confluent's, adding a property to an open content model
is incompatible (the original may have written anything under that name) unless its schema is ``{}``.
``$ref`` to the schema's own ``definitions`` / ``$defs`` is followed; a ``$ref`` elsewhere (a reference
to another subject) is compared by its text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

__all__ = ["json_schema_differences"]

_NUMERIC = {"integer", "number"}
#: (keyword, kind): "max" constraints may grow, "min" ones may shrink
_BOUNDS = (("maxLength", "max"), ("minLength", "min"), ("maximum", "max"), ("minimum", "min"),
           ("exclusiveMaximum", "max"), ("exclusiveMinimum", "min"), ("maxItems", "max"), ("minItems", "min"),
           ("maxProperties", "max"), ("minProperties", "min"))


def _types(schema: dict) -> set[str] | None:
    t = schema.get("type")
    if t is None:
        return None
    return {t} if isinstance(t, str) else set(t)


class _Diff:
    """One pair of root schemas walked (``$ref`` resolved against each one's root)."""

    def __init__(self, original: object, update: object) -> None:
        self.roots = (original, update)
        self.seen: set[tuple[int, int]] = set()

    def _resolve(self, schema: object, side: int) -> object:
        for _ in range(32):  # a chain of refs, bounded
            if not (isinstance(schema, dict) and isinstance(schema.get("$ref"), str)
                    and schema["$ref"].startswith("#")):
                return schema
            node: object = self.roots[side]
            for part in schema["$ref"].lstrip("#").strip("/").split("/"):
                if not part:
                    continue
                part = part.replace("~1", "/").replace("~0", "~")
                if not isinstance(node, dict) or part not in node:
                    return schema
                node = node[part]
            schema = node
        return schema

    def compare(self, original: object, update: object, path: str) -> Iterator[tuple[str, str, bool]]:
        """Yield ``(type, path, compatible)`` for each difference between ``original`` and ``update``."""
        original, update = self._resolve(original, 0), self._resolve(update, 1)
        key = (id(original), id(update))
        if key in self.seen:  # a recursive schema: the pair is being compared already
            return
        self.seen.add(key)
        o = {} if original is True else original
        u = {} if update is True else update
        if u is False:
            if o is not False:
                yield "SCHEMA_ADDED", path, False
            return
        if o is False:
            yield "SCHEMA_ADDED", path, True  # nothing was written with it: any reader reads it
            return
        if not isinstance(o, dict) or not isinstance(u, dict):
            return
        if o == u:
            return
        if not u:
            yield "SCHEMA_REMOVED", path, True
            return
        if "$ref" in o or "$ref" in u:  # a reference to another subject: by its text
            if o.get("$ref") != u.get("$ref"):
                yield "TYPE_CHANGED", f"{path}/$ref", False
            return
        yield from self._type(o, u, path)
        yield from self._enum(o, u, path)
        yield from self._bounds(o, u, path)
        yield from self._object(o, u, path)
        yield from self._array(o, u, path)
        yield from self._combined(o, u, path)

    def _type(self, o: dict, u: dict, path: str) -> Iterator[tuple[str, str, bool]]:
        ot, ut = _types(o), _types(u)
        if ot == ut or ut is None:
            if ot is not None and ut is None:
                yield "TYPE_EXTENDED", f"{path}/type", True
            return
        if ot is None:
            yield "TYPE_NARROWED", f"{path}/type", False
            return
        covered = {t for t in ot if t in ut or (t == "integer" and "number" in ut)}
        if covered == ot:
            yield "TYPE_EXTENDED", f"{path}/type", True
        elif covered or (ot & _NUMERIC and ut & _NUMERIC):
            yield "TYPE_NARROWED", f"{path}/type", False
        else:
            yield "TYPE_CHANGED", f"{path}/type", False

    def _enum(self, o: dict, u: dict, path: str) -> Iterator[tuple[str, str, bool]]:
        for keyword in ("enum", "const"):
            ov, uv = o.get(keyword), u.get(keyword)
            if ov == uv:
                continue
            if uv is None:
                yield "ENUM_ARRAY_EXTENDED", f"{path}/{keyword}", True
            elif ov is None:
                yield "ENUM_ARRAY_NARROWED", f"{path}/{keyword}", False
            else:
                ol = ov if keyword == "enum" else [ov]
                ul = uv if keyword == "enum" else [uv]
                if all(x in ul for x in ol):
                    yield "ENUM_ARRAY_EXTENDED", f"{path}/{keyword}", True
                elif any(x in ul for x in ol):
                    yield "ENUM_ARRAY_NARROWED", f"{path}/{keyword}", False
                else:
                    yield "ENUM_ARRAY_CHANGED", f"{path}/{keyword}", False

    def _bounds(self, o: dict, u: dict, path: str) -> Iterator[tuple[str, str, bool]]:
        for keyword, kind in _BOUNDS:
            ov, uv = o.get(keyword), u.get(keyword)
            if ov == uv or isinstance(ov, bool) or isinstance(uv, bool):  # draft 4's boolean exclusive*: skipped
                continue
            name = "_".join(_words(keyword)).upper()
            if uv is None:
                yield f"{name}_REMOVED", f"{path}/{keyword}", True
            elif ov is None:
                yield f"{name}_ADDED", f"{path}/{keyword}", False
            elif (uv > ov) == (kind == "max"):
                yield f"{name}_{'INCREASED' if kind == 'max' else 'DECREASED'}", f"{path}/{keyword}", True
            else:
                yield f"{name}_{'DECREASED' if kind == 'max' else 'INCREASED'}", f"{path}/{keyword}", False
        op, up = o.get("pattern"), u.get("pattern")
        if op != up:
            yield ("PATTERN_REMOVED", f"{path}/pattern", True) if up is None else (
                ("PATTERN_ADDED" if op is None else "PATTERN_CHANGED"), f"{path}/pattern", False)
        om, um = o.get("multipleOf"), u.get("multipleOf")
        if om != um:
            if um is None:
                yield "MULTIPLE_OF_REMOVED", f"{path}/multipleOf", True
            elif om is None:
                yield "MULTIPLE_OF_ADDED", f"{path}/multipleOf", False
            elif om % um == 0:
                yield "MULTIPLE_OF_REDUCED", f"{path}/multipleOf", True
            else:
                yield "MULTIPLE_OF_CHANGED", f"{path}/multipleOf", False

    def _object(self, o: dict, u: dict, path: str) -> Iterator[tuple[str, str, bool]]:
        op, up = o.get("properties") or {}, u.get("properties") or {}
        oa, ua = o.get("additionalProperties", True), u.get("additionalProperties", True)
        orq, urq = set(o.get("required") or ()), set(u.get("required") or ())
        for name in sorted(op.keys() | up.keys()):
            where = f"{path}/properties/{name}"
            if name in op and name in up:
                yield from self.compare(op[name], up[name], where)
            elif name in op:  # removed: the update's content model reads it, or not
                if ua is True or ua == {}:
                    yield "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL", where, True
                elif ua is False:
                    yield "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", where, False
                elif all(ok for _, _, ok in self.compare(op[name], ua, where)):
                    yield "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where, True
                else:
                    yield "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where, False
            else:  # added: what the original may have written under that name
                schema = up[name]
                if oa is True or oa == {}:
                    if schema is True or schema == {}:
                        yield "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", where, True
                    else:
                        yield "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", where, False
                elif oa is False:
                    if name in urq and not (isinstance(schema, dict) and "default" in schema):
                        yield "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", where, False
                    else:
                        yield "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", where, True
                elif all(ok for _, _, ok in self.compare(oa, schema, where)):
                    yield "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where, True
                else:
                    yield "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where, False
        for name in sorted(urq - orq):
            schema = up.get(name)
            if isinstance(schema, dict) and "default" in schema:
                yield "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED", f"{path}/required/{name}", True
            elif name in op or not (oa is False):  # an added property closed over is reported above
                yield "REQUIRED_ATTRIBUTE_ADDED", f"{path}/required/{name}", False
        for name in sorted(orq - urq):
            yield "REQUIRED_ATTRIBUTE_REMOVED", f"{path}/required/{name}", True
        if oa != ua:
            where = f"{path}/additionalProperties"
            if oa is False:
                yield "ADDITIONAL_PROPERTIES_ADDED", where, True
            elif ua is False:
                yield "ADDITIONAL_PROPERTIES_REMOVED", where, False
            elif all(ok for _, _, ok in self.compare(oa, ua, where)):
                yield "ADDITIONAL_PROPERTIES_EXTENDED", where, True
            else:
                yield "ADDITIONAL_PROPERTIES_NARROWED", where, False

    def _array(self, o: dict, u: dict, path: str) -> Iterator[tuple[str, str, bool]]:
        oi, ui = o.get("items"), u.get("items")
        if oi != ui:
            if isinstance(oi, list) or isinstance(ui, list):  # tuples: position by position
                ol = oi if isinstance(oi, list) else []
                ul = ui if isinstance(ui, list) else []
                for i in range(max(len(ol), len(ul))):
                    yield from self.compare(ol[i] if i < len(ol) else True, ul[i] if i < len(ul) else True,
                                            f"{path}/items/{i}")
            else:
                yield from self.compare(True if oi is None else oi, True if ui is None else ui, f"{path}/items")
        ou, uu = bool(o.get("uniqueItems")), bool(u.get("uniqueItems"))
        if ou != uu:
            yield ("UNIQUE_ITEMS_ADDED", f"{path}/uniqueItems", False) if uu else (
                "UNIQUE_ITEMS_REMOVED", f"{path}/uniqueItems", True)

    def _reads(self, original: object, update: object, path: str) -> bool:
        return all(ok for _, _, ok in _Diff(self.roots[0], self.roots[1]).compare(original, update, path))

    def _combined(self, o: dict, u: dict, path: str) -> Iterator[tuple[str, str, bool]]:
        for keyword in ("oneOf", "anyOf", "allOf"):
            ob, ub = o.get(keyword), u.get(keyword)
            if ob == ub:
                continue
            where = f"{path}/{keyword}"
            if ub is None:  # the update reads every original branch, or (allOf) checks less
                rest = {k: v for k, v in u.items() if k != keyword}
                if keyword == "allOf" or all(self._reads(b, rest, where) for b in ob):
                    yield ("PRODUCT_TYPE_NARROWED" if keyword == "allOf" else "SUM_TYPE_EXTENDED"), where, True
                else:
                    yield "SUM_TYPE_NARROWED", where, False
                continue
            if ob is None:  # the original is one branch of the update's sum, or a product grew
                rest = {k: v for k, v in o.items() if k != keyword}
                if keyword != "allOf" and any(self._reads(rest, b, where) for b in ub):
                    yield "SUM_TYPE_EXTENDED", where, True
                else:
                    yield ("PRODUCT_TYPE_EXTENDED" if keyword == "allOf" else "SUM_TYPE_NARROWED"), where, False
                continue
            if keyword == "allOf":  # every update branch must hold for what the original wrote
                for i, branch in enumerate(ub):
                    if not any(self._reads(b, branch, f"{where}/{i}") for b in ob):
                        yield "PRODUCT_TYPE_EXTENDED", f"{where}/{i}", False
                continue
            for i, branch in enumerate(ob):  # every original branch must be read by one update branch
                if not any(self._reads(branch, b, f"{where}/{i}") for b in ub):
                    yield "SUM_TYPE_NARROWED", f"{where}/{i}", False
            if len(ub) > len(ob):
                yield "SUM_TYPE_EXTENDED", where, True


def _words(keyword: str) -> list[str]:
    out, word = [], ""
    for ch in keyword:
        if ch.isupper() and word:
            out.append(word)
            word = ""
        word += ch
    return out + [word]


def json_schema_differences(original: str, update: str) -> list[tuple[str, str, bool]]:
    """The differences from ``original`` to ``update`` (both JSON Schema texts that parsed), Confluent's way.

    Returns:
        ``(difference type, JSON pointer where, compatible)`` for each difference, in schema order; the
        update reads what the original wrote when every ``compatible`` is True.
    """
    o, u = json.loads(original), json.loads(update)
    return list(_Diff(o, u).compare(o, u, "#"))
