// The k25 chat page: streams answers from /v1/chat/completions (server-sent events read with
// fetch + ReadableStream), shows each answer's compute plan and timings (the `flash` and
// `timings` fields k25 adds to the chunk with the finish reason) and polls /metrics.
"use strict";

const $ = (id) => document.getElementById(id);
const METRICS_INTERVAL_MS = 1000;

const state = {
  history: [],        // {role, content} of the finished turns
  controller: null,   // AbortController of the answer being streamed
  apiKey: localStorage.getItem("k25.apiKey") || "",
  model: "k25",
  lastTokens: null,   // {count, at}: k25_completion_tokens_total at the previous poll
};

function headers() {
  const h = { "Content-Type": "application/json" };
  if (state.apiKey) h.Authorization = `Bearer ${state.apiKey}`;
  return h;
}

function setStatus(ok, text) {
  $("status").dataset.state = ok ? "ok" : "error";
  $("status").textContent = text;
}

// A 401 shows the key field; the next request uses whatever is typed there.
function needKey() {
  $("key-field").hidden = false;
  $("key-field").classList.toggle("needed", true);
  setStatus(false, "API key needed");
}

async function errorText(response) {
  const body = await response.text();
  try {
    return JSON.parse(body).error.message;
  } catch {
    return `${response.status} ${body.slice(0, 200)}`;
  }
}

// ---- the conversation ----

function addMessage(role, text) {
  $("empty").hidden = true;
  const box = document.createElement("div");
  box.className = `msg ${role}`;
  const label = document.createElement("div");
  label.className = "role";
  label.textContent = role === "user" ? "you" : state.model;
  const body = document.createElement("div");
  body.className = "text";
  body.textContent = text;
  box.append(label, body);
  $("messages").append(box);
  scrollDown();
  return box;
}

function scrollDown() {
  const m = $("messages");
  m.scrollTop = m.scrollHeight;
}

function chip(label, value, title) {
  const c = document.createElement("span");
  c.className = "chip";
  c.title = title || "";
  c.append(`${label} `);
  const b = document.createElement("b");
  b.textContent = value;
  c.append(b);
  return c;
}

function fmt(x, digits) {
  return Number.isFinite(x) ? x.toFixed(digits) : "—";
}

// Plan and timings under an answer. `timings` and `flash` come from the server; tok/s is the
// decode rate (tokens after the first over the time after the first).
function showMeta(box, summary) {
  const meta = document.createElement("div");
  meta.className = "meta";
  const { flash, timings, usage, finish } = summary;
  if (flash) {
    box.dataset.plan = flash.plan;
    const plan = flash.adaptive ? `${flash.plan} → ${flash.adaptive.final_plan}` : flash.plan;
    meta.append(chip("plan", plan, `domain ${flash.domain}, skipped blocks ` +
                     `${flash.skipped_blocks.length}, skipped heads ${flash.skipped_heads.length}`));
    meta.append(chip("level", String(flash.level)));
    meta.append(chip("saved", `${fmt(100 * flash.compute_saved, 0)}%`, "compute saved by the plan"));
  }
  if (timings) {
    meta.append(chip("TTFT", `${fmt(timings.ttft_ms, 1)} ms`, "server: submit to first token"));
    const decoded = usage ? usage.completion_tokens - 1 : NaN;
    const decodeMs = timings.total_ms - timings.ttft_ms;
    if (decoded > 0 && decodeMs > 0) {
      meta.append(chip("decode", `${fmt(decoded / (decodeMs / 1000), 1)} tok/s`));
    }
    meta.append(chip("total", `${fmt(timings.total_ms, 0)} ms`));
  }
  if (usage) {
    meta.append(chip("tokens", `${usage.prompt_tokens} → ${usage.completion_tokens}`,
                     `prompt → completion; ${usage.prompt_tokens_details?.cached_tokens ?? 0} ` +
                     "prompt tokens from the prefix cache"));
  }
  if (finish) meta.append(chip("finish", finish));
  box.append(meta);
}

function showError(box, text) {
  const e = document.createElement("div");
  e.className = "error";
  e.textContent = text;
  box.append(e);
}

// Yields the parsed JSON of each `data:` event of an SSE body; stops at [DONE].
async function* sseEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const line of event.split("\n")) {
        if (!line.startsWith("data: ")) continue;
        const data = line.slice(6);
        if (data === "[DONE]") return;
        yield JSON.parse(data);
      }
    }
  }
}

function requestBody() {
  const messages = [];
  const system = $("system-prompt").value.trim();
  if (system) messages.push({ role: "system", content: system });
  messages.push(...state.history);
  return {
    model: state.model,
    messages,
    stream: true,
    stream_options: { include_usage: true },
    temperature: Number($("temperature").value),
    max_tokens: Number($("max-tokens").value),
  };
}

