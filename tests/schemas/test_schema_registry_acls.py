"""The schema registry's operations authorize their caller with lakelog's ACLs (real ACLs in ZooKeeper, a
broker in this process driven through its request layer): a ``{topic}-value`` subject on its topic, any
other subject and the global config on the cluster."""

from __future__ import annotations

import json

import pytest

from lakelog.requests import RequestContext, RequestHandler
from lakelog.security.acls import AclBinding, Operation, ResourceType
from lakelog.security.errors import AuthorizationError
from tests.requests.test_operations import run_with_requests, wait_until

SCHEMA = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})


def test_registry_operations_authorize_by_topic_or_cluster(zk_connect, tmp_path, topic_name):
    alice = RequestContext(principal="User:alice", host="10.0.0.1", client_id="app", listener="http")
    nobody = RequestContext(principal="User:nobody", host="10.0.0.1", client_id="app", listener="http")
    subject = f"{topic_name}-value"

    async def scenario(requests: RequestHandler) -> None:
        admin = requests.broker_context  # the brokers' own principal: a super user
        await requests.acls.create_acls(
            [AclBinding.of(resource_type="Topic", name=topic_name, principal="User:alice", operation="Write")],
            context=admin)
        await wait_until(lambda: requests.permissions(alice).allows(Operation.WRITE, ResourceType.TOPIC, topic_name))
        schemas = requests.schemas

        refused = {
            "register": lambda: schemas.register(subject, {"schema": SCHEMA}, context=nobody),
            "register another subject": lambda: schemas.register("orders-by-region", {"schema": SCHEMA},
                                                                 context=alice),
            "global config": lambda: schemas.set_config(None, {"compatibility": "NONE"}, context=alice),
        }
        for what, call in refused.items():
            with pytest.raises(AuthorizationError, match="is not authorized") as denied:
                await call()
            assert denied.value.to_body()["error_code"] == 40301, what
        assert schemas.list_subjects(context=alice) == []  # nothing was registered

        schema_id = (await schemas.register(subject, {"schema": SCHEMA}, context=alice))["id"]
        assert schemas.version(subject, "latest", context=alice).schema_id == schema_id  # Write implies Describe
        with pytest.raises(AuthorizationError):
            schemas.list_versions(subject, context=nobody)
        assert schemas.list_subjects(context=alice) == [subject]
        assert schemas.list_subjects(context=nobody) == []  # listed only to who may read it
        assert schemas.subjects_of_id(schema_id, context=nobody) == []
        # a consumer that knows only a record's schema id reads the schema
        assert json.loads(schemas.schema_by_id(schema_id, context=nobody)["schema"]) == json.loads(SCHEMA)
        assert (await schemas.register(subject, {"schema": SCHEMA}, context=admin))["id"] == schema_id

    run_with_requests(zk_connect, tmp_path / "logs", scenario, authentication_methods="basic",
                      inter_broker_password="inter-broker-s3cret", authorizer_enabled=True)
