"""Confluent Schema Registry's REST API, served by every broker at the root of its gateway.

``confluent_kafka.schema_registry.SchemaRegistryClient({"url": "http://broker:8082"})`` (and Confluent's
serializers) work against it unchanged. The routes parse and encode; the operations, authorization
included, are :class:`~lakelog.requests.schemas.SchemaRegistryOperations`:

- ``GET /schemas/types``; ``GET /schemas/ids/{id}`` (``/schema``, ``/subjects``, ``/versions``);
- ``GET /subjects``; ``POST /subjects/{s}`` (lookup); ``DELETE /subjects/{s}[?permanent=true]``;
- ``GET /subjects/{s}/versions``; ``POST /subjects/{s}/versions`` (register);
  ``GET /subjects/{s}/versions/{v|latest}`` (``/schema``, ``/referencedby``);
  ``DELETE /subjects/{s}/versions/{v}[?permanent=true]``;
- ``POST /compatibility/subjects/{s}/versions[/{v}]``;
- ``GET``/``PUT``/``DELETE /config`` and ``/config/{s}``; ``GET``/``PUT /mode``, ``GET``/``PUT``/``DELETE
  /mode/{s}``.

Answers are ``application/vnd.schemaregistry.v1+json``; bodies are taken as that or ``application/json``.
Errors are Confluent's ``{"error_code": 40401, "message": ...}`` with the registry's own codes
(:mod:`lakelog.errors.schemas`).

:data:`internal_router` is the brokers' own: ``POST /lakelog/v1/coordinator/schemas/writes`` carries a
write forwarded to the registry's writer, the leader of ``_schemas-0`` (ClusterAction; hidden from the
OpenAPI document).
"""

from __future__ import annotations

from typing import Annotated, Any, Optional

from fastapi import APIRouter, Path, Query
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from lakelog.ingest_api.deps import BrokerDep, ContextDep
from lakelog.ingest_api.openapi_docs import ERROR_DESCRIPTIONS
from lakelog.ingest_api.permissions import require_cluster_action
from lakelog.replication.leader_client import COORDINATOR_PREFIX

#: Confluent Schema Registry's media type (answers; bodies may also be ``application/json``).
SCHEMA_REGISTRY_V1_JSON = "application/vnd.schemaregistry.v1+json"


class SchemaRegistryResponse(JSONResponse):
    """A JSON answer as Confluent's registry sends it."""

    media_type = SCHEMA_REGISTRY_V1_JSON


#: The error answers of the registry's routes (``application/json``, Confluent's body), for the OpenAPI document.
_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"description": description,
             "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}}
    for status, description in {
        400: ERROR_DESCRIPTIONS[400],
        404: "Not found (Confluent Schema Registry's codes): subject (40401), version (40402), schema (40403), "
             "subject or version soft-deleted already (40404, 40406) or not soft-deleted before a permanent "
             "delete (40405, 40407), no subject-level config or mode (40408, 40409); or no such route.",
        408: ERROR_DESCRIPTIONS[408],
        409: "Conflict: the schema is incompatible with the subject's versions (40901).",
        422: "Unprocessable: invalid schema or reference (42201), version (42202), compatibility level (42203), "
             "mode (42204), a write the mode refuses (42205), a version still referenced (42206), an invalid "
             "subject (42208); or a body field that fails validation (42222).",
        500: "The registry's store (50001), a view that did not catch up in time (50002), a write not forwarded "
             "to the writer (50003), all retriable; an internal error (50001).",
        503: ERROR_DESCRIPTIONS[503],
    }.items()}

router = APIRouter(tags=["schema registry"], default_response_class=SchemaRegistryResponse, responses=_ERRORS)
internal_router = APIRouter(prefix=COORDINATOR_PREFIX, tags=["schema registry (internal)"], include_in_schema=False,
                            dependencies=[require_cluster_action])

Subject = Annotated[str, Path(description="The subject (Confluent's TopicNameStrategy: `{topic}-key`, "
                                          "`{topic}-value`).")]
Version = Annotated[str, Path(description="A version (>= 1), or `latest` (`-1`).")]
SchemaId = Annotated[int, Path(description="A schema id (unique across the cluster).")]
Deleted = Annotated[bool, Query(description="Also soft-deleted subjects or versions.")]


class Reference(BaseModel):
    """A named type the schema uses from another subject's version."""

    name: str
    subject: str
    version: int


class SchemaBody(BaseModel):
    """A schema to register, look up or check (Confluent's ``RegisterSchemaRequest``; ``metadata`` and
    ``ruleSet`` are accepted and not kept)."""

    model_config = ConfigDict(extra="allow")

    schema_: str = Field(alias="schema", description="The schema's text (Avro and JSON Schema: JSON).")
    schemaType: Optional[str] = Field(None, description="AVRO (default), JSON or PROTOBUF.")
    references: list[Reference] = Field(default_factory=list)
    id: Optional[int] = Field(None, description="The id to register under (IMPORT mode only).")
    version: Optional[int] = Field(None, description="The version to register as (IMPORT mode only).")

    def command(self) -> dict:
        return {"schema": self.schema_, "schemaType": self.schemaType,
                "references": [r.model_dump() for r in self.references], "id": self.id, "version": self.version}


