"""Users' SCRAM-SHA-512 credentials (a lakelog route; Kafka's ``kafka-configs --entity-type users`` and
AlterUserScramCredentials, KIP-554):

- ``GET /lakelog/v1/users``: ``{"users": [name, ...]}`` (never a credential);
- ``PUT /lakelog/v1/users/{name}`` ``{"password": str, "iterations": 4096}``: set the user's password
  (a new salt each time), 204;
- ``DELETE /lakelog/v1/users/{name}``: 204; 404 / 40412 when there is no such user.

Credentials are kept in ZooKeeper (:class:`~lakelog.security.user_credentials.UserCredentials`); passwords
are never stored nor logged. With ``authorizer.enabled``, listing needs ``Describe`` and changing ``Alter``
on the Cluster (403 / 40301). The brokers' own user (``inter.broker.username``) cannot be changed here
(400 / 40022): its password is the brokers' ``inter.broker.password``. Errors: 400 / 40022 (an empty name or password, iterations outside 4096-16384).
"""

from __future__ import annotations


from fastapi import APIRouter, Path, Response
from pydantic import BaseModel, Field

from lakelog.ingest_api.deps import BrokerDep, ContextDep
from lakelog.ingest_api.permissions import require_cluster_alter, require_cluster_describe
from lakelog.ingest_api.openapi_docs import v3_read_errors

router = APIRouter(tags=["security"])

USER_ERRORS = v3_read_errors("user (40412)")


class UserPassword(BaseModel):
    """A user's new password."""

    password: str = Field(min_length=1, description="The password (sent once, stored only as a SCRAM credential).")
    iterations: int = Field(4096, ge=4096, le=16384, description="PBKDF2 iterations. Default: 4096 (Kafka's).")


class UserList(BaseModel):
    """The users that have a credential."""

    users: list[str]


@router.get("/lakelog/v1/users", response_model=UserList, responses=USER_ERRORS, summary="List users",
            dependencies=[require_cluster_describe])
async def list_users(broker: BrokerDep, context: ContextDep) -> UserList:
    """Every user with a SCRAM-SHA-512 credential, sorted."""
    return UserList(users=await broker.requests.users.list_users(context=context))


@router.put("/lakelog/v1/users/{name}", status_code=204, response_class=Response, responses=USER_ERRORS,
            summary="Set a user's password", dependencies=[require_cluster_alter])
async def upsert_user(body: UserPassword, broker: BrokerDep, context: ContextDep,
                      name: str = Path(min_length=1, description="User name (the principal is User:name)")) -> Response:
    """Create the user or replace their credential (not the brokers' own user)."""
    await broker.requests.users.upsert_user(name, password=body.password, iterations=body.iterations,
                                            context=context)
    return Response(status_code=204)


@router.delete("/lakelog/v1/users/{name}", status_code=204, response_class=Response, responses=USER_ERRORS,
               summary="Delete a user", dependencies=[require_cluster_alter])
async def delete_user(broker: BrokerDep, context: ContextDep, name: str = Path(min_length=1)) -> Response:
    """Remove the user's credential (not the brokers' own user)."""
    await broker.requests.users.delete_user(name, context=context)
    return Response(status_code=204)
