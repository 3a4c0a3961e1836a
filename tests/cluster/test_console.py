"""The web console (``/console``) in headless Chromium against three real broker processes.

Debian's ``chromium`` and ``chromium-driver`` are driven by Selenium through ``/usr/bin/chromedriver``
(no driver download). One cluster serves the module (three brokers on one real ZooKeeper, a fresh chroot);
every test works in its own topic or group, checks what the page shows against the REST API, and saves a
screenshot to its pytest tmp dir. The topic test pauses a follower (SIGSTOP by pid) and watches the ISR
shrink and grow back on the page without a reload.
"""

from __future__ import annotations

import base64
import time
from pathlib import Path

import httpx
import orjson
import pytest

from lakelog.runtime.broker_process import BrokerProcess
from lakelog.protocol import media_types
from tests.cluster.test_replication import FAST, Zk, create_topic, produce, wait_full_isr
from tests.harness import CONDITION_WAIT_S, new_chroot, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.browser]

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")

#: the cluster's settings: FAST's, with a ZooKeeper session that outlives the follower pause
ENV = {**FAST, "LAKELOG_ZOOKEEPER_SESSION_TIMEOUT_MS": "10000"}


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    """Three brokers on a fresh chroot for the module; each stopped by pid at its end."""
    connect = new_chroot(zookeeper.connect_string)
    root = tmp_path_factory.mktemp("console-cluster")
    brokers = [BrokerProcess(zookeeper_connect=connect, log_dirs=root / f"logs-{i}", broker_id=i, extra_env=ENV)
               for i in range(3)]
    try:
        for b in brokers:
            b.start()
        yield {b.broker_id: b for b in brokers}
    finally:
        for b in brokers:
            try:
                b.stop()
            except Exception:  # noqa: BLE001 - the others are stopped all the same
                b.kill()


@pytest.fixture(scope="module")
def zkc(cluster, zookeeper):
    """A test-side ZooKeeper client on the cluster's chroot."""
    z = Zk(cluster[0].zookeeper_connect)
    yield z
    z.close()


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium through Debian's chromedriver; quit at the module's end."""
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.skip("needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1440,1000", "--no-first-run", "--disable-extensions"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


# -- helpers ---------------------------------------------------------------------------------------

def open_console(driver, broker: BrokerProcess, fragment: str) -> None:
    """Load the console of ``broker`` at ``#fragment`` (a fresh page: no state from the last test)."""
    driver.get("about:blank")
    driver.get(f"{broker.url}/console#{fragment}")


def wait_page(driver, predicate, what: str, timeout_s: float = CONDITION_WAIT_S):
    """Poll the page until ``predicate(driver)`` is truthy; elements replaced by a refresh are retried."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

    def attempt():
        try:
            return predicate(driver)
        except (NoSuchElementException, StaleElementReferenceException):
            return None
    return wait_for(attempt, timeout_s, what, interval_s=0.2)


def cell(driver, css: str) -> str:
    """The text of the element at ``css``."""
    from selenium.webdriver.common.by import By
    return driver.find_element(By.CSS_SELECTOR, css).text


def shot(driver, tmp_path: Path, name: str) -> Path:
    """Save a screenshot of the page as ``{tmp_path}/{name}.png``."""
    path = tmp_path / f"{name}.png"
    assert driver.save_screenshot(str(path)), "screenshot not saved"
    assert path.stat().st_size > 10_000
    return path


def partition_api(broker: BrokerProcess, topic: str, p: int) -> dict:
    """``GET /topics/{topic}/partitions/{p}`` asked of ``broker``."""
    return httpx.get(f"{broker.url}/topics/{topic}/partitions/{p}", timeout=10).json()


def table_facts(broker: BrokerProcess, topic: str, p: int) -> tuple[int, int, int]:
    """``(table_version, table_files, size_bytes)`` of ``topic``-``p`` as ``GET .../logs`` answers them."""
    info = httpx.get(f"{broker.url}/lakelog/v1/topics/{topic}/logs", params={"partition": p, "details": "true"},
                     timeout=10).json()[0]
    return info["table_version"], info["table_files"], info["size_bytes"]


def leader_of(cluster: dict, topic: str, p: int) -> BrokerProcess:
    """The broker leading ``topic``-``p`` now."""
    return cluster[partition_api(cluster[0], topic, p)["leader"]]


def fetch_from_leader(cluster: dict, topic: str, p: int, offset: int) -> list[dict]:
    """Records of ``topic``-``p`` from ``offset``, read on its leader (binary form, base64)."""
    leader = leader_of(cluster, topic, p)
    resp = httpx.get(f"{leader.url}/topics/{topic}/partitions/{p}/records", params={"offset": offset, "max_wait_ms": 0},
                     headers={"Accept": media_types.BINARY_V2}, timeout=10)
    assert resp.status_code == 200, resp.text
    return resp.json()


def b64(s: str) -> str:
    """Base64 of ``s``'s UTF-8 bytes."""
    return base64.b64encode(s.encode()).decode()


