// The dashboard served at GET /: one self-contained page (its CSS at GET /dashboard.css, its
// script at GET /dashboard.js, SVG drawn by the script; nothing from elsewhere, and nothing inline,
// so the endpoint's Content-Security-Policy allows only 'self' for scripts and styles: no
// `<script>` or `<style>` element, no style or event-handler attributes; the script sets styles
// through the CSSOM, which the policy allows). It polls `status` every second and keeps a client-side
// history of the rebalances it has seen, so the timeline survives the server's 50-entry window.
//
// Stable hooks for tests and scripts: every timeline row is `g.partition-row[data-partition=
// "topic-N"]` with the name as its text; every rebalance is `g.rebalance-marker[data-cause]` with
// the cause as its text; the poll gauge is `#poll-gauge`. The group map (`table#group-map`, from
// polling `group` every 2 s) has one `tr.group-member[data-member="<member id>"]` per member
// (`data-self="true"` on this consumer's), and in it one `td.group-cell[data-partition="topic-N"]`
// per partition, `data-owned="true"` with the lag as its text where that member owns it. All server strings go through
// textContent (never innerHTML), so a hostile group or topic name cannot inject markup.
#include <string_view>

#include "http/render.hpp"

namespace kgroup::http {

namespace {

// Both pages (a consumer's, a share member's) begin with page_head(title, heading) and end with
// page_foot: the same head, header line and script.
std::string page_head(std::string_view title, std::string_view heading) {
  std::string out = R"kgroup(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>)kgroup";
  out += title;
  out += R"kgroup(</title>
<link rel="stylesheet" href="dashboard.css">
</head>
<body>
<header>
  <h1>)kgroup";
  out += heading;
  out += R"kgroup( · <span id="group">…</span></h1>
  <div class="ident" id="ident"></div>
  <div id="live">connecting</div>
)kgroup";
  return out;
}

constexpr std::string_view page_foot = R"kgroup(</main>
<script src="dashboard.js"></script>
</body>
</html>
)kgroup";

// The consumer page's body, between page_head and page_foot.
constexpr std::string_view page = R"kgroup(</header>
<main>
  <section class="card wide"><div class="stats" id="stats"></div></section>
  <section class="card wide" id="group-card">
    <div class="tl-head"><h2>Group: members &times; partitions (lag)</h2><div class="ident" id="group-summary">gathering the group view…</div></div>
    <div id="group-error"></div>
    <div class="map-wrap"><table id="group-map"></table></div>
  </section>
  <section class="card">
    <div class="tl-head"><h2>Partitions of this member over time</h2>
      <label class="ident">window
        <select id="window">
          <option value="0">all</option><option value="3600000">1 h</option>
          <option value="900000">15 min</option><option value="300000">5 min</option>
          <option value="60000">1 min</option>
        </select></label></div>
    <svg id="timeline" width="100%" height="80" role="img" aria-label="partition timeline"></svg>
  </section>
  <section class="card">
    <h2>Time between polls</h2>
    <svg id="poll-gauge" viewBox="0 0 240 150" width="100%" role="img" aria-label="time since last poll"></svg>
    <div id="gauge-text"></div>
  </section>
  <section class="card wide">
    <h2>Assignment</h2>
    <table><thead><tr><th>partition</th><th class="num">position</th><th class="num">committed</th>
      <th class="num">high watermark</th><th class="num">lag</th><th>paused</th></tr></thead>
      <tbody id="partitions"></tbody></table>
  </section>
  <section class="card wide">
    <h2 id="rebalances-title">Rebalances (newest first)</h2>
    <table><thead><tr><th>started</th><th>cause</th><th>detail</th><th class="num" id="generation-column">generation</th>
      <th class="num">duration</th><th>revoked</th><th>assigned</th><th>lost</th></tr></thead>
      <tbody id="rebalances"></tbody></table>
  </section>
)kgroup";

// GET /dashboard.css
constexpr std::string_view style = R"kgroup(:root { --bg:#f6f7f9; --card:#fff; --fg:#1d2430; --muted:#6b7483; --line:#e3e6eb; --accent:#2f6fde;
        --ok:#2e9e5b; --warn:#d99a1e; --bad:#d6453d; }
@media (prefers-color-scheme: dark) {
  :root { --bg:#14171c; --card:#1d2128; --fg:#e6e9ee; --muted:#9aa3b2; --line:#2c323c; }
}
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--fg);
       font:14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