class ConfigBody(BaseModel):
    """``{"compatibility": level}``."""

    model_config = ConfigDict(extra="allow")

    compatibility: Optional[str] = Field(None, description="NONE, BACKWARD, FORWARD, FULL or a _TRANSITIVE form.")


class ModeBody(BaseModel):
    """``{"mode": mode}``."""

    mode: str = Field(description="READWRITE, READONLY or IMPORT.")


def _text(schema: str) -> Response:
    return Response(schema, media_type=SCHEMA_REGISTRY_V1_JSON)


# -- schemas by id ----------------------------------------------------------------------------------------

@router.get("/schemas/types", summary="The schema types the registry takes")
async def schema_types(broker: BrokerDep) -> list[str]:
    return broker.requests.schemas.schema_types()


@router.get("/schemas/ids/{id}", summary="A schema by its id")
async def schema_by_id(id: SchemaId, broker: BrokerDep, context: ContextDep) -> dict:
    return broker.requests.schemas.schema_by_id(id, context=context)


@router.get("/schemas/ids/{id}/schema", summary="A schema by its id, as it is")
async def schema_text(id: SchemaId, broker: BrokerDep, context: ContextDep) -> Response:
    return _text(broker.requests.schemas.schema_text(id, context=context))


@router.get("/schemas/ids/{id}/subjects", summary="The subjects with a version of this schema")
async def subjects_of_id(id: SchemaId, broker: BrokerDep, context: ContextDep, deleted: Deleted = False) -> list[str]:
    return broker.requests.schemas.subjects_of_id(id, deleted=deleted, context=context)


@router.get("/schemas/ids/{id}/versions", summary="The subject-version pairs of this schema")
async def versions_of_id(id: SchemaId, broker: BrokerDep, context: ContextDep, deleted: Deleted = False) -> list[dict]:
    return broker.requests.schemas.versions_of_id(id, deleted=deleted, context=context)


# -- subjects -------------------------------------------------------------------------------------------

@router.get("/subjects", summary="The subjects")
async def list_subjects(broker: BrokerDep, context: ContextDep, deleted: Deleted = False,
                        deleted_only: Annotated[bool, Query()] = False,
                        subjectPrefix: Annotated[str, Query()] = "") -> list[str]:
    return broker.requests.schemas.list_subjects(prefix=subjectPrefix, deleted=deleted, deleted_only=deleted_only,
                                                 context=context)


@router.get("/subjects/{subject:path}/versions", summary="The subject's versions")
async def list_versions(subject: Subject, broker: BrokerDep, context: ContextDep, deleted: Deleted = False,
                        deleted_only: Annotated[bool, Query()] = False) -> list[int]:
    return broker.requests.schemas.list_versions(subject, deleted=deleted, deleted_only=deleted_only, context=context)


@router.post("/subjects/{subject:path}/versions", summary="Register a schema under a subject")
async def register(subject: Subject, body: SchemaBody, broker: BrokerDep, context: ContextDep,
                   normalize: Annotated[bool, Query()] = False) -> dict:
    return await broker.requests.schemas.register(subject, body.command(), context=context)


@router.get("/subjects/{subject:path}/versions/{version}", summary="A version of a subject")
async def get_version(subject: Subject, version: Version, broker: BrokerDep, context: ContextDep,
                      deleted: Deleted = False) -> dict:
    return broker.requests.schemas.version(subject, version, deleted=deleted, context=context).to_dict()


@router.get("/subjects/{subject:path}/versions/{version}/schema", summary="A version's schema, as it is")
async def get_version_schema(subject: Subject, version: Version, broker: BrokerDep, context: ContextDep,
                             deleted: Deleted = False) -> Response:
    return _text(broker.requests.schemas.version(subject, version, deleted=deleted, context=context).schema)


@router.get("/subjects/{subject:path}/versions/{version}/referencedby", summary="Ids of the schemas referencing it")
async def referenced_by(subject: Subject, version: Version, broker: BrokerDep, context: ContextDep) -> list[int]:
    return broker.requests.schemas.referenced_by(subject, version, context=context)


@router.delete("/subjects/{subject:path}/versions/{version}",
               summary="Delete a version (soft, or permanently after a soft delete)")
async def delete_version(subject: Subject, version: Version, broker: BrokerDep, context: ContextDep,
                         permanent: Annotated[bool, Query()] = False) -> int:
    return await broker.requests.schemas.delete_version(subject, version, permanent=permanent, context=context)


# -- compatibility ---------------------------------------------------------------------------------------

# the bare subject routes after the ones with a suffix: a subject may hold '/' (a .proto import path)
@router.post("/subjects/{subject:path}", summary="The subject's version holding this schema (lookup)")
async def lookup(subject: Subject, body: SchemaBody, broker: BrokerDep, context: ContextDep,
                 deleted: Deleted = False, normalize: Annotated[bool, Query()] = False) -> dict:
    return (await broker.requests.schemas.lookup(subject, body.command(), deleted=deleted, context=context)).to_dict()