def unb64(s: str | None) -> str | None:
    """The text of base64 ``s`` (None stays None)."""
    return None if s is None else base64.b64decode(s).decode()


def ready_topic(cluster, zkc, topic: str, partitions: int) -> None:
    """Create ``topic`` with replication factor 3 and wait until every partition has its full ISR."""
    resp = create_topic(cluster[0].url, topic, partitions=partitions, rf=3)
    assert resp.status_code == 201, resp.text
    wait_full_isr(zkc, topic, partitions, 3)


# -- tests -----------------------------------------------------------------------------------------

def test_topic_page_shows_isr_and_offsets(cluster, zkc, browser, tmp_path):
    """The partitions table shows each partition's leader, ISR, log start, HW, LEO and lake end offset as
    the API answers them; a paused follower leaves the ISR on the page and comes back, without a reload."""
    topic = "orders"
    ready_topic(cluster, zkc, topic, 2)
    assert produce(leader_of(cluster, topic, 0).url, topic, 0, [b"a%d" % i for i in range(5)]).status_code == 200
    assert produce(leader_of(cluster, topic, 1).url, topic, 1, [b"b%d" % i for i in range(3)]).status_code == 200

    # the console of partition 0's leader; a follower that is neither the leader nor the controller pauses later
    leader = partition_api(cluster[0], topic, 0)["leader"]
    follower = next(b for b in (0, 1, 2) if b not in (leader, zkc.controller()))
    open_console(browser, cluster[leader], f"/topic/{topic}")
    row = "#partitions-table tr[data-partition='{p}'] td.{c}"
    for p, hw in ((0, 5), (1, 3)):
        wait_page(browser, lambda d: cell(d, row.format(p=p, c="hw")) == str(hw), f"HW {hw} of partition {p}")
        api = partition_api(cluster[follower], topic, p)
        assert cell(browser, row.format(p=p, c="leader")) == str(api["leader"])
        assert cell(browser, row.format(p=p, c="leo")) == str(api["log_end_offset"]) == str(hw)
        assert cell(browser, row.format(p=p, c="log-start")) == str(api["log_start_offset"]) == "0"
        isr = {int(b) for b in cell(browser, row.format(p=p, c="isr")).split(", ")}
        assert isr == {r["broker"] for r in api["replicas"] if r["in_sync"]} == {0, 1, 2}
        wait_page(browser, lambda d: cell(d, row.format(p=p, c="lake-end")) == str(
            partition_api(cluster[follower], topic, p)["lake_end_offset"]), f"lake end offset of partition {p}")
        # the table facts of GET /lakelog/v1/topics/{t}/logs, which the leader answers
        wait_page(browser, lambda d: (cell(d, row.format(p=p, c="table-version")), cell(d, row.format(p=p, c="table-files")))
                  == tuple(str(x) for x in table_facts(cluster[follower], topic, p)[:2]), f"Delta version of {p}")
        size = int(browser.find_element("css selector", row.format(p=p, c="size")).get_attribute("title").split()[0])
        assert size > 0
    assert "max.message.bytes" in cell(browser, "#configs-table")

    # the follower stops: the ISR shrinks
    cluster[follower].pause()
    try:
        assert produce(cluster[leader].url, topic, 0, [b"c0"], acks="1").status_code == 200
        shrunk = {0, 1, 2} - {follower}
        wait_page(browser, lambda d: {int(b) for b in cell(d, row.format(p=0, c="isr")).split(", ")} == shrunk
                  and cell(d, row.format(p=0, c="leo")) == "6", f"ISR without broker {follower} on the page")
        assert "bad" in browser.find_element("css selector", row.format(p=0, c="isr")).get_attribute("class")
        assert {r["broker"] for r in partition_api(cluster[0], topic, 0)["replicas"] if r["in_sync"]} == shrunk
        shot(browser, tmp_path, "topic-isr-shrunk")
    finally:
        cluster[follower].resume()
    wait_page(browser, lambda d: {int(b) for b in cell(d, row.format(p=0, c="isr")).split(", ")} == {0, 1, 2}
              and cell(d, row.format(p=0, c="hw")) == "6", "ISR of 3 and HW 6 back on the page")
    shot(browser, tmp_path, "topic")