header { padding:14px 20px 6px; display:flex; align-items:baseline; gap:14px; flex-wrap:wrap; }
h1 { font-size:18px; margin:0; }
h2 { font-size:13px; text-transform:uppercase; letter-spacing:.05em; color:var(--muted); margin:0 0 8px; }
.ident { color:var(--muted); font-size:13px; }
.ident b { color:var(--fg); font-weight:600; }
#live { margin-left:auto; font-size:12px; color:var(--muted); }
#live::before { content:"\25CF "; color:var(--bad); }
#live.on::before { color:var(--ok); }
main { padding:6px 20px 20px; display:grid; grid-template-columns:minmax(0,1fr) 280px; gap:14px; }
.card { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:12px 14px; }
.wide { grid-column:1 / -1; }
.stats { display:flex; flex-wrap:wrap; gap:6px 22px; }
.stat span { display:block; color:var(--muted); font-size:11px; }
.stat b { font-size:17px; font-variant-numeric:tabular-nums; }
table { width:100%; border-collapse:collapse; font-variant-numeric:tabular-nums; font-size:13px; }
th { text-align:left; color:var(--muted); font-weight:500; border-bottom:1px solid var(--line); padding:3px 6px; }
td { border-bottom:1px solid var(--line); padding:3px 6px; vertical-align:top; }
td.num, th.num { text-align:right; }
svg text { fill:var(--fg); font-size:11px; }
svg .axis { stroke:var(--line); }
svg .muted { fill:var(--muted); }
.row-label.gone { fill:var(--muted); }
.tl-head { display:flex; justify-content:space-between; align-items:center; }
select { font:inherit; font-size:12px; }
#gauge-text { text-align:center; color:var(--muted); font-size:12px; }
.empty { color:var(--muted); font-style:italic; }
.map-wrap { overflow-x:auto; }
#group-map { width:auto; border-collapse:separate; border-spacing:2px; font-size:11px; }
#group-map th, #group-map td { border:0; padding:0 2px; }
#group-map th.topic { text-align:center; color:var(--fg); border-bottom:2px solid var(--line); }
#group-map th.pnum { text-align:center; min-width:30px; }
#group-map th.member { text-align:left; padding-right:10px; white-space:nowrap; color:var(--fg); font-weight:500;
                       max-width:260px; overflow:hidden; text-overflow:ellipsis; }
#group-map tr[data-self="true"] th.member { color:var(--accent); font-weight:700; }
#group-map tr[data-self="true"] th.member::before { content:"\25B6  "; }
#group-map tr[data-self="true"] td.group-cell { box-shadow:inset 0 0 0 1px var(--accent); }
#group-map td.group-cell { min-width:30px; height:20px; text-align:center; border-radius:3px; background:var(--bg);
                           font-variant-numeric:tabular-nums; }
#group-map td.group-cell[data-owned="true"] { color:#fff; font-weight:600; }
#group-map td.note { color:var(--muted); white-space:nowrap; padding-left:8px; }
#group-map td.note.bad { color:var(--bad); }
#group-error { color:var(--bad); font-size:13px; margin-bottom:6px; }
#group-error:empty { display:none; }
@media (max-width: 800px) { main { grid-template-columns:1fr; } }
)kgroup";

// GET /dashboard.js begins with these helpers on both pages (a consumer's and a share member's).
constexpr std::string_view common_script = R"kgroup("use strict";
const SVGNS = "http://www.w3.org/2000/svg";
const $ = (id) => document.getElementById(id);
const pname = (p) => p.topic + "-" + p.partition;
function el(tag, attrs, text) {
  const e = document.createElementNS(SVGNS, tag);
  for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}
function h(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}
function fmtDur(ms) {
  if (ms === null || ms === undefined || ms < 0) return "–";
  if (ms < 1000) return Math.round(ms) + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
  const s = Math.round(ms / 1000);
  return Math.floor(s / 60) + "m " + (s % 60) + "s";
}
const fmtNum = (v, d) => (v === null || v === undefined) ? "–" : Number(v).toFixed(d || 0);
const fmtTime = (ms) => new Date(ms).toLocaleTimeString([], { hour12: false });
const byPartition = (a, b) => {
  const i = a.lastIndexOf("-"), j = b.lastIndexOf("-");
  const ta = a.slice(0, i), tb = b.slice(0, j);
  return ta < tb ? -1 : ta > tb ? 1 : Number(a.slice(i + 1)) - Number(b.slice(j + 1));
};
)kgroup";

// The consumer page's own script, after common_script.
constexpr std::string_view script = R"kgroup(
const CAUSE_COLORS = { "member joined":"#2f6fde", "member left":"#8e5bd8", "group rebalancing":"#3a9fb0",
  "poll timeout":"#d6453d", "session timeout":"#d6453d", "metadata change":"#d99a1e",
  "subscription change":"#b0762f", "enforce_rebalance":"#5a6b85", "cooperative round":"#2e9e5b", "error":"#d6453d" };
// KIP-848 (protocol "consumer"): a member reconciles to a target assignment at a member epoch;
// the classic protocol rebalances to a generation. The page uses the words of the member's protocol.
let WORDS = { rebalance: "rebalance", Rebalances: "Rebalances", generation: "generation" };
function setWords(protocol) {
  WORDS = protocol === "consumer"
    ? { rebalance: "reconciliation", Rebalances: "Reconciliations", generation: "epoch" }
    : { rebalance: "rebalance", Rebalances: "Rebalances", generation: "generation" };
  $("rebalances-title").textContent = WORDS.Rebalances + " (newest first)";
  $("generation-column").textContent = WORDS.generation;
}
const seen = new Map();  // start_ms -> rebalance: every one this page has seen
const lastOwned = new Map(); // partition name -> last snapshot time it was owned
let originMs = null, last = null;

