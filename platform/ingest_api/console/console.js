// lakelog console: one page over the broker's public REST API (REST Proxy v2 and v3 routes).
// Plain JavaScript, no framework, nothing loaded from the network but this broker's own routes.
"use strict";

const REFRESH_MS = 3000;               // live refresh of the open view and of the lag history
const LAG_HISTORY_MS = 15 * 60 * 1000; // lag kept per group (browser session storage)
const BINARY_V2 = "application/vnd.kafka.binary.v2+json";

const state = { clusterId: null, brokerId: null, view: null, timer: null, refreshing: false };

// -- helpers ---------------------------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function fmtNum(n) { return n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"); }

function fmtBytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}

function fmtTime(ms) {
  if (ms === null || ms === undefined) return "–";
  const d = new Date(Number(ms));
  return isNaN(d) ? String(ms) : d.toISOString().replace("T", " ").replace("Z", " UTC");
}

class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || `HTTP ${status}`);
    this.status = status;
    this.body = body || {};
  }
}

async function api(path, opts = {}) {
  const headers = Object.assign({ Accept: "application/json" }, opts.headers || {});
  const init = { method: opts.method || "GET", headers };
  if (opts.json !== undefined) {
    init.body = JSON.stringify(opts.json);
    if (!headers["Content-Type"]) headers["Content-Type"] = "application/json";
  }
  const resp = await fetch(path, init);
  const text = await resp.text();
  let body = null;
  if (text) { try { body = JSON.parse(text); } catch (e) { body = { message: text }; } }
  if (!resp.ok) throw new ApiError(resp.status, body);
  return body;
}

function enc(s) { return encodeURIComponent(s); }
function v3(path) { return `/v3/clusters/${enc(state.clusterId)}${path}`; }
function lastSegment(url) { return url ? decodeURIComponent(url.split("/").pop()) : null; }

function setStatus(text, isError) {
  const s = document.getElementById("status");
  s.textContent = text;
  s.classList.toggle("error", !!isError);
}

function message(node, text, kind) {
  node.textContent = text;
  node.className = `message ${kind || ""}`;
}

// bytes <-> base64 <-> text
function b64ToBytes(b64) {
  if (b64 === null || b64 === undefined) return null;
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function textToB64(text) {
  const bytes = new TextEncoder().encode(text);
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin);
}

function renderBytes(bytes, format) {
  if (bytes === null) return el("span", { class: "muted" }, "null");
  if (format === "hex") {
    const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, "0"));
    const lines = [];
    for (let i = 0; i < hex.length; i += 16) lines.push(hex.slice(i, i + 16).join(" "));
    return el("pre", {}, lines.join("\n"));
  }
  const text = new TextDecoder("utf-8").decode(bytes);
  if (format === "json") {
    try { return el("pre", {}, JSON.stringify(JSON.parse(text), null, 2)); }
    catch (e) { return el("pre", { title: "not JSON: shown as text" }, text, el("span", { class: "badge" }, "not JSON")); }
  }
  return el("pre", {}, text);
}

// -- data ------------------------------------------------------------------------------------------

async function loadCluster() {
  const clusters = await api("/v3/clusters");
  const c = clusters.data[0];
  state.clusterId = c.cluster_id;
  return { clusterId: c.cluster_id, controller: c.controller ? Number(lastSegment(c.controller.related)) : null };
}

async function loadBrokers() { return (await api(v3("/brokers"))).data; }

async function loadGroups() { return (await api(v3("/consumer-groups"))).data; }

async function loadLags(group) {
  try { return (await api(v3(`/consumer-groups/${enc(group)}/lags`))).data; }
  catch (e) { if (e.status === 404) return []; throw e; }
}

// Lag history: one point per poll and group, kept for LAG_HISTORY_MS in session storage.
const lagHistory = (() => {
  try { return JSON.parse(sessionStorage.getItem("lakelog.lagHistory") || "{}"); } catch (e) { return {}; }
})();

