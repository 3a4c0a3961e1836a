"""``lakelog acls``: add, list and remove ACLs, with the flags of Kafka's ``kafka-acls.sh``.

::

    lakelog acls add --allow-principal User:alice --operation Read --operation Describe --topic orders
    lakelog acls add --allow-principal User:etl --operation All --topic team-a. --resource-pattern-type prefixed
    lakelog acls add --deny-principal User:mallory --deny-host 10.0.0.9 --operation Read --topic '*'
    lakelog acls list [--topic orders --resource-pattern-type match] [--principal User:alice]
    lakelog acls remove --allow-principal User:alice --operation Read --topic orders [--force]
    lakelog acls remove --topic orders --force         # every ACL of the topic

Each ``add`` stores every combination of its principals, hosts, operations and resources (all or none);
``remove`` removes the ACLs that match what it names (only a resource: all of that resource's ACLs),
after a confirmation unless ``--force``. The gateway keeps them in ZooKeeper (``/v3/clusters/{c}/acls``).
"""

from __future__ import annotations

from itertools import product
from typing import Annotated, Optional

import typer
from rich.table import Table

from lakelog.cli.common import DEFAULT_BOOTSTRAP, BootstrapOpt, console, fail, gateway_client

acls_app = typer.Typer(help="ACLs (kafka-acls.sh): who may do what on which topic, group, transactional id "
                            "or the cluster.", no_args_is_help=True)

ListOpt = Optional[list[str]]
AllowPrincipal = Annotated[ListOpt, typer.Option("--allow-principal", help="User:name (User:* for everyone) "
                                                 "to allow; repeat for several.")]
DenyPrincipal = Annotated[ListOpt, typer.Option("--deny-principal", help="User:name to deny; repeat for several.")]
AllowHost = Annotated[ListOpt, typer.Option("--allow-host", help="Host (IP) the allowing ACLs apply to. Default: *.")]
DenyHost = Annotated[ListOpt, typer.Option("--deny-host", help="Host (IP) the denying ACLs apply to. Default: *.")]
Operations = Annotated[ListOpt, typer.Option("--operation", help="All, Read, Write, Create, Delete, Alter, Describe, "
                                             "ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite; "
                                             "repeat for several. Default: All.")]
Topics = Annotated[ListOpt, typer.Option("--topic", help="Topic (or prefix, or *); repeat for several.")]
Groups = Annotated[ListOpt, typer.Option("--group", help="Consumer group (or prefix, or *); repeat for several.")]
TransactionalIds = Annotated[ListOpt, typer.Option("--transactional-id", help="Transactional id (or prefix, or *).")]
Cluster = Annotated[bool, typer.Option("--cluster", help="The cluster resource (kafka-cluster).")]
PatternTypeOpt = Annotated[str, typer.Option("--resource-pattern-type",
                                             help="literal or prefixed (add); also any or match (list, remove).")]


def _resources(topics: ListOpt, groups: ListOpt, transactional_ids: ListOpt, cluster: bool) -> list[tuple[str, str]]:
    """``[(resource_type, name)]`` of the resource flags."""
    out = [("TOPIC", t) for t in topics or []] + [("GROUP", g) for g in groups or []]
    out += [("TRANSACTIONAL_ID", x) for x in transactional_ids or []]
    if cluster:
        out.append(("CLUSTER", "kafka-cluster"))
    return out


def _entries(allow_principal: ListOpt, deny_principal: ListOpt, allow_host: ListOpt,
             deny_host: ListOpt) -> list[tuple[str, str, str]]:
    """``[(permission, principal, host)]`` of the principal and host flags."""
    allow = [("ALLOW", p, h) for p, h in product(allow_principal or [], allow_host or ["*"])]
    return allow + [("DENY", p, h) for p, h in product(deny_principal or [], deny_host or ["*"])]


def _print(acls: list[dict]) -> None:
    table = Table("RESOURCE-TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION")
    for a in acls:
        table.add_row(a["resource_type"], a["resource_name"], a["pattern_type"], a["principal"], a["host"],
                      a["operation"], a["permission"])
    console.print(table)


