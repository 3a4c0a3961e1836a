"""The schema registry (Confluent Schema Registry's model): subjects, versions, schema ids, compatibility.

- :mod:`~lakelog.schemas.schema_types`: the schema types (Avro, JSON Schema, Protobuf), each parsed by its
  library, and the string a schema is kept as;
- :mod:`~lakelog.schemas.compatibility`: the compatibility levels and the check a new version passes;
- :mod:`~lakelog.schemas.registry_state`: the records of ``_schemas`` and the view every broker folds them into;
- :mod:`~lakelog.schemas.registry_writes`: the writes decided (pure): records and answers;
- :mod:`~lakelog.schemas.registry`: one broker's registry: it follows ``_schemas`` and writes through the
  leader of ``_schemas-0``.

Layer 3, beside the coordinators (it reaches the replicas through their
:class:`~lakelog.coordinators.partition_writer.PartitionWriter` and the replica manager's fetch); the
requests are :mod:`lakelog.requests.schemas`, the routes :mod:`lakelog.ingest_api.schema_registry_api`.
"""
