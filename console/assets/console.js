// mirrord console: fetches status.json every few seconds and draws the
// node, the FAILED partitions first, then each mirror (syncs, partitions,
// charts of the last hour as inline SVG, the failover dry run). Plain
// JavaScript, no framework; text goes in with textContent only.
"use strict";

const refreshMillis = 3000;
const svgNS = "http://www.w3.org/2000/svg";

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS(svgNS, tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    node.setAttribute(key, value);
  }
  return node;
}

function bytesText(n) {
  if (n < 0) return "-";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n.toFixed(0) : n.toFixed(1)) + " " + units[i];
}

function secondsText(s) {
  if (s < 0) return "-";
  if (s < 1) return Math.round(s * 1000) + "ms";
  if (s < 120) return s.toFixed(1) + "s";
  if (s < 7200) return (s / 60).toFixed(1) + "m";
  return (s / 3600).toFixed(1) + "h";
}

function lagText(records, atLeast) {
  if (records < 0) return "-";
  return (atLeast ? ">=" : "") + records;
}

function ago(at, now) {
  return secondsText(Math.max(0, (now - new Date(at)) / 1000)) + " ago";
}

function syncText(name, sync, items, now) {
  if (!sync.at) {
    return sync.error ? "no " + name + " sync round: " + sync.error : "no " + name + " sync round yet";
  }
  let text = name + " sync " + ago(sync.at, now) + " (took " + secondsText(sync.durationSeconds) + "): " + sync.synced + " " + items;
  if (sync.failedRounds > 0) text += "; " + sync.failedRounds + " rounds failed";
  if (sync.error) text += "; the last round failed: " + sync.error;
  return text;
}

function syncItem(text, sync) {
  return el("li", { class: sync.error ? "bad" : "" }, text);
}

function renderNode(status) {
  const n = status.node;
  let space = "free space unknown";
  if (n.logDir.known) {
    space = bytesText(n.logDir.freeBytes) + " free (reserve " + bytesText(n.logDir.reserveBytes) + ")";
    if (n.logDir.low) space = "LOW SPACE: " + space + ": writes are refused";
  }
  const node = document.getElementById("node");
  node.replaceChildren(
    el("span", {}, "node ", el("b", { id: "node-id" }, n.id)), " · cluster ",
    el("b", { id: "cluster-id" }, n.clusterId), " · ", el("span", { id: "node-address" }, n.address),
    " · log dir: ", el("span", { class: n.logDir.low ? "bad" : "" }, space));
}

function renderFailed(status) {
  const section = document.getElementById("failed");
  section.hidden = status.failed.length === 0;
  if (section.hidden) { section.replaceChildren(); return; }
  const rows = status.failed.map((f) => el("tr", { class: "failed-row" },
    el("td", {}, f.mirror), el("td", { class: "topic" }, f.topic), el("td", { class: "num" }, f.partition),
    el("td", { class: "state state-FAILED" }, "FAILED"), el("td", {}, f.previous),
    el("td", { class: "num" }, f.waitsForRecover ? "waits for --recover" : f.attempts),
    el("td", { class: "error" }, f.error)));
  section.replaceChildren(
    el("h2", {}, "FAILED partitions: " + status.failed.length),
    el("table", {}, el("thead", {}, el("tr", {}, ...["MIRROR", "TOPIC", "PARTITION", "STATE", "FAILED FROM", "ATTEMPTS", "ERROR"].map((h) => el("th", {}, h)))),
      el("tbody", {}, ...rows)),
    el("p", {}, "A partition that waits for --recover: ", el("code", {}, "mirrord mirrors --recover --mirror NAME --topics TOPIC"), "."));
}

function renderOffline(status) {
  const section = document.getElementById("offline");
  section.hidden = status.offline.length === 0;
  if (section.hidden) { section.replaceChildren(); return; }
  section.replaceChildren(
    el("h2", { class: "bad" }, "OFFLINE: " + status.offline.length + " partition(s) whose log cannot be opened answer KAFKA_STORAGE_ERROR"),
    el("ul", {}, ...status.offline.map((o) => el("li", {}, o.topic + "-" + o.partition + ": ", el("span", { class: "error" }, o.error)))));
}

