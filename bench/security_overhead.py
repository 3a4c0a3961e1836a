#!/usr/bin/env python
"""The cost of security: produce records/s of one broker with TLS, authentication and ACLs against without.

Usage::

    python bench/security_overhead.py                  # 3 pairs per row, ~3 minutes
    python bench/security_overhead.py --repeat 5 --seconds 10

What it does: starts an embedded ZooKeeper and one broker child process (``produce_fetch.py``'s setup: a
temp dir, free ports, stopped by pid at the end, on Ctrl-C, SIGTERM and errors). For each row (JSON
produce, 1,000 records of 100 B per request; Arrow produce, 10,000 records per request) it runs pairs of
phases with the same client code (``produce_fetch.py``'s scenario: 8 keep-alive client threads, pre-built
bodies, a fresh 6-partition topic per phase), the broker restarted between phases:

- off: ``authentication.methods=none``, no authorizer;
- on: TLS (``ssl.certfile``/``ssl.keyfile`` of a certificate made for the run by
  :class:`~lakelog.security.certificates.CertificateAuthority`, the clients verifying it against the CA over
  keep-alive connections), ``authentication.methods=basic`` and ``authorizer.enabled=true``; the clients are
  ``User:bench``, whose only ACL is a prefixed ``Write`` on the topics ``bench-``, so every request pays the
  TLS record layer, a Basic credential check (remembered after the first: one SHA-256) and an ACL decision.

Phases alternate (off, on, on, off, ...: a drift of the machine's load hits both alike). Figures: records/s
of each phase, the ratio on / off per pair and its median against the target 0.8x. The ``bench/`` folder
never asserts timings.
"""

from __future__ import annotations

import argparse
import ssl
import sys
import time
from pathlib import Path

import httpx

from _cluster import PySpy, bench_cluster, broker_env as parse_broker_env, make_console, on_off_table
from produce_fetch import Load, Result, produce_scenario
from lakelog.security.certificates import CertificateAuthority

#: Target: records/s with security on over records/s with it off.
TARGET_RATIO = 0.8
ROWS = (("json-produce", "JSON produce, 1,000 × 100 B per request"),
        ("arrow-produce", "Arrow produce, 10,000 × 100 B per request"))
BROKER_PASSWORD = "bench-inter-broker"
BENCH_USER = ("bench", "bench-password")

console = make_console()


TLS_SETTINGS = ("ssl_certfile", "ssl_keyfile", "ssl_cafile")


def make_certificates(directory: Path) -> dict[str, str]:
    """A CA and the broker's certificate (SAN 127.0.0.1, localhost): ``{"ssl_certfile": ..., ...}``."""
    ca = CertificateAuthority.create(directory)
    files = ca.issue("broker-0", common_name="broker", hosts=["127.0.0.1", "localhost"], server=True)
    return {"ssl_certfile": str(files.certfile), "ssl_keyfile": str(files.keyfile), "ssl_cafile": str(ca.cafile)}


def set_phase(broker, enabled: bool, tls: dict[str, str]) -> None:
    """The broker's settings of a phase (applied at its next start): security on or off."""
    for name in TLS_SETTINGS:
        broker.extra_env.pop(f"LAKELOG_{name.upper()}", None)
    if not enabled:
        broker.extra_env.update({"LAKELOG_AUTHENTICATION_METHODS": "none", "LAKELOG_AUTHORIZER_ENABLED": "false"})
        broker.tls = {}
        return
    broker.extra_env.update({"LAKELOG_AUTHENTICATION_METHODS": "basic", "LAKELOG_AUTHORIZER_ENABLED": "true",
                             "LAKELOG_INTER_BROKER_PASSWORD": BROKER_PASSWORD,
                             **{f"LAKELOG_{k.upper()}": v for k, v in tls.items()}})
    broker.tls = dict(tls)  # its url is https:// and its readiness poll verifies the certificate


def grant_bench_user(admin: httpx.Client, cluster_id: str) -> None:
    """User ``bench`` with a prefixed Write ACL on ``bench-`` topics (idempotent: a restart keeps them)."""
    r = admin.put(f"/lakelog/v1/users/{BENCH_USER[0]}", json={"password": BENCH_USER[1]})
    r.raise_for_status()
    r = admin.post(f"/v3/clusters/{cluster_id}/acls", json={
        "resource_type": "TOPIC", "resource_name": "bench-", "pattern_type": "PREFIXED",
        "principal": f"User:{BENCH_USER[0]}", "operation": "WRITE", "permission": "ALLOW"})
    r.raise_for_status()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=7.0, help="Seconds per phase. Default: 7.")
    parser.add_argument("--repeat", type=int, default=3, metavar="N", help="Off/on pairs per row. Default: 3.")
    parser.add_argument("--threads", type=int, default=8, help="Concurrent client connections. Default: 8.")
    parser.add_argument("--broker-env", action="append", default=[], metavar="NAME=VALUE",
                        help="A broker setting as LAKELOG_NAME=VALUE (repeatable). Default: none.")
    parser.add_argument("--keep", action="store_true", help="Keep the temp dir (tables, logs). Default: off.")
    args = parser.parse_args()
    rows: dict[str, dict[bool, list[Result]]] = {kind: {False: [], True: []} for kind, _ in ROWS}
    t_start = time.monotonic()
    with bench_cluster(console, prefix="lakelog-bench-security-", env=parse_broker_env(args.broker_env),
                       keep=args.keep) as run:
        broker = run.broker
        spy = PySpy(None, broker.pid)
        tls = make_certificates(run.tmp / "tls")
        verify = ssl.create_default_context(cafile=tls["ssl_cafile"])
        phase = 0
        for kind, label in ROWS:
            for rep in range(args.repeat):
                for enabled in ((False, True) if rep % 2 == 0 else (True, False)):
                    broker.stop()
                    set_phase(broker, enabled, tls)
                    broker.start()
                    phase += 1
                    admin_auth = ("broker", BROKER_PASSWORD) if enabled else None
                    with httpx.Client(base_url=broker.url, timeout=120.0, auth=admin_auth,
                                      verify=verify if enabled else True) as admin:
                        cluster_id = admin.get("/v3/clusters").json()["data"][0]["cluster_id"]
                        if enabled:
                            grant_bench_user(admin, cluster_id)
                        load = Load(broker.url, args.threads, 10**12, args.seconds,
                                    client_options={"auth": BENCH_USER, "verify": verify} if enabled else None)
                        r = produce_scenario(kind, 100, url=broker.url, admin=admin, cluster_id=cluster_id,
                                             load=load, broker=broker, spy=spy, repetition=phase)
                    rows[kind][enabled].append(r)
                    console.print(f"  {label:<44} security {'on ' if enabled else 'off'}  pair {rep + 1}/{args.repeat}"
                                  f"  {r.rate:>12,.0f} records/s" + (f"  [red]{r.errors[0][:200]}[/]" if r.errors else ""))
    if run.return_code:
        return run.return_code
    console.print(on_off_table(f"produce records/s, TLS + basic authentication + ACLs on vs off (one broker, "
                               f"{args.threads} client threads, {args.seconds:g} s per phase)", ROWS, rows,
                               target_ratio=TARGET_RATIO))
    console.print(f"total {time.monotonic() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