def test_record_browser_shows_produced_record(cluster, zkc, browser, tmp_path):
    """A produced record (key, JSON value, header, timestamp) shows in the record browser as text, JSON
    and hex; a broker that does not lead the partition links to the leader's console; the timestamp
    mode finds the record by time."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    topic = "payments"
    ready_topic(cluster, zkc, topic, 1)
    ts = int(time.time() * 1000) - 60_000
    body = orjson.dumps({"records": [
        {"value": b64("before"), "timestamp": ts - 120_000},
        {"key": b64("alice"), "value": b64('{"amount": 12.5, "currency": "EUR"}'),
         "headers": [{"key": "trace", "value": b64("t-42")}], "timestamp": ts}]})
    resp = httpx.post(f"{leader_of(cluster, topic, 0).url}/topics/{topic}/partitions/0", content=body,
                      headers={"Content-Type": media_types.BINARY_V2}, timeout=20)
    assert resp.status_code == 200, resp.text
    offset = resp.json()["offsets"][1]["offset"]
    assert offset == 1

    leader = partition_api(cluster[0], topic, 0)["leader"]
    other = next(b for b in (0, 1, 2) if b != leader)
    open_console(browser, cluster[other], f"/records/{topic}/0")
    link = wait_page(browser, lambda d: d.find_element(By.ID, "leader-console"), "a link to the leader's console")
    assert link.get_attribute("href").startswith(cluster[leader].url)
    link.click()
    row = f"#records-table tr[data-offset='{offset}']"
    wait_page(browser, lambda d: cell(d, f"{row} td.key") == "alice", "the record on the leader's console")
    assert browser.current_url.startswith(cluster[leader].url)
    assert cell(browser, f"{row} td.value") == '{"amount": 12.5, "currency": "EUR"}'
    assert cell(browser, f"{row} td.headers") == "trace: t-42"
    assert cell(browser, f"{row} td.timestamp") == time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts / 1000)) + \
        f".{ts % 1000:03d} UTC"
    # newest first: the record produced last is the first row
    assert browser.find_elements(By.CSS_SELECTOR, "#records-table tbody tr")[0].get_attribute("data-offset") == "1"

    form = browser.find_element(By.ID, "records-form")
    Select(form.find_element(By.NAME, "format")).select_by_value("json")
    wait_page(browser, lambda d: '"currency": "EUR"\n}' in cell(d, f"{row} td.value"), "the value as indented JSON")
    Select(form.find_element(By.NAME, "format")).select_by_value("hex")
    wait_page(browser, lambda d: cell(d, f"{row} td.key") == "61 6c 69 63 65", "the key in hex")

    # from an offset, then from a time: the first record is two minutes older than the second
    Select(form.find_element(By.NAME, "mode")).select_by_value("offset")
    form.find_element(By.NAME, "from").send_keys("0")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    rows = "#records-table tbody tr"
    wait_page(browser, lambda d: [r.get_attribute("data-offset") for r in d.find_elements(By.CSS_SELECTOR, rows)]
              == ["0", "1"], "offsets 0 and 1 from offset 0, in offset order")
    Select(form.find_element(By.NAME, "format")).select_by_value("text")
    Select(form.find_element(By.NAME, "mode")).select_by_value("timestamp")
    box = form.find_element(By.NAME, "from")
    box.clear()
    box.send_keys(time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((ts - 1000) / 1000)) + "Z")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_page(browser, lambda d: [r.get_attribute("data-offset") for r in d.find_elements(By.CSS_SELECTOR, rows)]
              == ["1"], "only offset 1 from a time between the two records")
    assert httpx.get(f"{cluster[0].url}/topics/{topic}/partitions/0/offsets", params={"timestamp_ms": ts - 1000},
                     timeout=10).json()["offset_for_timestamp"] == 1
    assert cell(browser, f"{row} td.value") == "{\"amount\": 12.5, \"currency\": \"EUR\"}"
    shot(browser, tmp_path, "records")


def test_group_page_shows_lag(cluster, zkc, browser, tmp_path):
    """A group's committed offsets show with their lag per partition and in total, as the v3 lags route
    answers; the chart gathers the polled lag, and the lag falls on the page when the group commits."""
    from selenium.webdriver.common.by import By

    topic, group = "events", "billing"
    ready_topic(cluster, zkc, topic, 2)
    assert produce(leader_of(cluster, topic, 0).url, topic, 0, [b"e%d" % i for i in range(7)]).status_code == 200
    assert produce(leader_of(cluster, topic, 1).url, topic, 1, [b"f%d" % i for i in range(4)]).status_code == 200
    commit = httpx.post(f"{cluster[2].url}/consumers/{group}/offsets", timeout=20, json={"offsets": [
        {"topic": topic, "partition": 0, "offset": 2}, {"topic": topic, "partition": 1, "offset": 4}]})
    assert commit.status_code == 200, commit.text

    open_console(browser, cluster[0], f"/group/{group}")
    row = "#lags-table tr[data-topic='events'][data-partition='{p}'] td.{c}"
    wait_page(browser, lambda d: cell(d, row.format(p=0, c="lag")) == "5", "lag 5 on partition 0")
    cid = httpx.get(f"{cluster[0].url}/v3/clusters", timeout=10).json()["data"][0]["cluster_id"]
    lags = {(l["topic_name"], l["partition_id"]): l for l in httpx.get(
        f"{cluster[0].url}/v3/clusters/{cid}/consumer-groups/{group}/lags", timeout=10).json()["data"]}
    for p in (0, 1):
        assert cell(browser, row.format(p=p, c="lag")) == str(lags[(topic, p)]["lag"])
        assert cell(browser, row.format(p=p, c="committed")) == str(lags[(topic, p)]["current_offset"])
        assert cell(browser, row.format(p=p, c="log-end")) == str(lags[(topic, p)]["log_end_offset"])
    assert cell(browser, "#group-total-lag .value") == "5"
    wait_page(browser, lambda d: "3 point(s)" in cell(d, "#lag-legend"), "three polls in the lag chart")
    assert "events-0" in cell(browser, "#lag-legend")

    assert cell(browser, "#members").startswith("No live members")

    # a member joins (a REST Proxy consumer instance on broker 2): the page shows it, its partitions, and
    # its commit (the offset of the last record processed, 5: the group resumes at 6) lowers the lag
    base = f"{cluster[2].url}/consumers/{group}"
    v2 = {"Content-Type": "application/vnd.kafka.v2+json"}
    made = httpx.post(base, headers=v2, timeout=20, json={"name": "m1", "format": "binary", "auto.commit.enable": "false"})
    assert made.status_code == 200, made.text
    member = f"{base}/instances/m1"
    assert httpx.post(f"{member}/subscription", headers=v2, json={"topics": [topic]}, timeout=20).status_code == 204
    try:
        wait_for(lambda: httpx.get(f"{member}/records", params={"timeout": 500}, timeout=20,
                                   headers={"Accept": media_types.BINARY_V2}).json(), what="the member's first records")
        wait_page(browser, lambda d: "events-0, events-1" in cell(d, "#members-table"), "the member and its partitions")
        consumers = httpx.get(f"{cluster[0].url}/v3/clusters/{cid}/consumer-groups/{group}/consumers", timeout=10).json()
        [consumer] = consumers["data"]
        assert consumer["consumer_id"] in cell(browser, "#members-table")
        wait_page(browser, lambda d: cell(d, row.format(p=0, c="lag")) == "5"
                  and consumer["consumer_id"] in cell(d, "#lags-table"), "the member as the partitions' owner")
        assert cell(browser, "#group-cards").split("\n")[1] == "STABLE"
        commit = httpx.post(f"{member}/offsets", headers=v2, timeout=20, json={"offsets": [
            {"topic": topic, "partition": 0, "offset": 5}]})
        assert commit.status_code == 200, commit.text
        wait_page(browser, lambda d: cell(d, "#group-total-lag .value") == "1", "total lag 1 after the commit")
        shot(browser, tmp_path, "group-member")
    finally:
        httpx.delete(member, timeout=20)

    # the groups list shows it too
    browser.find_element(By.CSS_SELECTOR, "header nav a[data-nav='groups']").click()
    wait_page(browser, lambda d: cell(d, f"#groups-table tr[data-group='{group}'] td.total-lag") == "1",
              "the group's lag in the groups list")
    browser.back()
    wait_page(browser, lambda d: cell(d, "#group-total-lag .value") == "1", "back on the group page")
    shot(browser, tmp_path, "group")


def test_produce_form_writes_record(cluster, zkc, browser, tmp_path):
    """The produce form writes a record (partition, key, value, header) that the API reads back."""
    from selenium.webdriver.common.by import By

    topic = "clicks"
    ready_topic(cluster, zkc, topic, 2)
    open_console(browser, cluster[2], f"/produce/{topic}")
    form = wait_page(browser, lambda d: d.find_element(By.ID, "produce-form"), "the produce form")
    form.find_element(By.NAME, "partition").send_keys("1")
    form.find_element(By.NAME, "key").send_keys("user-7")
    form.find_element(By.NAME, "value").send_keys('{"page": "/checkout"}')
    form.find_element(By.NAME, "headers").send_keys("source=console")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    result = wait_page(browser, lambda d: d.find_element(By.ID, "produce-result").get_attribute("data-offset"),
                       "the produce answer")
    assert result == "0"
    assert browser.find_element(By.ID, "produce-result").get_attribute("data-partition") == "1"
    shot(browser, tmp_path, "produce")

    records = wait_for(lambda: fetch_from_leader(cluster, topic, 1, 0), what="the record below the HW")
    assert len(records) == 1
    r = records[0]
    assert (r["offset"], unb64(r["key"]), unb64(r["value"])) == (0, "user-7", '{"page": "/checkout"}')
    assert [(h["key"], unb64(h["value"])) for h in r["headers"]] == [("source", "console")]
    assert fetch_from_leader(cluster, topic, 0, 0) == []


def test_cluster_page_and_topic_create_delete(cluster, zkc, browser, tmp_path):
    """The cluster page lists the live brokers and the controller; the topics page creates a topic with a
    config and deletes it (two clicks), through the v3 routes."""
    from selenium.webdriver.common.by import By

    open_console(browser, cluster[1], "/cluster")
    controller = zkc.controller()
    rows = wait_page(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#brokers-table tbody tr"), "the brokers")
    assert [r.text.split()[0] for r in rows] == ["0", "1", "2"]
    assert [r.text.split()[2] for r in rows] == [str(cluster[i].port) for i in range(3)]
    assert "controller" in rows[controller].text and sum("controller" in r.text for r in rows) == 1
    assert f"CONTROLLER\n{controller}" in cell(browser, "#cluster-cards")
    assert "THIS BROKER\n1" in cell(browser, "#cluster-cards")
    shot(browser, tmp_path, "cluster")

    topic = "scratch"
    open_console(browser, cluster[0], "/topics")
    form = wait_page(browser, lambda d: d.find_element(By.ID, "topic-create"), "the create form")
    form.find_element(By.NAME, "name").send_keys(topic)
    form.find_element(By.NAME, "partitions").send_keys("3")
    form.find_element(By.NAME, "rf").send_keys("2")
    form.find_element(By.NAME, "configs").send_keys("retention.ms=3600000")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_page(browser, lambda d: d.find_element(By.CSS_SELECTOR, f"#topics-table tr[data-topic='{topic}']"),
              "the new topic in the list")
    cid = httpx.get(f"{cluster[0].url}/v3/clusters", timeout=10).json()["data"][0]["cluster_id"]
    made = httpx.get(f"{cluster[0].url}/v3/clusters/{cid}/topics/{topic}", timeout=10).json()
    assert (made["partitions_count"], made["replication_factor"]) == (3, 2)
    assert {"name": "retention.ms", "value": "3600000"} in made["configs_list"]
    shot(browser, tmp_path, "topics")

    browser.find_element(By.CSS_SELECTOR, f"#topics-table tr[data-topic='{topic}'] a").click()
    button = wait_page(browser, lambda d: d.find_element(By.ID, "topic-delete"), "the delete button")
    button.click()
    assert httpx.get(f"{cluster[0].url}/v3/clusters/{cid}/topics/{topic}", timeout=10).status_code == 200
    button.click()
    wait_page(browser, lambda d: d.current_url.endswith("#/topics"), "back on the topics page")
    wait_for(lambda: httpx.get(f"{cluster[0].url}/v3/clusters/{cid}/topics/{topic}", timeout=10).status_code == 404,
             what="the topic deleted")