// Ownership intervals per partition, rebuilt from the rebalance history (revoked and lost end a
// bar at the rebalance start, assigned starts one at its end) and the current assignment.
function ownership(s, rebs) {
  const now = s.timestamp_ms, bars = new Map(), open = new Map();
  const add = (n, a, b) => { if (!bars.has(n)) bars.set(n, []); bars.get(n).push([a, b]); };
  for (const r of rebs) {
    for (const p of r.revoked.concat(r.lost)) {
      const n = pname(p);
      add(n, open.has(n) ? open.get(n) : originMs, r.start_ms);
      open.delete(n);
    }
    if (r.duration_ms >= 0) {
      for (const p of r.assigned) { const n = pname(p); if (!open.has(n)) open.set(n, r.start_ms + r.duration_ms); }
    }
  }
  const current = new Set(s.assignment.map(pname));
  for (const n of current) {
    if (!open.has(n)) {
      const prev = bars.get(n);
      open.set(n, prev ? prev[prev.length - 1][1] : originMs);
    }
  }
  for (const [n, a] of open) add(n, a, current.has(n) ? now : Math.max(a, lastOwned.get(n) || a));
  return { bars, current };
}

function drawTimeline(s, rebs) {
  const svg = $("timeline");
  const width = Math.max(svg.clientWidth || svg.parentNode.clientWidth || 600, 320);
  const { bars, current } = ownership(s, rebs);
  const names = Array.from(new Set([...bars.keys(), ...current])).sort(byPartition);
  const now = s.timestamp_ms, win = Number($("window").value);
  let t0 = win > 0 ? now - win : originMs;
  if (!(now - t0 > 1000)) t0 = now - 60000;
  const span = now - t0, pad = span * 0.02;
  const labelW = Math.min(170, 14 + 7 * Math.max(8, ...names.map((n) => n.length)));
  const lanes = [], laneH = 15, rowH = 22;
  const top0 = 18, x = (t) => labelW + (Math.max(t, t0 - pad) - (t0 - pad)) / (span + pad) * (width - labelW - 10);

  // Marker labels take the first lane where they do not overlap the previous label.
  const visible = rebs.filter((r) => (r.duration_ms >= 0 ? r.start_ms + r.duration_ms : now) >= t0 - pad);
  // Labels near the right edge are drawn to the left of their marker.
  const placed = visible.map((r) => {
    const cx = x(r.start_ms), w = 6.2 * r.cause.length + 8, left = cx + w > width - 10;
    const from = left ? cx - w : cx;
    let lane = lanes.findIndex((end) => end < from);
    if (lane < 0) { lane = lanes.length < 4 ? lanes.length : lanes.indexOf(Math.min(...lanes)); }
    lanes[lane] = from + w;
    return { r, cx, lane, left };
  });
  const top = top0 + Math.max(1, lanes.length) * laneH;
  const height = top + Math.max(1, names.length) * rowH + 24;
  svg.setAttribute("viewBox", "0 0 " + width + " " + height);
  svg.setAttribute("height", height);
  svg.replaceChildren();

  const rows = el("g", { class: "rows" });
  names.forEach((n, i) => {
    const y = top + i * rowH;
    const g = el("g", { class: "partition-row", "data-partition": n, "data-owned": current.has(n) ? "true" : "false" });
    g.appendChild(el("line", { class: "axis", x1: labelW, x2: width - 10, y1: y + rowH - 1, y2: y + rowH - 1 }));
    g.appendChild(el("text", { class: "row-label" + (current.has(n) ? "" : " gone"), x: 4, y: y + 15 }, n));
    const hue = [...n.slice(0, n.lastIndexOf("-"))].reduce((a, c) => (a * 31 + c.charCodeAt(0)) % 360, 200);
    for (const [a, b] of bars.get(n) || []) {
      if (b < t0 - pad) continue;
      const x1 = x(a), x2 = Math.max(x(b), x1 + 2);
      const bar = el("rect", { class: "own-bar", x: x1, y: y + 4, width: x2 - x1, height: rowH - 8, rx: 3,
                               fill: "hsl(" + hue + ",55%," + (current.has(n) ? "55%" : "72%") + ")" });
      bar.appendChild(el("title", {}, n + ": owned " + fmtTime(a) + " – " + (b >= now && current.has(n) ? "now" : fmtTime(b))));
      g.appendChild(bar);
    }
    rows.appendChild(g);
  });
  if (!names.length) rows.appendChild(el("text", { class: "muted", x: labelW, y: top + 15 }, "no partitions owned yet"));
  svg.appendChild(rows);

  const axisY = top + Math.max(1, names.length) * rowH;
  for (let k = 0; k <= 5; ++k) {
    const t = t0 + span * k / 5, tx = x(t);
    svg.appendChild(el("line", { class: "axis", x1: tx, x2: tx, y1: top, y2: axisY + 4 }));
    svg.appendChild(el("text", { class: "muted", x: tx, y: axisY + 16, "text-anchor": k === 5 ? "end" : "middle" },
                       k === 5 ? "now" : fmtTime(t)));
  }

  for (const { r, cx, lane, left } of placed) {
    const color = CAUSE_COLORS[r.cause] || "#5a6b85";
    const end = r.duration_ms >= 0 ? r.start_ms + r.duration_ms : now;
    const g = el("g", { class: "rebalance-marker", "data-cause": r.cause, "data-start": r.start_ms });
    g.appendChild(el("rect", { x: cx, y: top, width: Math.max(x(end) - cx, 2), height: axisY - top,
                               fill: color, "fill-opacity": r.completed ? 0.18 : 0.3 }));
    g.appendChild(el("line", { x1: cx, x2: cx, y1: top0 + lane * laneH + 3, y2: axisY, stroke: color, "stroke-width": 1.5 }));
    const label = el("text", { x: left ? cx - 3 : cx + 3, y: top0 + lane * laneH, "font-weight": 600,
                               "text-anchor": left ? "end" : "start" }, r.cause);
    label.style.fill = color;  // through the CSSOM: a style attribute would need 'unsafe-inline'
    g.appendChild(label);
    const list = (ps) => ps.length ? ps.map(pname).join(", ") : "none";
    g.appendChild(el("title", {}, r.cause + (r.detail ? " (" + r.detail + ")" : "") + "\nstarted " + fmtTime(r.start_ms) +
      ", " + (r.duration_ms >= 0 ? "took " + fmtDur(r.duration_ms) : "in progress") + ", " + WORDS.generation + " " + r.generation +
      "\nrevoked: " + list(r.revoked) + "\nassigned: " + list(r.assigned) + "\nlost: " + list(r.lost)));
    svg.appendChild(g);
  }
}