function recordLag(group, lags) {
  const now = Date.now();
  const parts = {};
  let total = 0;
  for (const l of lags) { parts[`${l.topic_name}-${l.partition_id}`] = l.lag; total += l.lag; }
  const points = (lagHistory[group] = (lagHistory[group] || []).filter((p) => now - p.t <= LAG_HISTORY_MS));
  points.push({ t: now, total, parts });
  try { sessionStorage.setItem("lakelog.lagHistory", JSON.stringify(lagHistory)); } catch (e) { /* full */ }
}

async function pollLags() {
  const groups = await loadGroups();
  await Promise.all(groups.filter((g) => g.lag_summary).map(async (g) =>
    recordLag(g.consumer_group_id, await loadLags(g.consumer_group_id))));
  return groups;
}

// -- views -----------------------------------------------------------------------------------------
// Each view builds its page once (forms keep what the user typed) and returns refresh(), which the
// timer calls every REFRESH_MS to redraw the data parts.

const views = {};

views.cluster = async (root) => {
  root.append(el("h1", {}, "Cluster"));
  const cards = root.appendChild(el("div", { class: "cards", id: "cluster-cards" }));
  root.append(el("h2", {}, "Brokers"));
  const brokers = root.appendChild(el("div", { id: "brokers" }));
  return async () => {
    const [cluster, list, topics, groups] = await Promise.all([loadCluster(), loadBrokers(), api("/topics"),
                                                               loadGroups()]);
    cards.replaceChildren(
      card("Cluster id", cluster.clusterId), card("Controller", cluster.controller ?? "none elected"),
      card("Live brokers", list.length), card("Topics", topics.length), card("Consumer groups", groups.length),
      card("This broker", state.brokerId ?? "–"));
    brokers.replaceChildren(table(["Broker", "Host", "Port", "Kafka endpoints", "Rack", "Role", "Console"], list.map((b) => [
      b.broker_id, b.host, b.port, (b.endpoints || []).join(", ") || "none", b.rack ?? "–",
      b.broker_id === cluster.controller ? el("span", { class: "badge leader" }, "controller") : "",
      el("a", { href: `http://${b.host}:${b.port}/console` }, `${b.host}:${b.port}/console`),
    ]), { id: "brokers-table" }));
  };
};

function card(label, value) {
  return el("div", { class: "card" }, el("div", { class: "label" }, label), el("div", { class: "value" }, value));
}

function table(headers, rows, attrs) {
  const numeric = (attrs && attrs.numeric) || [];
  return el("table", attrs && attrs.id ? { id: attrs.id } : {},
    el("thead", {}, el("tr", {}, headers.map((h, i) => el("th", { class: numeric.includes(i) ? "num" : "" }, h)))),
    el("tbody", {}, rows.map((r) => Array.isArray(r)
      ? el("tr", {}, r.map((c, i) => el("td", { class: numeric.includes(i) ? "num" : "" }, c)))
      : r)));
}

views.topics = async (root) => {
  root.append(el("h1", {}, "Topics"));
  const msg = el("div", { class: "message", id: "topic-create-message" });
  const form = el("form", { class: "panel", id: "topic-create" },
    el("label", {}, "Name", el("input", { name: "name", required: true, pattern: "[a-zA-Z0-9._-]{1,249}" })),
    el("label", {}, "Partitions", el("input", { name: "partitions", type: "number", min: 1, placeholder: "default" })),
    el("label", {}, "Replication factor", el("input", { name: "rf", type: "number", min: 1, placeholder: "default" })),
    el("label", {}, "Configs (key=value per line)", el("textarea", { name: "configs", placeholder: "retention.ms=86400000" })),
    el("button", { type: "submit" }, "Create topic"));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = new FormData(form);
    const body = { topic_name: f.get("name"), configs: parseKeyValues(f.get("configs")) };
    if (f.get("partitions")) body.partitions_count = Number(f.get("partitions"));
    if (f.get("rf")) body.replication_factor = Number(f.get("rf"));
    try {
      await api(v3("/topics"), { method: "POST", json: body });
      message(msg, `Topic ${body.topic_name} created.`, "ok");
      form.reset();
      await refreshNow();
    } catch (e) { message(msg, e.message, "error"); }
  });
  root.append(el("h2", {}, "Create a topic"), form, msg);
  const list = root.appendChild(el("div", { id: "topics" }));
  root.insertBefore(list, root.children[1]);
  return async () => {
    const topics = (await api(v3("/topics"))).data;
    const details = await Promise.all(topics.map((t) => api(`/topics/${enc(t.topic_name)}`).catch(() => null)));
    list.replaceChildren(table(["Topic", "Partitions", "Replication", "Under-replicated", "Offline", "Records (HW − log start)"],
      topics.map((t, i) => {
        const parts = details[i] ? details[i].partitions : [];
        const under = parts.filter((p) => p.replicas.some((r) => !r.in_sync)).length;
        const offline = parts.filter((p) => p.leader < 0).length;
        const hw = parts.reduce((s, p) => s + (p.high_watermark || 0) - (p.log_start_offset || 0), 0);
        return el("tr", { "data-topic": t.topic_name },
          el("td", {}, el("a", { href: `#/topic/${enc(t.topic_name)}` }, t.topic_name)),
          el("td", { class: "num" }, t.partitions_count), el("td", { class: "num" }, t.replication_factor),
          el("td", { class: `num ${under ? "bad" : ""}` }, under), el("td", { class: `num ${offline ? "bad" : ""}` }, offline),
          el("td", { class: "num" }, fmtNum(hw)));
      }), { id: "topics-table", numeric: [1, 2, 3, 4, 5] }));
  };
};