async function send(text) {
  state.history.push({ role: "user", content: text });
  addMessage("user", text);
  const box = addMessage("assistant", "");
  const textNode = box.querySelector(".text");
  box.dataset.state = "streaming";
  state.controller = new AbortController();
  setBusy(true);
  const summary = {};
  let answer = "";
  try {
    const response = await fetch("/v1/chat/completions", {
      method: "POST",
      headers: headers(),
      body: JSON.stringify(requestBody()),
      signal: state.controller.signal,
    });
    if (response.status === 401) needKey();
    if (!response.ok) throw new Error(await errorText(response));
    for await (const chunk of sseEvents(response.body)) {
      if (chunk.error) throw new Error(chunk.error.message);
      const choice = chunk.choices[0];
      const piece = choice?.delta?.content;
      if (piece) {
        answer += piece;
        // Answers often start with a space (after "assistant:"); it is not shown.
        textNode.textContent = answer.trimStart();
        scrollDown();
      }
      if (choice?.finish_reason) summary.finish = choice.finish_reason;
      if (chunk.flash) summary.flash = chunk.flash;
      if (chunk.timings) summary.timings = chunk.timings;
      if (chunk.usage) summary.usage = chunk.usage;
    }
    box.dataset.state = "done";
  } catch (e) {
    if (e.name === "AbortError") {
      box.dataset.state = "stopped";
      summary.finish = "stopped";
    } else {
      box.dataset.state = "error";
      showError(box, e.message);
    }
  }
  // A stopped answer stays in the conversation as far as it got.
  if (answer) state.history.push({ role: "assistant", content: answer });
  else state.history.pop();
  showMeta(box, summary);
  state.controller = null;
  setBusy(false);
}

function setBusy(busy) {
  $("send").disabled = busy;
  $("stop").disabled = !busy;
  $("clear").disabled = busy;
}

// ---- /metrics ----

// Prometheus text format: `name{label="v",...} value` lines; comments start with '#'.
function parseMetrics(text) {
  const out = new Map();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)/);
    if (!m) continue;
    const labels = {};
    for (const l of (m[3] || "").matchAll(/([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[l[1]] = l[2];
    }
    if (!out.has(m[1])) out.set(m[1], []);
    out.get(m[1]).push({ labels, value: Number(m[4]) });
  }
  return out;
}

function metric(metrics, name, labels = {}) {
  const series = metrics.get(name) || [];
  const hit = series.find((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  return hit ? hit.value : NaN;
}

function sum(metrics, name) {
  return (metrics.get(name) || []).reduce((a, s) => a + s.value, 0);
}

function bytes(n) {
  if (!Number.isFinite(n)) return "—";
  const units = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; ++i; }
  return `${n.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}

function showMetrics(m) {
  const set = (key, text) => {
    document.querySelector(`[data-metric="${key}"]`).textContent = text;
  };
  const tokens = metric(m, "k25_completion_tokens_total");
  const now = performance.now();
  if (state.lastTokens) {
    const rate = (tokens - state.lastTokens.count) / ((now - state.lastTokens.at) / 1000);
    set("tok_s", `${fmt(rate, 1)} tok/s`);
  } else {
    set("tok_s", "… tok/s");
  }
  state.lastTokens = { count: tokens, at: now };
  set("running", String(metric(m, "k25_requests_running")));
  set("waiting", String(metric(m, "k25_requests_waiting")));
  set("kv_l2", bytes(metric(m, "k25_kv_cache_bytes_used", { tier: "l2" })));
  const used = metric(m, "k25_kv_pages_used");
  set("kv_pages", `${used} / ${used + metric(m, "k25_kv_pages_free")}`);
  const hitRate = metric(m, "flash_l2_cache_hit_rate");
  set("prefix", `${metric(m, "flash_prefix_cache_pages", { state: "all" })} pages, ` +
                `${fmt(100 * hitRate, 0)}% hit`);
  set("kv_l3", `${metric(m, "flash_l3_pages")} pages`);
  set("requests", String(sum(m, "k25_http_requests_total")));
  $("metrics-age").textContent = new Date().toLocaleTimeString();
}

async function pollMetrics() {
  try {
    const response = await fetch("/metrics", { headers: headers() });
    if (response.status === 401) needKey();
    else if (response.ok) showMetrics(parseMetrics(await response.text()));
  } catch {
    setStatus(false, "server unreachable");
  }
  setTimeout(pollMetrics, METRICS_INTERVAL_MS);
}

// ---- start ----

async function loadModel() {
  try {
    const response = await fetch("/v1/models", { headers: headers() });
    if (response.status === 401) return needKey();
    if (!response.ok) return setStatus(false, await errorText(response));
    const model = (await response.json()).data[0];
    state.model = model.id;
    $("model").textContent = `${model.id} · context ${model.meta?.n_ctx ?? "?"}`;
    $("key-field").classList.toggle("needed", false);
    setStatus(true, "ready");
  } catch {
    setStatus(false, "server unreachable");
  }
}

function start() {
  $("api-key").value = state.apiKey;
  if (state.apiKey) $("key-field").hidden = false;
  $("api-key").addEventListener("change", () => {
    state.apiKey = $("api-key").value.trim();
    localStorage.setItem("k25.apiKey", state.apiKey);
    loadModel();
  });
  $("temperature").addEventListener("input", () => {
    $("temperature-value").textContent = $("temperature").value;
  });
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = $("input").value.trim();
    if (!text || state.controller) return;
    $("input").value = "";
    send(text);
  });
  $("input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("stop").addEventListener("click", () => state.controller?.abort());
  $("clear").addEventListener("click", () => {
    state.history = [];
    $("messages").querySelectorAll(".msg").forEach((m) => m.remove());
    $("empty").hidden = false;
  });
  loadModel();
  pollMetrics();
}

start();