@router.delete("/subjects/{subject:path}", summary="Delete a subject (soft, or permanently after a soft delete)")
async def delete_subject(subject: Subject, broker: BrokerDep, context: ContextDep,
                         permanent: Annotated[bool, Query()] = False) -> list[int]:
    return await broker.requests.schemas.delete_subject(subject, permanent=permanent, context=context)


@router.post("/compatibility/subjects/{subject:path}/versions/{version}",
             summary="Whether a schema may follow a version of the subject")
async def compatibility_with_version(subject: Subject, version: Version, body: SchemaBody, broker: BrokerDep,
                                     context: ContextDep, verbose: Annotated[bool, Query()] = False,
                                     normalize: Annotated[bool, Query()] = False) -> dict:
    return await broker.requests.schemas.check_compatibility(subject, version, body.command(), verbose=verbose,
                                                             context=context)


@router.post("/compatibility/subjects/{subject:path}/versions",
             summary="Whether a schema may follow the subject's versions (as its level checks them)")
async def compatibility_with_versions(subject: Subject, body: SchemaBody, broker: BrokerDep, context: ContextDep,
                                      verbose: Annotated[bool, Query()] = False,
                                      normalize: Annotated[bool, Query()] = False) -> dict:
    return await broker.requests.schemas.check_compatibility(subject, None, body.command(), verbose=verbose,
                                                             context=context)


# -- config and mode ----------------------------------------------------------------------------------------

@router.get("/config", summary="The global compatibility level")
async def get_config(broker: BrokerDep, context: ContextDep) -> dict:
    return broker.requests.schemas.config(None, context=context)


@router.put("/config", summary="Set the global compatibility level")
async def put_config(body: ConfigBody, broker: BrokerDep, context: ContextDep) -> dict:
    return await broker.requests.schemas.set_config(None, body.model_dump(), context=context)


@router.delete("/config", summary="Reset the global compatibility level (BACKWARD)")
async def delete_config(broker: BrokerDep, context: ContextDep) -> dict:
    return await broker.requests.schemas.delete_config(None, context=context)


@router.get("/config/{subject:path}", summary="A subject's compatibility level")
async def get_subject_config(subject: Subject, broker: BrokerDep, context: ContextDep,
                             defaultToGlobal: Annotated[bool, Query()] = False) -> dict:
    return broker.requests.schemas.config(subject, default_to_global=defaultToGlobal, context=context)


@router.put("/config/{subject:path}", summary="Set a subject's compatibility level")
async def put_subject_config(subject: Subject, body: ConfigBody, broker: BrokerDep, context: ContextDep) -> dict:
    return await broker.requests.schemas.set_config(subject, body.model_dump(), context=context)


@router.delete("/config/{subject:path}", summary="Remove a subject's compatibility level (the global one applies)")
async def delete_subject_config(subject: Subject, broker: BrokerDep, context: ContextDep) -> dict:
    return await broker.requests.schemas.delete_config(subject, context=context)


@router.get("/mode", summary="The registry's mode")
async def get_mode(broker: BrokerDep, context: ContextDep) -> dict:
    return broker.requests.schemas.mode(None, context=context)


@router.put("/mode", summary="Set the registry's mode")
async def put_mode(body: ModeBody, broker: BrokerDep, context: ContextDep,
                   force: Annotated[bool, Query()] = False) -> dict:
    return await broker.requests.schemas.set_mode(None, body.model_dump(), force=force, context=context)


@router.get("/mode/{subject:path}", summary="A subject's mode")
async def get_subject_mode(subject: Subject, broker: BrokerDep, context: ContextDep,
                           defaultToGlobal: Annotated[bool, Query()] = False) -> dict:
    return broker.requests.schemas.mode(subject, default_to_global=defaultToGlobal, context=context)


@router.put("/mode/{subject:path}", summary="Set a subject's mode")
async def put_subject_mode(subject: Subject, body: ModeBody, broker: BrokerDep, context: ContextDep,
                           force: Annotated[bool, Query()] = False) -> dict:
    return await broker.requests.schemas.set_mode(subject, body.model_dump(), force=force, context=context)


@router.delete("/mode/{subject:path}", summary="Remove a subject's mode (the global one applies)")
async def delete_subject_mode(subject: Subject, broker: BrokerDep, context: ContextDep) -> dict:
    return await broker.requests.schemas.delete_mode(subject, context=context)


# -- the brokers' own ----------------------------------------------------------------------------------------

@internal_router.post("/schemas/writes")
async def forwarded_write(command: dict[str, Any], broker: BrokerDep) -> dict:
    """A write forwarded to the registry's writer: ``{"result", "offset"}`` (503 / 50320 when this broker no
    longer leads ``_schemas-0``: the sender retries)."""
    result, offset = await broker.requests.schemas.registry.write_local(command)
    return {"result": result, "offset": offset}