function parseKeyValues(text) {
  return String(text || "").split("\n").map((l) => l.trim()).filter(Boolean).map((l) => {
    const i = l.indexOf("=");
    return i < 0 ? { name: l, value: "" } : { name: l.slice(0, i).trim(), value: l.slice(i + 1).trim() };
  });
}

views.topic = async (root, [name]) => {
  const msg = el("div", { class: "message", id: "topic-message" });
  const del = el("button", { class: "danger", id: "topic-delete", type: "button" }, "Delete topic");
  del.addEventListener("click", async () => {
    if (!del.classList.contains("armed")) {       // two clicks, no browser dialog
      del.classList.add("armed");
      del.textContent = `Really delete ${name}?`;
      return;
    }
    try {
      await api(v3(`/topics/${enc(name)}`), { method: "DELETE" });
      location.hash = "#/topics";
    } catch (e) { message(msg, e.message, "error"); }
  });
  root.append(el("h1", {}, "Topic ", el("span", { id: "topic-name" }, name), " ",
                 el("a", { href: `#/produce/${enc(name)}`, class: "badge" }, "produce"), " ", del), msg);
  const parts = root.appendChild(el("div", { id: "partitions" }));
  root.append(el("h2", {}, "Configs"));
  const configs = root.appendChild(el("div", { id: "configs" }));
  return async () => {
    const [topic, cfg, logs] = await Promise.all([api(`/topics/${enc(name)}`), api(v3(`/topics/${enc(name)}/configs`)),
      api(`/lakelog/v1/topics/${enc(name)}/logs?details=true`).catch(() => [])]);   // table facts; [] while a leader moves
    const tables = Object.fromEntries(logs.map((l) => [l.partition, l]));
    parts.replaceChildren(table(
      ["Partition", "Leader", "Epoch", "Replicas", "ISR", "Log start", "Lake end", "LSO", "HW", "LEO", "Lake lag",
       "Delta version", "Files", "Size on disk", "Records"],
      topic.partitions.map((p) => {
        const t = tables[p.partition] || {};
        const isr = p.replicas.filter((r) => r.in_sync).map((r) => r.broker);
        const out = p.replicas.filter((r) => !r.in_sync).length;
        const lakeLag = p.log_end_offset === null || p.lake_end_offset === null ? null : p.log_end_offset - p.lake_end_offset;  // as lakelog_partition_lake_lag_records
        return el("tr", { "data-partition": p.partition },
          el("td", { class: "num" }, p.partition),
          el("td", { class: `num leader ${p.leader < 0 ? "bad" : ""}` }, p.leader < 0 ? "none" : p.leader),
          el("td", { class: "num" }, p.leader_epoch),
          el("td", { class: "replicas" }, p.replicas.map((r) => r.broker).join(", ")),
          el("td", { class: `isr ${out ? "bad" : ""}` }, isr.join(", ")),
          el("td", { class: "num log-start" }, fmtNum(p.log_start_offset)),
          el("td", { class: "num lake-end" }, fmtNum(p.lake_end_offset)),
          el("td", { class: "num lso" }, fmtNum(p.last_stable_offset)),
          el("td", { class: "num hw" }, fmtNum(p.high_watermark)),
          el("td", { class: "num leo" }, fmtNum(p.log_end_offset)),
          el("td", { class: "num lake-lag" }, fmtNum(lakeLag)),
          el("td", { class: "num table-version" }, fmtNum(t.table_version)),
          el("td", { class: "num table-files" }, fmtNum(t.table_files)),
          el("td", { class: "num size", title: t.size_bytes == null ? "" : `${t.size_bytes} bytes` }, fmtBytes(t.size_bytes)),
          el("td", {}, el("a", { href: `#/records/${enc(name)}/${p.partition}` }, "browse")));
      }), { id: "partitions-table" }));
    configs.replaceChildren(table(["Config", "Value", "Source"], cfg.data.map((c) => el("tr", { "data-config": c.name },
      el("td", {}, c.name), el("td", { class: c.is_default ? "muted" : "" }, c.value ?? "null"),
      el("td", { class: "muted" }, c.source))), { id: "configs-table" }));
  };
};