function drawGauge(s) {
  const svg = $("poll-gauge"), max = s.max_poll_interval_ms, tbp = s.time_between_poll;
  const since = tbp.last_poll_seconds_ago >= 0 ? tbp.last_poll_seconds_ago * 1000 : null;
  svg.replaceChildren();
  const cx = 120, cy = 120, r = 92;
  const pt = (f, rr) => [cx - rr * Math.cos(Math.PI * f), cy - rr * Math.sin(Math.PI * f)];
  const arc = (f0, f1, color, w) => {
    const [x0, y0] = pt(f0, r), [x1, y1] = pt(f1, r);
    return el("path", { d: "M" + x0 + " " + y0 + " A" + r + " " + r + " 0 0 1 " + x1 + " " + y1,
                        fill: "none", stroke: color, "stroke-width": w, "stroke-linecap": "butt" });
  };
  const frac = (ms) => max > 0 ? Math.min(Math.max(ms / max, 0), 1) : 0;
  svg.appendChild(arc(0, 1, "var(--line)", 16));
  if (since !== null) {
    const f = frac(since);
    const color = f < 0.5 ? "var(--ok)" : f < 0.8 ? "var(--warn)" : "var(--bad)";
    if (f > 0.002) svg.appendChild(arc(0, f, color, 16));
  }
  // Ticks for the average and the maximum time between polls (their values are in the text below).
  for (const [ms, label, w] of [[tbp.avg_ms, "average", 1.5], [tbp.max_ms, "maximum", 2.5]]) {
    if (!(ms > 0)) continue;
    const f = frac(ms), [x0, y0] = pt(f, r - 11), [x1, y1] = pt(f, r + 11);
    const tick = el("line", { class: "tick", x1: x0, y1: y0, x2: x1, y2: y1, stroke: "var(--fg)", "stroke-width": w });
    tick.appendChild(el("title", {}, label + " time between polls: " + fmtDur(ms)));
    svg.appendChild(tick);
  }
  svg.appendChild(el("text", { x: cx, y: cy - 22, "text-anchor": "middle", "font-size": 22, "font-weight": 600 },
                     since === null ? "–" : fmtDur(since)));
  svg.appendChild(el("text", { x: cx, y: cy - 4, "text-anchor": "middle", class: "muted" },
                     since === null ? "poll() not called yet" : "since last poll()"));
  svg.appendChild(el("text", { x: cx - r, y: cy + 16, "text-anchor": "middle", class: "muted" }, "0"));
  svg.appendChild(el("text", { x: cx + r, y: cy + 16, "text-anchor": "middle", class: "muted" }, fmtDur(max)));
  $("gauge-text").textContent = "avg " + fmtDur(tbp.avg_ms) + " · max " + fmtDur(tbp.max_ms) +
    " · max.poll.interval.ms " + fmtDur(max) + " · idle " + fmtNum(100 * tbp.poll_idle_ratio_avg) + "%";
}

function drawStats(s) {
  const m = s.metrics, stats = $("stats");
  stats.replaceChildren();
  const items = [
    ["partitions", s.assigned_partitions], [WORDS.rebalance + "s", m.rebalance_total],
    ["per hour", fmtNum(m.rebalance_rate_per_hour, 1)], ["failed", m.failed_rebalance_total],
    ["last " + WORDS.rebalance, m.last_rebalance_seconds_ago >= 0 ? fmtDur(1000 * m.last_rebalance_seconds_ago) + " ago" : "none"],
    [WORDS.rebalance + " avg / max", fmtDur(m.rebalance_latency_avg_ms) + " / " + fmtDur(m.rebalance_latency_max_ms)],
    ["records/s", fmtNum(m.records_consumed_rate, 1)], ["records", m.records_consumed_total],
    ["lag max", m.records_lag_max >= 0 ? m.records_lag_max : "–"],
    ["commit avg", fmtDur(m.commit_latency_avg_ms)],
    ["last heartbeat", m.last_heartbeat_seconds_ago >= 0 ? fmtDur(1000 * m.last_heartbeat_seconds_ago) + " ago" : "none"],
  ];
  for (const [k, v] of items) {
    const d = h("div", undefined, "stat");
    d.appendChild(h("span", k));
    d.appendChild(h("b", String(v)));
    stats.appendChild(d);
  }
}

