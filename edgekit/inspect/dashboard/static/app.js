// edgekit dashboard: reads the JSON API once a second and the live view at the server's rate.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { frameVersion: -1, parts: 0, events: 0, maxFps: 5, online: false };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function text(id, value) {
  const el = $(id);
  const s = value === null || value === undefined ? "-" : String(value);
  if (el && el.textContent !== s) el.textContent = s;
}

function el(tag, cls, content) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (content !== undefined) e.textContent = content;
  return e;
}

async function getJSON(url) {
  const r = await fetch(url, { cache: "no-store", credentials: "same-origin" });
  if (r.status === 401) { location.reload(); throw new Error("token required"); }
  if (!r.ok) throw new Error(url + ": " + r.status);
  return r.json();
}

function when(ts) {
  return new Date(ts * 1000).toLocaleTimeString();
}

function showStatus(s) {
  document.title = s.title + " - edgekit";
  document.body.dataset.mode = s.mode;
  text("title", s.title);
  text("model", s.model ? (s.model.version || s.model.file) : "-");
  const loop = s.loop;
  const health = $("health");
  const st = loop.running ? "running" : (loop.processed ? "stopped" : "waiting");
  health.dataset.state = st;
  text("health", st);
  text("fps", loop.fps.toFixed(1));
  text("lat-p50", loop.latency_ms.p50);
  text("lat-p99", loop.latency_ms.p99);
  text("processed", loop.processed);
  text("dropped", loop.dropped);
  text("viewers", s.viewers);
  state.maxFps = s.max_fps || 5;
  $("trigger").hidden = !s.trigger;
  const c = s.mode === "frames" ? s.frame_counters : s.counters;
  text("counter-kind", s.mode === "frames" ? "(frames)" : s.mode === "parts" ? "(parts)" : "");
  text("shift-label", c.shift.label);
  text("count-shift-pass", c.shift.PASS);
  text("count-shift-fail", c.shift.FAIL);
  text("count-shift-total", c.shift.total);
  text("count-start-pass", c.since_start.PASS);
  text("count-start-fail", c.since_start.FAIL);
  text("count-start-total", c.since_start.total);
  const reasons = $("reasons");
  const rows = Object.keys(c.since_start.reasons).map((r) => {
    const tr = el("tr", "reason");
    tr.dataset.reason = r;
    tr.append(el("th", "", r), el("td", "", c.shift.reasons[r] || 0), el("td", "", c.since_start.reasons[r]));
    return tr;
  });
  reasons.replaceChildren(...rows);
  const sinks = (s.sinks || []).map((k) => k.name + (k.queued === null || k.queued === undefined ? "" : " (" + k.queued + " queued)"));
  text("sinks", sinks.length ? sinks.join(", ") + (s.sink_errors ? "; " + s.sink_errors + " errors" : "") : "none");
  const plc = s.plc || { state: "none" };
  text("plc", plc.state === "none" ? "none" : plc.state + ": " + (plc.outputs || []).join(", ") + "; written " +
    (plc.written || 0) + ", retries " + (plc.retry || 0) + ", failed " + (plc.failed || 0) +
    (plc.last_error ? "; " + plc.last_error : ""));
  text("clock", new Date().toLocaleTimeString());
}

function showLastPart(p) {
  $("last-card").dataset.verdict = p.verdict;
  text("last-verdict", p.verdict);
  text("last-part", p.part);
  text("last-reasons", p.reasons && p.reasons.length ? p.reasons.join(", ") : "");
  text("last-detail", "track " + p.track_id + ", seen in " + p.frames_seen + " frames, crossed at " + when(p.crossed_at));
  const crop = $("last-crop");
  if (p.verdict === "FAIL" && p.crop_url) { crop.src = p.crop_url; crop.hidden = false; } else { crop.hidden = true; }
}

function partItem(p) {
  const li = el("li");
  li.dataset.part = p.part;
  li.append(el("b", "", "#" + p.part), el("span", "v-" + p.verdict, p.verdict),
    el("span", "", (p.reasons || []).join(", ")), el("span", "muted", when(p.crossed_at)));
  if (p.verdict === "FAIL" && p.crop_url) {
    const img = el("img");
    img.src = p.crop_url;
    img.alt = "part " + p.part;
    li.append(img);
  }
  return li;
}

function eventItem(e) {
  const li = el("li");
  li.dataset.seq = e.seq;
  const p = e.payload || {};
  const what = p.verdict ? p.verdict + (p.part ? " part " + p.part : "") + (p.reasons && p.reasons.length ? " (" + p.reasons.join(", ") + ")" : "")
    : p.state || p.result || p.to || "";
  li.append(el("span", "muted", when(e.timestamp)), el("b", "", e.kind), el("span", "", what));
  return li;
}

function prepend(list, items, keep) {
  for (const item of items) list.prepend(item);
  while (list.children.length > keep) list.lastElementChild.remove();
}

async function pollData() {
  for (;;) {
    try {
      const s = await getJSON("/api/status");
      showStatus(s);
      const parts = await getJSON("/api/parts?since=" + state.parts);
      if (parts.parts.length) {
        prepend($("parts"), parts.parts.map(partItem), 50);
        showLastPart(parts.parts[parts.parts.length - 1]);
        state.parts = parts.parts[parts.parts.length - 1].part;
      }
      const events = await getJSON("/api/events?since=" + state.events);
      if (events.events.length) {
        prepend($("events"), events.events.map(eventItem), 50);
        state.events = events.events[events.events.length - 1].seq;
      }
    } catch (err) {
      $("health").dataset.state = "offline";
      text("health", "offline");
    }
    await sleep(1000);
  }
}

async function pollFrames() {
  const img = $("live");
  let shown = null;
  for (;;) {
    const t0 = performance.now();
    if (document.hidden) { await sleep(500); continue; }
    try {
      const r = await fetch("/api/frame.jpg?after=" + state.frameVersion, { cache: "no-store", credentials: "same-origin" });
      if (r.status === 200) {
        const blob = await r.blob();
        const url = URL.createObjectURL(blob);
        await new Promise((resolve) => { img.onload = resolve; img.onerror = resolve; img.src = url; });
        if (shown) URL.revokeObjectURL(shown);
        shown = url;
        state.frameVersion = Number(r.headers.get("X-Edgekit-Version"));
        img.dataset.frame = r.headers.get("X-Edgekit-Frame");
        text("frame-index", img.dataset.frame);
      } else if (r.status === 401) {
        location.reload();
        return;
      }
    } catch (err) {
      await sleep(1000);
    }
    await sleep(Math.max(0, 1000 / state.maxFps - (performance.now() - t0)));
  }
}

function setupTrigger() {
  $("trigger").addEventListener("click", async () => {
    const r = await fetch("/api/trigger", { method: "POST", credentials: "same-origin" });
    $("trigger").textContent = r.ok ? "Triggered" : "Refused";
    setTimeout(() => { $("trigger").textContent = "Trigger"; }, 1500);
  });
}

setupTrigger();
pollData();
pollFrames();