@acls_app.command("add")
def acls_add(allow_principal: AllowPrincipal = None, deny_principal: DenyPrincipal = None,
             allow_host: AllowHost = None, deny_host: DenyHost = None, operation: Operations = None,
             topic: Topics = None, group: Groups = None, transactional_id: TransactionalIds = None,
             cluster: Cluster = False, resource_pattern_type: PatternTypeOpt = "literal",
             bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP) -> None:
    """Add ACLs: every principal x host x operation x resource given (kafka-acls.sh --add)."""
    resources = _resources(topic, group, transactional_id, cluster)
    entries = _entries(allow_principal, deny_principal, allow_host, deny_host)
    if not resources:
        fail("name a resource: --topic, --group, --transactional-id or --cluster")
    if not entries:
        fail("name a principal: --allow-principal or --deny-principal (e.g. User:alice)")
    if resource_pattern_type.lower() not in ("literal", "prefixed"):
        fail(f"--resource-pattern-type {resource_pattern_type!r}: use literal or prefixed to add ACLs")
    acls = [{"resource_type": rt, "resource_name": name, "pattern_type": resource_pattern_type.upper(),
             "principal": principal, "host": host, "operation": op, "permission": permission}
            for (rt, name), (permission, principal, host), op in product(resources, entries, operation or ["All"])]
    with gateway_client(bootstrap_server) as client:
        client.security.create_acls(acls)
    console.print(f"Added {len(acls)} ACL{'s' if len(acls) != 1 else ''}:")
    _print(acls)


@acls_app.command("list")
def acls_list(topic: Topics = None, group: Groups = None, transactional_id: TransactionalIds = None,
              cluster: Cluster = False,
              principal: Annotated[Optional[str], typer.Option(help="Only this principal's ACLs.")] = None,
              resource_pattern_type: PatternTypeOpt = "any",
              bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP) -> None:
    """List ACLs, all or those of the resources named (kafka-acls.sh --list); with --resource-pattern-type
    match, every ACL that applies to the named resource (its literal name, *, and the prefixes of its name)."""
    resources = _resources(topic, group, transactional_id, cluster) or [("ANY", None)]
    found: list[dict] = []
    with gateway_client(bootstrap_server) as client:
        for rt, name in resources:
            found += client.security.list_acls(resource_type=rt, resource_name=name, pattern_type=resource_pattern_type,
                                      principal=principal)
    _print(found)


@acls_app.command("remove")
def acls_remove(allow_principal: AllowPrincipal = None, deny_principal: DenyPrincipal = None,
                allow_host: AllowHost = None, deny_host: DenyHost = None, operation: Operations = None,
                topic: Topics = None, group: Groups = None, transactional_id: TransactionalIds = None,
                cluster: Cluster = False, resource_pattern_type: PatternTypeOpt = "literal",
                force: Annotated[bool, typer.Option("--force", help="Do not ask for confirmation.")] = False,
                bootstrap_server: BootstrapOpt = DEFAULT_BOOTSTRAP) -> None:
    """Remove the ACLs of the resources named that match the principals, hosts and operations given (with
    principals, --operation defaults to All, as kafka-acls.sh); only a resource: all of its ACLs
    (kafka-acls.sh --remove)."""
    resources = _resources(topic, group, transactional_id, cluster)
    if not resources:
        fail("name a resource: --topic, --group, --transactional-id or --cluster")
    entries = _entries(allow_principal, deny_principal, allow_host, deny_host) or [(None, None, None)]
    # as kafka-acls.sh: with principals, --operation defaults to All (only the All ACLs go); without, any
    operations = operation or (["All"] if entries[0][1] is not None else [None])
    if not force and not typer.confirm(f"Remove the matching ACLs of {', '.join(n for _, n in resources)}?"):
        raise typer.Exit(1)
    removed: list[dict] = []
    with gateway_client(bootstrap_server) as client:
        for (rt, name), (permission, principal, host), op in product(resources, entries, operations):
            removed += client.security.delete_acls(resource_type=rt, resource_name=name, pattern_type=resource_pattern_type,
                                          principal=principal, host=host if principal else None, operation=op,
                                          permission=permission)
    console.print(f"Removed {len(removed)} ACL{'s' if len(removed) != 1 else ''}:")
    _print(removed)