function drawTables(s, rebs) {
  const tb = $("partitions");
  tb.replaceChildren();
  for (const p of s.assignment) {
    const tr = h("tr");
    tr.appendChild(h("td", pname(p)));
    for (const v of [p.position, p.committed, p.high_watermark, p.lag]) tr.appendChild(h("td", v >= 0 ? String(v) : "–", "num"));
    tr.appendChild(h("td", p.paused ? "paused" : ""));
    tb.appendChild(tr);
  }
  if (!s.assignment.length) { const tr = h("tr"); const td = h("td", "no partitions", "empty"); td.colSpan = 6; tr.appendChild(td); tb.appendChild(tr); }
  const rb = $("rebalances");
  rb.replaceChildren();
  const list = (ps) => ps.map(pname).join(", ");
  for (const r of rebs.slice().reverse()) {
    const tr = h("tr");
    tr.appendChild(h("td", fmtTime(r.start_ms)));
    const c = h("td", r.cause); c.style.color = CAUSE_COLORS[r.cause] || ""; tr.appendChild(c);
    tr.appendChild(h("td", r.detail));
    tr.appendChild(h("td", String(r.generation), "num"));
    tr.appendChild(h("td", r.duration_ms >= 0 ? fmtDur(r.duration_ms) : (r.completed ? "–" : "in progress"), "num"));
    tr.appendChild(h("td", list(r.revoked)));
    tr.appendChild(h("td", list(r.assigned)));
    tr.appendChild(h("td", list(r.lost)));
    rb.appendChild(tr);
  }
  if (!rebs.length) { const tr = h("tr"); const td = h("td", "none yet", "empty"); td.colSpan = 8; tr.appendChild(td); rb.appendChild(tr); }
}

function render(s) {
  setWords(s.protocol);
  for (const r of s.rebalances) seen.set(String(r.start_ms), r);  // the cause may still be refined
  while (seen.size > 1000) seen.delete(seen.keys().next().value);
  for (const p of s.assignment) lastOwned.set(pname(p), s.timestamp_ms);
  const rebs = Array.from(seen.values()).sort((a, b) => a.start_ms - b.start_ms);
  if (originMs === null) originMs = s.timestamp_ms;
  if (rebs.length) originMs = Math.min(originMs, rebs[0].start_ms);
  $("group").textContent = s.group || "(no group)";
  document.title = "kgroup · " + (s.group || s.client_id);
  const ident = $("ident");
  ident.replaceChildren();
  const parts = [["client", s.client_id], ["member", s.member_id || "–"], ["instance", s.instance_id],
    [WORDS.generation, s.generation], ["state", s.state], ["coordinator", s.coordinator >= 0 ? s.coordinator : "–"],
    ["protocol", s.protocol], ["assignor", s.assignor || "–"],
    ["leader", s.protocol === "consumer" ? null : s.leader ? "yes" : "no"]];  // KIP-848: the coordinator assigns
  for (const [k, v] of parts) {
    if (v === null || v === undefined || v === "") continue;
    ident.appendChild(document.createTextNode(k + " "));
    ident.appendChild(h("b", String(v)));
    ident.appendChild(document.createTextNode("  "));
  }
  drawStats(s);
  drawTimeline(s, rebs);
  drawGauge(s);
  drawTables(s, rebs);
}

async function refresh() {
  try {
    const res = await fetch("status", { cache: "no-store" });
    if (!res.ok) throw new Error("HTTP " + res.status);
    last = await res.json();
    render(last);
    $("live").textContent = "live · " + fmtTime(last.timestamp_ms);
    $("live").className = "on";
  } catch (e) {
    $("live").textContent = "disconnected (" + e.message + ")";
    $("live").className = "";
  }
}
// ---- the group map: members (rows) x partitions (columns, grouped by topic) ----

const fmtLag = (v) => v === null || v === undefined ? "?" : v < 1000 ? String(v) :
  v < 1e6 ? (v / 1e3).toFixed(v < 1e4 ? 1 : 0) + "k" : (v / 1e6).toFixed(v < 1e7 ? 1 : 0) + "M";
// Colour of an owned cell: green when caught up, amber to red as the lag grows (log scale against
// the largest lag in the group), grey when the lag is unknown.
function lagColor(lag, maxLag) {
  if (lag === null || lag === undefined) return "#8a93a3";
  if (lag === 0) return "hsl(145,50%,40%)";
  const f = maxLag > 0 ? Math.log1p(lag) / Math.log1p(maxLag) : 1;
  return "hsl(" + Math.round(42 - 42 * f) + ",80%," + Math.round(52 - 14 * f) + "%)";
}