views.records = async (root, [name, partitionText]) => {
  const partition = Number(partitionText || 0);
  const topic = await api(`/topics/${enc(name)}`);
  const form = el("form", { class: "panel", id: "records-form" },
    el("label", {}, "Partition", el("select", { name: "partition" },
      topic.partitions.map((p) => el("option", { value: p.partition, selected: p.partition === partition }, p.partition)))),
    el("label", {}, "From", el("select", { name: "mode" },
      el("option", { value: "newest" }, "newest records (live)"), el("option", { value: "offset" }, "offset"),
      el("option", { value: "timestamp" }, "timestamp"))),
    el("label", {}, "Offset or time (ISO or ms)", el("input", { name: "from", placeholder: "0 or 2026-01-01T00:00:00Z" })),
    el("label", {}, "Records", el("input", { name: "limit", type: "number", min: 1, max: 1000, value: 20 })),
    el("label", {}, "Show key and value as", el("select", { name: "format" },
      el("option", { value: "text" }, "text"), el("option", { value: "json" }, "JSON"), el("option", { value: "hex" }, "hex"))),
    el("button", { type: "submit" }, "Show"));
  const msg = el("div", { class: "message", id: "records-message" });
  const out = el("div", { id: "records" });
  root.append(el("h1", {}, "Records of ", el("a", { href: `#/topic/${enc(name)}` }, name)), form, msg, out);
  let shown = null;   // the last answer, redrawn when only the format changes
  form.addEventListener("change", (ev) => {
    if (ev.target.name === "partition") location.hash = `#/records/${enc(name)}/${ev.target.value}`;
    else if (ev.target.name === "format" && shown) draw(shown);
  });
  form.addEventListener("submit", (ev) => { ev.preventDefault(); load(true); });

  function draw(records) {
    shown = records;
    const fmt = form.elements.format.value;
    out.replaceChildren(table(["Offset", "Timestamp", "Key", "Value", "Headers"], records.map((r) => el("tr", { "data-offset": r.offset },
      el("td", { class: "num offset" }, r.offset),
      el("td", { class: "timestamp", title: String(r.timestamp) }, fmtTime(r.timestamp)),
      el("td", { class: "key" }, renderBytes(b64ToBytes(r.key), fmt)),
      el("td", { class: "value" }, renderBytes(b64ToBytes(r.value), fmt)),
      el("td", { class: "headers" }, (r.headers || []).map((h) =>
        el("div", {}, `${h.key}: `, renderBytes(b64ToBytes(h.value), fmt === "hex" ? "hex" : "text")))))),
      { id: "records-table", numeric: [0] }));
  }

  async function startOffset(p, mode, from, limit) {
    if (mode === "offset") return Math.max(0, Number(from) || 0);
    if (mode === "timestamp") {
      const ms = /^\d+$/.test(from) ? Number(from) : Date.parse(from);
      if (isNaN(ms)) throw new Error(`Not a time: ${from}`);
      return (await api(`/topics/${enc(name)}/partitions/${p}/offsets?timestamp_ms=${Math.max(0, ms)}`)).offset_for_timestamp;
    }
    const o = await api(`/topics/${enc(name)}/partitions/${p}/offsets`);
    return Math.max(o.beginning_offset, o.end_offset - limit);
  }

  async function load(fromUser) {
    const p = Number(form.elements.partition.value);
    const mode = form.elements.mode.value;
    const limit = Math.min(1000, Math.max(1, Number(form.elements.limit.value) || 20));
    if (!fromUser && mode !== "newest") return;      // only the newest records follow the log live
    try {
      let offset = await startOffset(p, mode, form.elements.from.value.trim(), limit);
      const records = [];
      for (let round = 0; round < 20 && records.length < limit; round++) {
        const resp = await fetch(`/topics/${enc(name)}/partitions/${p}/records?offset=${offset}&max_wait_ms=0&max_bytes=1048576`,
                                 { headers: { Accept: BINARY_V2 } });
        const body = await resp.json();
        if (!resp.ok) throw new ApiError(resp.status, body);
        if (!body.length) break;
        records.push(...body);
        offset = Number(resp.headers.get("X-Lakelog-Next-Offset") || (body[body.length - 1].offset + 1));
      }
      const rows = records.slice(0, limit);
      if (mode === "newest") rows.reverse();         // newest first
      message(msg, rows.length ? `${rows.length} record(s)` : "No records there (yet).", "");
      draw(rows);
    } catch (e) {
      if (e instanceof ApiError && e.status === 421 && e.body.leader_url) {
        msg.className = "message error";
        msg.replaceChildren(`Broker ${e.body.leader_id} leads partition ${p}; records are read from the leader: `,
          el("a", { id: "leader-console", href: `${e.body.leader_url}/console#/records/${enc(name)}/${p}` },
            `open the record browser on broker ${e.body.leader_id}`));
        out.replaceChildren();
      } else {
        message(msg, e.message, "error");
      }
    }
  }
  return () => load(false);
};