// chart draws one series of the history as a line over the sample times.
function chart(title, history, value, format) {
  const width = 300, height = 120, left = 46, bottom = 16, top = 8;
  const points = history.filter((s) => value(s) >= 0);
  const root = svg("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "none", role: "img", "aria-label": title });
  root.append(svg("line", { class: "axis", x1: left, y1: height - bottom, x2: width, y2: height - bottom }));
  root.append(svg("line", { class: "axis", x1: left, y1: top, x2: left, y2: height - bottom }));
  const peak = Math.max(0, ...points.map(value));
  const label = (y, text) => { const t = svg("text", { x: 2, y }); t.textContent = text; root.append(t); };
  label(top + 8, format(peak));
  label(height - bottom, format(0));
  if (points.length > 0) {
    const first = new Date(points[0].at).getTime(), last = new Date(points[points.length - 1].at).getTime();
    const span = Math.max(last - first, 1), scale = peak > 0 ? peak : 1;
    const coords = points.map((s) => {
      const x = left + ((new Date(s.at).getTime() - first) / span) * (width - left - 2);
      const y = height - bottom - (value(s) / scale) * (height - bottom - top);
      return x.toFixed(1) + "," + y.toFixed(1);
    });
    if (coords.length === 1) coords.push((width - 2) + "," + coords[0].split(",")[1]);
    root.append(svg("polyline", { class: "series", points: coords.join(" ") }));
    const t = svg("text", { x: left + 2, y: height - 3 });
    t.textContent = points.length + " samples over " + secondsText((last - first) / 1000);
    root.append(t);
  }
  return el("div", {}, el("div", { class: "chart-title" }, title), root);
}

// epochText is a leader epoch, "-" when unknown (-1).
function epochText(epoch) {
  return epoch < 0 ? "-" : String(epoch);
}

function renderMirror(m, now) {
  const states = m.states.map((s) => s.count + " " + s.state).join(", ") || "no partitions";
  const source = m.sourceReachable
    ? el("span", { class: "ok" }, "answers")
    : el("span", { class: "bad" }, "unreachable since " + new Date(m.sourceUnreachableSince).toISOString() + " (" + ago(m.sourceUnreachableSince, now) + ")" + (m.sourceError ? ": " + m.sourceError : ""));
  const g = m.groupSync;
  let groups = syncText("group offset", g, "groups synced, " + g.skipped + " skipped (members on this node)", now);
  if (g.at && g.groups.length > 0) groups += "; offset lag " + g.offsetLag + " over " + g.groups.length + " groups (most: " + g.groups[0].group + " " + g.groups[0].offsetLag + ")";
  const rows = m.partitions.map((p) => el("tr", { class: "partition-row", "data-topic": p.topic, "data-state": p.state },
    el("td", { class: "topic" }, p.topic), el("td", { class: "num" }, p.partition),
    el("td", { class: "state state-" + p.state }, p.state),
    el("td", { class: "num" }, p.sourceHighWatermark < 0 ? "-" : p.sourceHighWatermark),
    el("td", { class: "num" }, p.logEndOffset),
    el("td", { class: "num epoch" }, epochText(p.leaderEpoch) + " / " + epochText(p.sourceLeaderEpoch)),
    el("td", { class: "num" }, lagText(p.lagRecords, p.lagAtLeast)),
    el("td", { class: "num" }, secondsText(p.lagSeconds)),
    el("td", { class: "num" }, p.bytesPerSecond < 0 ? "-" : bytesText(p.bytesPerSecond) + "/s"),
    el("td", { class: "error" }, p.error ? p.error + (p.attempts < 0 ? " (waits for --recover)" : " (" + p.attempts + " retries)") : "")));
  const d = m.dryRun;
  const affected = m.partitions.filter((p) => p.state !== "STOPPED");
  const dry = el("details", { class: "dry-run" },
    el("summary", {}, "Failover dry run: a stop now would leave " + (d.atLeast ? "at least " : "") + d.records + " records behind on the source (largest lag in time " + secondsText(d.lagSeconds) + ")"),
    el("table", { class: "dry-run-partitions" },
      el("thead", {}, el("tr", {}, ...["TOPIC", "PARTITION", "STATE", "RECORDS LEFT BEHIND", "LAG TIME"].map((h) => el("th", {}, h)))),
      el("tbody", {}, ...affected.map((p) => el("tr", {}, el("td", {}, p.topic), el("td", { class: "num" }, p.partition), el("td", { class: "state state-" + p.state }, p.state),
        el("td", { class: "num" }, lagText(p.lagRecords, p.lagAtLeast)), el("td", { class: "num" }, secondsText(p.lagSeconds)))))),
    el("p", {}, d.unknown > 0 ? d.unknown + " partition(s) with an unknown lag. " : "",
      d.groupOffsetLag >= 0 ? "Consumer groups: offsets here trail the source by " + d.groupOffsetLag + " in all (as of the last group sync round)." : "Consumer groups: no group offset sync round yet; how far their offsets here trail the source is unknown."),
    g.groups.length === 0 ? null : el("table", { class: "dry-run-groups" },
      el("thead", {}, el("tr", {}, el("th", {}, "GROUP"), el("th", { class: "num" }, "OFFSET LAG"))),
      el("tbody", {}, ...g.groups.map((x) => el("tr", {}, el("td", {}, x.group), el("td", { class: "num" }, x.offsetLag))))),
    el("p", {}, "The same from the CLI: ", el("code", {}, d.dryRunCommand), ". To fail over, run ", el("code", {}, d.command), " (this page does not act)."));
  return el("article", { class: "mirror", id: "mirror-" + m.name, "data-mirror": m.name },
    el("h2", {}, "mirror ", el("span", { class: "mirror-name" }, m.name), ": " + m.partitions.length + " partitions: " + states),
    el("div", {}, "source ", el("code", {}, m.sourceBootstrap), " (cluster " + (m.sourceClusterId || "?") + "): ", source),
    el("div", {}, "now: lag " + lagText(m.lagRecords, m.lagAtLeast) + " records, largest lag in time " + secondsText(m.lagSeconds) +
      ", throughput " + (m.bytesPerSecond < 0 ? "-" : bytesText(m.bytesPerSecond) + "/s")),
    el("ul", { class: "syncs" },
      syncItem(groups, g),
      syncItem(syncText("topic config", m.configSync, "topics", now), m.configSync),
      syncItem(syncText("ACL", m.aclSync, "ACLs of the source held here", now), m.aclSync),
      syncItem(syncText("transactional ID", m.transactionSync, "transactional IDs", now), m.transactionSync)),
    el("div", { class: "charts" },
      chart("lag (records)", m.history, (s) => s.lagRecords, (v) => String(Math.round(v))),
      chart("lag (seconds)", m.history, (s) => s.lagSeconds, secondsText),
      chart("throughput (bytes/s)", m.history, (s) => s.bytesPerSecond, (v) => bytesText(v) + "/s")),
    el("table", { class: "partitions" },
      el("thead", {}, el("tr", {}, ...["TOPIC", "PARTITION", "STATE", "SOURCE HW", "LOG END", "EPOCH / SOURCE", "LAG RECORDS", "LAG TIME", "THROUGHPUT", "ERROR"].map((h) => el("th", {}, h)))),
      el("tbody", {}, ...rows)),
    dry);
}

function render(status) {
  const now = new Date(status.at);
  renderNode(status);
  renderFailed(status);
  renderOffline(status);
  const mirrors = document.getElementById("mirrors");
  if (status.mirrors.length === 0) {
    mirrors.replaceChildren(el("p", {}, "no mirrors"));
  } else {
    mirrors.replaceChildren(...status.mirrors.map((m) => renderMirror(m, now)));
  }
}

async function refresh() {
  const banner = document.getElementById("banner");
  try {
    const response = await fetch("status.json", { cache: "no-store" });
    if (!response.ok) throw new Error("status.json: HTTP " + response.status);
    render(await response.json());
    banner.hidden = true;
    document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
    document.body.dataset.rendered = "true";
  } catch (err) {
    banner.textContent = "The node does not answer (" + err.message + "); showing what it said last.";
    banner.hidden = false;
  }
}

refresh();
setInterval(refresh, refreshMillis);