function drawGroup(g) {
  const map = $("group-map"), parts = g.partitions || [], members = g.members || [];
  const owned = parts.filter((p) => p.owner !== null);
  const lags = parts.map((p) => p.lag).filter((v) => v !== null);
  const maxLag = lags.length ? Math.max(...lags) : 0;
  const summary = [g.state || "state unknown", g.protocol || null, members.length + " member" + (members.length === 1 ? "" : "s"),
    parts.length + " partition" + (parts.length === 1 ? "" : "s"), lags.length ? "total lag " + lags.reduce((a, b) => a + b, 0) : null,
    g.generation !== null ? "generation " + g.generation : null,
    g.age_ms === null ? (g.refreshing ? "gathering…" : "not gathered yet") : "updated " + fmtDur(g.age_ms) + " ago"];
  $("group-summary").textContent = summary.filter((x) => x !== null).join(" · ");
  $("group-error").textContent = g.error ? "\u26A0 " + g.error : "";
  map.replaceChildren();
  if (!members.length && !parts.length) {
    if (g.age_ms !== null) { const tr = h("tr"); tr.appendChild(h("td", "no members", "empty")); map.appendChild(tr); }
    return;
  }
  const byPart = new Map(parts.map((p) => [pname(p), p]));
  // A line before the first partition of every topic but the first keeps the topics apart.
  const topicStart = new Set(parts.filter((p, i) => i > 0 && parts[i - 1].topic !== p.topic).map(pname));
  // Columns: every partition of the view, grouped by topic (the server sends them sorted).
  const thead = h("thead"), topics = h("tr"), nums = h("tr");
  topics.appendChild(h("th"));
  nums.appendChild(h("th", "member", "member"));
  let prev = null, span = null;
  for (const p of parts) {
    if (p.topic !== prev) {
      span = h("th", p.topic, "topic");
      span.colSpan = 0;
      if (prev !== null) span.style.borderLeft = "2px solid var(--muted)";
      topics.appendChild(span);
      prev = p.topic;
    }
    span.colSpan += 1;
    const th = h("th", String(p.partition), "pnum");
    th.setAttribute("data-partition", pname(p));
    if (topicStart.has(pname(p))) th.style.borderLeft = "2px solid var(--muted)";
    nums.appendChild(th);
  }
  thead.appendChild(topics);
  thead.appendChild(nums);
  map.appendChild(thead);
  const tbody = h("tbody");
  const row = (id, label, title, self) => {
    const tr = h("tr", undefined, "group-member");
    tr.setAttribute("data-member", id);
    tr.setAttribute("data-self", self ? "true" : "false");
    const th = h("th", label, "member");
    th.title = title;
    tr.appendChild(th);
    return tr;
  };
  const cell = (tr, p, mine, ownerLabel) => {
    const td = h("td", mine ? fmtLag(p.lag) : "", "group-cell");
    td.setAttribute("data-partition", pname(p));
    td.setAttribute("data-owned", mine ? "true" : "false");
    if (topicStart.has(pname(p))) td.style.borderLeft = "2px solid var(--muted)";
    if (mine) {
      td.style.background = lagColor(p.lag, maxLag);
      td.title = pname(p) + " · " + ownerLabel + "\ncommitted " + (p.committed ?? "none") + " · end " +
        (p.end_offset ?? "?") + " · lag " + (p.lag ?? "unknown");
    }
    tr.appendChild(td);
  };
  for (const m of members) {
    const label = (m.client_id || "?") + " · " + m.member_id.slice(-6);
    const title = "member " + m.member_id + "\nclient " + m.client_id + "\nhost " + m.host +
      (m.instance_id ? "\ninstance " + m.instance_id : "") + (m.error ? "\n" + m.error : "");
    const tr = row(m.member_id, label, title, m.member_id === g.member_id && g.member_id !== "");
    const mine = new Set(m.partitions.map(pname));
    for (const p of parts) cell(tr, p, mine.has(pname(p)) && p.owner === m.member_id, m.client_id || m.member_id);
    let lag = 0, known = false;
    for (const n of mine) { const p = byPart.get(n); if (p && p.lag !== null) { lag += p.lag; known = true; } }
    const note = m.error ? h("td", "\u26A0 " + m.error, "note bad")
                         : h("td", m.partitions.length + " partition" + (m.partitions.length === 1 ? "" : "s") + (known ? " · lag " + lag : ""), "note");
    tr.appendChild(note);
    tbody.appendChild(tr);
  }
  if (owned.length < parts.length) {
    const tr = row("", "no owner", "partitions of the subscribed topics that no member owns", false);
    for (const p of parts) cell(tr, p, p.owner === null, "no owner");
    tr.appendChild(h("td", (parts.length - owned.length) + " unowned", "note bad"));
    tbody.appendChild(tr);
  }
  map.appendChild(tbody);
}

async function refreshGroup() {
  try {
    const res = await fetch("group", { cache: "no-store" });
    if (res.status === 404) { $("group-card").style.display = "none"; return null; }  // no group view here
    if (!res.ok) throw new Error("HTTP " + res.status);
    const g = await res.json();
    drawGroup(g);
    // The first request after a quiet spell starts the gathering: ask again soon (unless it
    // failed: then the regular pace is enough to see it recover).
    return g.age_ms === null && !g.error;
  } catch (e) {
    $("group-summary").textContent = "group view unavailable (" + e.message + ")";
    return false;
  }
}
async function pollGroup() {
  const again = await refreshGroup();
  if (again !== null) setTimeout(pollGroup, again ? 300 : 2000);
}

$("window").addEventListener("change", () => last && render(last));
window.addEventListener("resize", () => last && render(last));
refresh();
setInterval(refresh, 1000);
pollGroup();
)kgroup";