views.produce = async (root, [name]) => {
  const topics = await api("/topics");
  const msg = el("div", { class: "message", id: "produce-result" });
  const form = el("form", { class: "panel", id: "produce-form" },
    el("label", {}, "Topic", el("select", { name: "topic" },
      topics.filter((t) => !t.startsWith("__")).map((t) => el("option", { value: t, selected: t === name }, t)))),
    el("label", {}, "Partition", el("input", { name: "partition", type: "number", min: 0, placeholder: "by key" })),
    el("label", {}, "Key (text)", el("input", { name: "key", placeholder: "none" })),
    el("label", {}, "Value (text or JSON)", el("textarea", { name: "value" })),
    el("label", {}, "Headers (name=value per line)", el("textarea", { name: "headers" })),
    el("button", { type: "submit" }, "Produce"));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = new FormData(form);
    const record = { value: textToB64(f.get("value")) };
    if (f.get("key")) record.key = textToB64(f.get("key"));
    if (f.get("partition") !== "") record.partition = Number(f.get("partition"));
    const headers = parseKeyValues(f.get("headers")).map((h) => ({ key: h.name, value: textToB64(h.value) }));
    if (headers.length) record.headers = headers;
    try {
      const resp = await api(`/topics/${enc(f.get("topic"))}`, { method: "POST", json: { records: [record] },
                                                                 headers: { "Content-Type": BINARY_V2 } });
      const o = resp.offsets[0];
      if (o.error_code) throw new Error(o.error);
      msg.className = "message ok";
      msg.replaceChildren(`Written to ${f.get("topic")} partition ${o.partition} at offset ${o.offset}. `,
        el("a", { href: `#/records/${enc(f.get("topic"))}/${o.partition}` }, "browse"));
      msg.dataset.partition = o.partition;
      msg.dataset.offset = o.offset;
    } catch (e) { message(msg, e.message, "error"); }
  });
  root.append(el("h1", {}, "Produce a record"), form, msg);
  return null;
};

