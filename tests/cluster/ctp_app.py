"""A consume-transform-produce application over HTTP, exactly once (Kafka's EOS loop, KIP-98): read topic A
read_committed, write each record (value + ``b"!"``) to the same partition of topic B, and commit A's
offsets for the group in the same transaction. Run as a process so a test can SIGKILL it at any point:

    python -m tests.cluster.ctp_app URL[,URL...] INPUT OUTPUT GROUP TRANSACTIONAL_ID PARTITIONS END

``END``: records per input partition; the application exits 0 once the group's committed offsets reach
it on every partition. It exits 3 when fenced (a newer instance took its transactional id).

Any failure (a broker gone, a coordinator moving, a timeout) aborts the open transaction by initializing
the producer again (InitProducerId aborts it and bumps the epoch) and goes on from the group's committed
offsets: what was written in the failed transaction is never read_committed, and is written again.
"""

from __future__ import annotations

import base64
import sys
import time

import httpx

from lakelog.protocol.media_types import BINARY_V2
from lakelog.protocol.producer_headers import ProducerBatch

#: records read per partition and transaction
BATCH_RECORDS = 10


class Fenced(Exception):
    """A newer instance of the producer took over."""


class App:
    def __init__(self, urls: list[str], source: str, sink: str, group: str, transactional_id: str, partitions: int,
                 end: int) -> None:
        self.urls, self.source, self.sink, self.group = urls, source, sink, group
        self.transactional_id, self.partitions, self.end = transactional_id, partitions, end
        self.http = httpx.Client(timeout=20)
        self.url = urls[0]
        self.cluster = ""
        self.producer_id = self.epoch = -1
        self.sequence = 0

    # -- requests, failing over between brokers ---------------------------------------------------

    def request(self, method: str, path: str, **kwargs) -> httpx.Response:
        """One request to the current broker; a connection failure moves to the next broker and raises."""
        try:
            resp = self.http.request(method, f"{self.url}{path}", **kwargs)
            if resp.status_code == 421 and resp.json().get("leader_url"):  # a partition's fetch goes to its leader
                resp = self.http.request(method, f"{resp.json()['leader_url']}{path}", **kwargs)
            return resp
        except httpx.HTTPError:
            self.url = self.urls[(self.urls.index(self.url) + 1) % len(self.urls)]
            raise

    def ok(self, resp: httpx.Response) -> dict:
        if resp.status_code == 409 and resp.json().get("error_code") == 40915:
            raise Fenced(resp.text)
        if resp.status_code != 200:
            raise RuntimeError(f"{resp.status_code} {resp.text[:300]}")
        return resp.json() if resp.content else {}

    # -- the loop ---------------------------------------------------------------------------------

    def init(self) -> None:
        """InitProducerId (aborting a previous instance's open transaction), until it answers."""
        while True:
            try:
                if not self.cluster:
                    self.cluster = self.ok(self.request("GET", "/v3/clusters"))["data"][0]["cluster_id"]
                answer = self.ok(self.request("POST", f"/v3/clusters/{self.cluster}/producers", json={
                    "transactional_id": self.transactional_id, "transaction_timeout_ms": 20_000}))
                self.producer_id, self.epoch, self.sequence = answer["producer_id"], answer["producer_epoch"], 0
                return
            except (httpx.HTTPError, RuntimeError, ValueError):
                time.sleep(0.1)

    def committed(self) -> list[int]:
        answer = self.ok(self.request("GET", f"/consumers/{self.group}/offsets", params={"topic": self.source}))
        found = {o["partition"]: o["offset"] for o in answer["offsets"]}
        return [found.get(p, 0) for p in range(self.partitions)]

    def transaction(self, positions: list[int]) -> list[int]:
        """One transaction over every partition with records; returns the positions after it."""
        moved, offsets = list(positions), []
        for p in range(self.partitions):
            if positions[p] >= self.end:
                continue
            resp = self.request("GET", f"/topics/{self.source}/partitions/{p}/records", headers={"Accept": BINARY_V2},
                                params={"offset": positions[p], "max_bytes": 600, "isolation_level": "read_committed"})
            if resp.status_code != 200:
                raise RuntimeError(f"fetch {resp.status_code} {resp.text[:200]}")
            records = resp.json()[:BATCH_RECORDS]
            if not records:
                continue
            values = [base64.b64decode(r["value"]) + b"!" for r in records]
            headers = ProducerBatch(self.producer_id, self.epoch, self.sequence, self.transactional_id).headers()
            self.sequence += 1
            # the topic route forwards each partition's share to its leader (the partition route does not)
            answer = self.ok(self.request("POST", f"/topics/{self.sink}", params={"acks": "all"}, json={"records": [
                {"partition": p, "value": base64.b64encode(v).decode()} for v in values]},
                headers={**headers, "Content-Type": BINARY_V2}))
            errors = [o for o in answer["offsets"] if o.get("error_code") is not None]
            if errors:
                raise (Fenced if errors[0]["error_code"] == 40915 else RuntimeError)(str(errors[0]))
            moved[p] = records[-1]["offset"] + 1
            offsets.append({"topic": self.source, "partition": p, "offset": moved[p]})
        if not offsets:
            return moved
        path = f"/v3/clusters/{self.cluster}/transactions/{self.transactional_id}"
        body = {"producer_id": self.producer_id, "producer_epoch": self.epoch}
        self.ok(self.request("POST", f"{path}/offsets", json={**body, "group_id": self.group, "offsets": offsets}))
        state = self.ok(self.request("POST", f"{path}/commit", json=body))["state"]
        if state != "CompleteCommit":
            raise RuntimeError(f"commit answered {state}")
        return moved

    def run(self) -> int:
        self.init()
        positions: list[int] | None = None
        while True:
            try:
                if positions is None:
                    positions = self.committed()
                if all(pos >= self.end for pos in positions):
                    return 0
                positions = self.transaction(positions)
            except Fenced as e:
                print(f"fenced: {e}", file=sys.stderr)
                return 3
            except (httpx.HTTPError, RuntimeError, ValueError, KeyError) as e:
                print(f"transaction failed, starting over: {e}", file=sys.stderr)
                time.sleep(0.1)
                self.init()  # aborts the open transaction
                positions = None


def main(argv: list[str]) -> int:
    urls, source, sink, group, transactional_id, partitions, end = argv
    return App(urls.split(","), source, sink, group, transactional_id, int(partitions), int(end)).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