// ---- a share member's page (ShareConsumer): GET / and GET /dashboard.js of its endpoint ----
//
// Stable hooks: every figure is `div.stat[data-stat="<key of /status's metrics>"]`; the rate chart
// `svg#share-rates` draws one `g.rate-series[data-series="<name>"]` per counter with its name as
// the legend's text; the acknowledgement mix is `svg#ack-mix` with one
// `rect.ack-part[data-type="accept|release|reject|failed"]` per type seen; the assignment is
// `tbody#share-partitions` and the share sessions `tbody#share-sessions` (a row per broker).

// The share page's body, between page_head and page_foot.
constexpr std::string_view share_page = R"kgroup(</header>
<main>
  <section class="card wide"><div class="stats" id="stats"></div></section>
  <section class="card">
    <div class="tl-head"><h2>Records per second</h2>
      <label class="ident">window
        <select id="window">
          <option value="900000">15 min</option><option value="300000" selected>5 min</option>
          <option value="60000">1 min</option>
        </select></label></div>
    <svg id="share-rates" width="100%" height="180" role="img" aria-label="records per second"></svg>
  </section>
  <section class="card">
    <h2>Acknowledgements</h2>
    <svg id="ack-mix" viewBox="0 0 240 60" width="100%" role="img" aria-label="acknowledgements by type"></svg>
    <div id="ack-text" class="ident"></div>
  </section>
  <section class="card">
    <h2>Assignment</h2>
    <table><thead><tr><th>partition</th></tr></thead><tbody id="share-partitions"></tbody></table>
  </section>
  <section class="card">
    <h2>Share sessions</h2>
    <table><thead><tr><th>broker</th><th class="num">next epoch</th></tr></thead>
      <tbody id="share-sessions"></tbody></table>
  </section>
)kgroup";

// The share page's own script, after common_script. The rates are the differences between two
// /status answers over the browser's clock (a share member's /status has no timestamp); the page
// keeps 15 minutes of them.
constexpr std::string_view share_script = R"kgroup(
const SERIES = [
  ["delivered", "records_delivered_total", "#2f6fde"], ["redelivered", "records_redelivered_total", "#d99a1e"],
  ["accepted", "acknowledged_accept_total", "#2e9e5b"], ["released", "acknowledged_release_total", "#8e5bd8"],
  ["rejected", "acknowledged_reject_total", "#d6453d"], ["lock expired", "acknowledgements_lock_expired_total", "#b0762f"]];
const ACK_TYPES = [["accept", "acknowledged_accept_total", "#2e9e5b"], ["release", "acknowledged_release_total", "#8e5bd8"],
  ["reject", "acknowledged_reject_total", "#d6453d"], ["failed", "acknowledgements_failed_total", "#5a6b85"]];
const samples = [];  // [browser time ms, metrics]
let last = null;

function drawStats(s) {
  const m = s.metrics, stats = $("stats");
  stats.replaceChildren();
  const items = [
    ["partitions", null, s.assigned_partitions], ["delivered", "records_delivered_total"],
    ["redelivered", "records_redelivered_total"], ["accepted", "acknowledged_accept_total"],
    ["released", "acknowledged_release_total"], ["rejected", "acknowledged_reject_total"],
    ["acks failed", "acknowledgements_failed_total"], ["lock expired", "acknowledgements_lock_expired_total"],
    ["gaps", "gaps_acknowledged_total"], ["ShareFetch", "share_fetch_requests_total"],
    ["ShareAcknowledge", "share_acknowledge_requests_total"], ["session resets", "session_resets_total"],
    ["rebootstraps", "rebootstraps_total"]];
  for (const [label, key, value] of items) {
    const d = h("div", undefined, "stat");
    d.dataset.stat = key || "assigned_partitions";
    d.appendChild(h("span", label));
    d.appendChild(h("b", String(key ? fmtNum(m[key]) : value)));
    stats.appendChild(d);
  }
}