views.groups = async (root) => {
  root.append(el("h1", {}, "Consumer groups"));
  const list = root.appendChild(el("div", { id: "groups" }));
  return async () => {
    const groups = await pollLags();
    const lagOf = (g) => { const h = lagHistory[g]; return h && h.length ? h[h.length - 1].total : null; };
    list.replaceChildren(groups.length ? table(["Group", "State", "Assignor", "Coordinator", "Total lag"],
      groups.map((g) => el("tr", { "data-group": g.consumer_group_id },
        el("td", {}, el("a", { href: `#/group/${enc(g.consumer_group_id)}` }, g.consumer_group_id)),
        el("td", {}, g.state), el("td", {}, g.partition_assignor || "–"),
        el("td", { class: "num" }, g.coordinator ? lastSegment(g.coordinator.related) : "–"),
        el("td", { class: "num total-lag" }, fmtNum(lagOf(g.consumer_group_id))))),
      { id: "groups-table" }) : el("p", { class: "muted" }, "No consumer groups."));
  };
};

views.group = async (root, [group]) => {
  root.append(el("h1", {}, "Consumer group ", el("span", { id: "group-name" }, group)));
  const cards = root.appendChild(el("div", { class: "cards", id: "group-cards" }));
  root.append(el("h2", {}, "Lag over the last minutes"));
  const canvas = root.appendChild(el("canvas", { id: "lag-chart", width: 900, height: 240 }));
  const legend = root.appendChild(el("div", { class: "legend", id: "lag-legend" }));
  root.append(el("h2", {}, "Lag per partition"));
  const lags = root.appendChild(el("div", { id: "lags" }));
  root.append(el("h2", {}, "Members and assignments"));
  const members = root.appendChild(el("div", { id: "members" }));
  return async () => {
    const [info, lagList, consumers] = await Promise.all([
      api(v3(`/consumer-groups/${enc(group)}`)), loadLags(group), api(v3(`/consumer-groups/${enc(group)}/consumers`))]);
    const assignments = await Promise.all(consumers.data.map((c) =>
      api(v3(`/consumer-groups/${enc(group)}/consumers/${enc(c.consumer_id)}/assignments`)).then((a) => a.data)));
    const total = lagList.reduce((s, l) => s + l.lag, 0);
    cards.replaceChildren(card("State", info.state), card("Assignor", info.partition_assignor || "–"),
      card("Coordinator", info.coordinator ? lastSegment(info.coordinator.related) : "–"),
      card("Members", consumers.data.length), el("div", { class: "card", id: "group-total-lag" },
        el("div", { class: "label" }, "Total lag"), el("div", { class: "value" }, fmtNum(total))));
    lags.replaceChildren(table(["Topic", "Partition", "Committed offset", "Log end offset", "Lag", "Member"],
      lagList.map((l) => el("tr", { "data-topic": l.topic_name, "data-partition": l.partition_id },
        el("td", {}, el("a", { href: `#/topic/${enc(l.topic_name)}` }, l.topic_name)),
        el("td", { class: "num" }, l.partition_id), el("td", { class: "num committed" }, fmtNum(l.current_offset)),
        el("td", { class: "num log-end" }, fmtNum(l.log_end_offset)), el("td", { class: "num lag" }, fmtNum(l.lag)),
        el("td", {}, l.consumer_id || el("span", { class: "muted" }, "none")))),
      { id: "lags-table" }));
    members.replaceChildren(consumers.data.length ? table(["Member", "Client id", "Instance id", "Partitions"],
      consumers.data.map((c, i) => [c.consumer_id, c.client_id, c.instance_id ?? "–",
        assignments[i].map((a) => `${a.topic_name}-${a.partition_id}`).join(", ") || "none"]), { id: "members-table" })
      : el("p", { class: "muted" }, "No live members (offsets only)."));
    recordLag(group, lagList);
    drawLagChart(canvas, legend, lagHistory[group] || []);
  };
};

const COLORS = ["#1f6feb", "#d97706", "#059669", "#db2777", "#7c3aed", "#0891b2", "#65a30d", "#dc2626"];