// Per series, one point per pair of consecutive samples: the counter's increase over the time between.
function drawRates() {
  const svg = $("share-rates");
  const width = Math.max(svg.clientWidth || svg.parentNode.clientWidth || 600, 320), height = 180;
  const now = samples.length ? samples[samples.length - 1][0] : Date.now();
  const t0 = now - Number($("window").value);
  const left = 44, right = width - 100, top = 10, bottom = height - 22;
  const series = SERIES.map(([name, key, color]) => {
    const pts = [];
    for (let i = 1; i < samples.length; ++i) {
      const [ta, a] = samples[i - 1], [tb, b] = samples[i];
      if (tb < t0 || tb <= ta) continue;
      pts.push([tb, Math.max(0, (b[key] - a[key]) * 1000 / (tb - ta))]);
    }
    return { name, color, pts };
  });
  const peak = Math.max(1, ...series.flatMap((s) => s.pts.map((p) => p[1])));
  const x = (t) => left + (t - t0) / Math.max(1, now - t0) * (right - left);
  const y = (v) => bottom - v / peak * (bottom - top);
  svg.setAttribute("viewBox", "0 0 " + width + " " + height);
  svg.replaceChildren();
  svg.appendChild(el("line", { class: "axis", x1: left, x2: right, y1: bottom, y2: bottom }));
  svg.appendChild(el("line", { class: "axis", x1: left, x2: left, y1: top, y2: bottom }));
  svg.appendChild(el("text", { class: "muted", x: left - 4, y: top + 8, "text-anchor": "end" }, fmtNum(peak, peak < 10 ? 1 : 0)));
  svg.appendChild(el("text", { class: "muted", x: left - 4, y: bottom, "text-anchor": "end" }, "0"));
  svg.appendChild(el("text", { class: "muted", x: left, y: height - 6 }, fmtTime(t0)));
  svg.appendChild(el("text", { class: "muted", x: right, y: height - 6, "text-anchor": "end" }, fmtTime(now)));
  series.forEach((s, i) => {
    const g = el("g", { class: "rate-series", "data-series": s.name });
    if (s.pts.length) {
      g.appendChild(el("polyline", { fill: "none", stroke: s.color, "stroke-width": 1.8,
                                     points: s.pts.map(([t, v]) => x(t).toFixed(1) + "," + y(v).toFixed(1)).join(" ") }));
    }
    const ly = top + 4 + i * 16, latest = s.pts.length ? s.pts[s.pts.length - 1][1] : 0;
    g.appendChild(el("rect", { x: right + 8, y: ly, width: 10, height: 10, rx: 2, fill: s.color }));
    const label = el("text", { x: right + 22, y: ly + 9 }, s.name);
    label.appendChild(el("title", {}, s.name + ": " + fmtNum(latest, 1) + " records/s now"));
    g.appendChild(label);
    svg.appendChild(g);
  });
  if (samples.length < 2) {
    svg.appendChild(el("text", { class: "muted", x: left + 8, y: top + 20 }, "gathering…"));
  }
}

function drawAckMix(m) {
  const svg = $("ack-mix");
  svg.replaceChildren();
  const parts = ACK_TYPES.map(([type, key, color]) => [type, m[key] || 0, color]);
  const total = parts.reduce((a, p) => a + p[1], 0);
  let x = 0;
  for (const [type, n, color] of parts) {
    if (!n) continue;
    const w = 240 * n / total;
    const r = el("rect", { class: "ack-part", "data-type": type, x, y: 8, width: Math.max(w, 1), height: 22, fill: color });
    r.appendChild(el("title", {}, type + ": " + n + " (" + fmtNum(100 * n / total, 1) + "%)"));
    svg.appendChild(r);
    x += w;
  }
  if (!total) svg.appendChild(el("text", { class: "muted", x: 0, y: 24 }, "none yet"));
  $("ack-text").textContent = parts.map(([type, n]) => type + " " + n).join(" · ");
}

function drawTables(s) {
  const rows = (id, list, cells, empty) => {
    const tb = $(id);
    tb.replaceChildren();
    for (const item of list) {
      const tr = h("tr");
      for (const [text, cls] of cells(item)) tr.appendChild(h("td", text, cls));
      tb.appendChild(tr);
    }
    if (!list.length) { const tr = h("tr"); const td = h("td", empty, "empty"); td.colSpan = 2; tr.appendChild(td); tb.appendChild(tr); }
  };
  rows("share-partitions", s.assignment.map(pname).sort(byPartition), (n) => [[n]], "no partitions");
  rows("share-sessions", s.session_epochs, (e) => [[String(e.broker)], [String(e.epoch), "num"]], "no share session yet");
}

function render(s) {
  $("group").textContent = s.group || "(no group)";
  document.title = "kgroup share · " + (s.group || s.client_id);
  const ident = $("ident");
  ident.replaceChildren();
  for (const [k, v] of [["client", s.client_id], ["member", s.member_id || "–"], ["epoch", s.member_epoch], ["state", s.state]]) {
    if (v === null || v === undefined || v === "") continue;
    ident.appendChild(document.createTextNode(k + " "));
    ident.appendChild(h("b", String(v)));
    ident.appendChild(document.createTextNode("  "));
  }
  drawStats(s);
  drawRates();
  drawAckMix(s.metrics);
  drawTables(s);
}

async function refresh() {
  try {
    const res = await fetch("status", { cache: "no-store" });
    if (!res.ok) throw new Error("HTTP " + res.status);
    last = await res.json();
    const now = Date.now();
    samples.push([now, last.metrics]);
    while (samples.length > 2 && samples[0][0] < now - 900000) samples.shift();
    render(last);
    $("live").textContent = "live · " + fmtTime(now);
    $("live").className = "on";
  } catch (e) {
    $("live").textContent = "disconnected (" + e.message + ")";
    $("live").className = "";
  }
}

$("window").addEventListener("change", () => last && render(last));
window.addEventListener("resize", () => last && render(last));
refresh();
setInterval(refresh, 1000);
)kgroup";

}  // namespace

const std::string& dashboard_html() {
  static const std::string whole =
      page_head("kgroup consumer", "kgroup") + std::string(page) + std::string(page_foot);
  return whole;
}
const std::string& dashboard_script() {
  static const std::string whole = std::string(common_script) + std::string(script);
  return whole;
}
std::string_view dashboard_style() { return style; }
const std::string& share_dashboard_html() {
  static const std::string whole =
      page_head("kgroup share member", "kgroup share") + std::string(share_page) + std::string(page_foot);
  return whole;
}
const std::string& share_dashboard_script() {
  static const std::string whole = std::string(common_script) + std::string(share_script);
  return whole;
}

}  // namespace kgroup::http