function drawLagChart(canvas, legend, points) {
  const ctx = canvas.getContext("2d");
  const W = canvas.width, H = canvas.height, L = 60, R = 12, T = 12, B = 28;
  ctx.clearRect(0, 0, W, H);
  const now = Date.now(), span = 10 * 60 * 1000, t0 = now - span;
  const shown = points.filter((p) => p.t >= t0);
  const keys = [...new Set(shown.flatMap((p) => Object.keys(p.parts)))].sort();
  const max = Math.max(1, ...shown.map((p) => p.total));
  const x = (t) => L + ((t - t0) / span) * (W - L - R);
  const y = (v) => T + (1 - v / max) * (H - T - B);
  ctx.strokeStyle = "#d9dee7"; ctx.fillStyle = "#667085"; ctx.font = "11px system-ui, sans-serif"; ctx.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {                      // y grid: 0 .. max
    const v = (max * i) / 4, yy = y(v);
    ctx.beginPath(); ctx.moveTo(L, yy); ctx.lineTo(W - R, yy); ctx.stroke();
    ctx.fillText(Math.round(v).toLocaleString("en-US"), 4, yy + 4);
  }
  for (let m = 0; m <= 10; m += 2) {                  // x axis: minutes ago
    const xx = x(now - m * 60000);
    ctx.fillText(m === 0 ? "now" : `-${m} min`, xx - 14, H - 8);
  }
  const line = (values, color, width) => {
    ctx.strokeStyle = color; ctx.lineWidth = width; ctx.beginPath();
    values.forEach(([t, v], i) => (i ? ctx.lineTo(x(t), y(v)) : ctx.moveTo(x(t), y(v))));
    ctx.stroke();
    if (values.length === 1) { ctx.fillStyle = color; ctx.fillRect(x(values[0][0]) - 2, y(values[0][1]) - 2, 4, 4); }
  };
  keys.forEach((k, i) => line(shown.filter((p) => k in p.parts).map((p) => [p.t, p.parts[k]]), COLORS[(i + 1) % COLORS.length], 1));
  line(shown.map((p) => [p.t, p.total]), "#111827", 2.5);
  legend.replaceChildren(el("span", {}, el("i", { style: "background:#111827" }), "total"),
    ...keys.map((k, i) => el("span", {}, el("i", { style: `background:${COLORS[(i + 1) % COLORS.length]}` }, ""), k)),
    el("span", { class: "muted" }, `${shown.length} point(s), one per ${REFRESH_MS / 1000} s poll`));
}

// -- routing and the refresh loop ------------------------------------------------------------------

async function refreshNow() {
  if (state.refreshing) { state.again = true; return; }
  state.refreshing = true;
  state.again = false;
  try {
    if (state.view && state.view.refresh) await state.view.refresh();
    if (!state.view || !["group", "groups"].includes(state.view.name)) await pollLags();  // those poll themselves
    setStatus(`broker ${state.brokerId ?? "?"} · cluster ${state.clusterId ?? "?"} · updated ${new Date().toLocaleTimeString()}`);
  } catch (e) {
    setStatus(`refresh failed: ${e.message}`, true);
  } finally {
    state.refreshing = false;
  }
  if (state.again) await refreshNow();            // a view opened during the refresh draws at once
}

async function route() {
  const [name, ...args] = (location.hash.replace(/^#\/?/, "") || "cluster").split("/").map(decodeURIComponent);
  const view = views[name] ? name : "cluster";
  document.querySelectorAll("header nav a").forEach((a) =>
    a.classList.toggle("active", a.dataset.nav === view || (a.dataset.nav + "s") === view || a.dataset.nav === view + "s"));
  const root = document.getElementById("view");
  root.replaceChildren();
  const token = {};
  state.view = { name: view, token };
  try {
    const refresh = await views[view](root, args);
    if (state.view.token !== token) return;          // another view was opened meanwhile
    state.view.refresh = refresh;
    await refreshNow();
  } catch (e) {
    root.append(el("p", { class: "message error" }, e.message));
  }
}

async function start() {
  try {
    const [health] = await Promise.all([api("/health"), loadCluster()]);
    state.brokerId = health.broker_id;
  } catch (e) {
    setStatus(`cannot reach the broker: ${e.message}`, true);
  }
  window.addEventListener("hashchange", route);
  await route();
  state.timer = setInterval(refreshNow, REFRESH_MS);
}

start();
