// The bimodal serving workload driven by the official `openai` npm client instead of k25-bench:
// a second, independent measurement of the same rows (issue 15's "independent client"). It shares
// no code with k25-bench: its own draw of prompt lengths and classes, prompts cut by words from
// real text (it knows no tokenizer; the servers' usage reports the tokens), TTFT taken from what
// the SDK's stream yields. Writes JSON whose summary has the fields bench/batcher.sh compares.
//
// usage: node bench/openai_bimodal.mjs --url URL --json FILE [--requests 32] [--concurrency 24]
//        [--scale 0.25] [--max-tokens 32] [--seed 31] [--server-pid PID] [--text FILE]
// The default seed draws 13 long and 19 short prompts, the mix of the independent client in
// issue 15's table (k25-bench's seed draws 8 and 24).
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const clients = new URL("../tests/integration/clients/node_modules/openai/index.mjs", import.meta.url);
const { default: OpenAI } = await import(clients.href);

function parseArgs(argv) {
  const a = {
    url: "", json: "", requests: 32, concurrency: 24, scale: 0.25, maxTokens: 32, seed: 31,
    serverPid: 0, text: fileURLToPath(new URL("../../shared/data/stories-sample.txt", import.meta.url)),
  };
  const numeric = { "--requests": "requests", "--concurrency": "concurrency", "--scale": "scale",
                    "--max-tokens": "maxTokens", "--seed": "seed", "--server-pid": "serverPid" };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    if (flag === "--url") a.url = value;
    else if (flag === "--json") a.json = value;
    else if (flag === "--text") a.text = value;
    else if (flag in numeric) {
      const n = Number(value);
      if (!Number.isFinite(n) || n < 0) throw new Error(`${flag}: '${value}' is not a number >= 0`);
      a[numeric[flag]] = n;
    } else throw new Error(`unknown argument ${flag}`);
  }
  if (!a.url || !a.json) throw new Error("--url and --json are required");
  if (a.requests < 1 || a.concurrency < 1) throw new Error("--requests and --concurrency >= 1");
  return a;
}

// mulberry32: a small seeded generator, so that every run (and both servers) get the same plan.
function generator(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Issue 15's workload: 57% short prompts of 210 +- 30 tokens, 43% long of 12400 +- 1800, times
// --scale; SLA classes gold / silver / bronze 20 / 30 / 50. Prompt lengths are asked for in words
// at 0.75 words per token (English text through a Llama-style vocabulary).
function plan(a, words) {
  const next = generator(a.seed);
  const requests = [];
  for (let id = 0; id < a.requests; id++) {
    const long = next() >= 0.57;
    const [mean, spread] = long ? [12400, 1800] : [210, 30];
    const tokens = Math.max(2, Math.round((mean - spread + next() * 2 * spread) * a.scale));
    const u = next();
    const sla = u < 0.2 ? "gold" : u < 0.5 ? "silver" : "bronze";
    const count = Math.max(1, Math.round(tokens * 0.75));
    const start = Math.floor(next() * words.length);
    const cut = [];
    for (let i = 0; i < count; i++) cut.push(words[(start + i) % words.length]);
    requests.push({ id, length: long ? "long" : "short", sla, prompt: cut.join(" ") });
  }
  return requests;
}

function peakRssSampler(pid) {
  let peak = 0;
  const read = (field) => {
    const m = readFileSync(`/proc/${pid}/status`, "utf8").match(new RegExp(`${field}:\\s+(\\d+) kB`));
    return m ? Number(m[1]) * 1024 : 0;
  };
  const sample = () => { try { peak = Math.max(peak, read("VmRSS"), read("VmHWM")); } catch { /* gone */ } };
  if (!pid) return { stop: () => null };
  sample();
  const timer = setInterval(sample, 100);
  return { stop: () => { clearInterval(timer); sample(); return peak; } };
}

async function send(client, r, a, t0) {
  const start = performance.now();
  const out = { id: r.id, length: r.length, sla: r.sla, start_ms: start - t0, ok: false };
  try {
    const stream = await client.completions.create(
      { model: "k25", prompt: r.prompt, max_tokens: a.maxTokens, temperature: 0, stream: true,
        stream_options: { include_usage: true }, ignore_eos: true },
      { headers: { "x-latency-sla": r.sla } });
    let chunks = 0;
    for await (const chunk of stream) {
      const text = chunk.choices?.[0]?.text ?? "";
      if (text.length > 0 && out.ttft_ms === undefined) out.ttft_ms = performance.now() - start;
      if (text.length > 0) chunks++;
      if (chunk.usage) out.usage = chunk.usage;
    }
    out.e2e_ms = performance.now() - start;
    out.output_tokens = out.usage?.completion_tokens ?? chunks;
    out.prompt_tokens = out.usage?.prompt_tokens;
    out.ok = out.ttft_ms !== undefined;
    if (!out.ok) out.error = "no text in the stream";
  } catch (e) {
    out.error = String(e?.message ?? e);
  }
  return out;
}

// Linear interpolation between closest ranks (NumPy's default), as k25-bench reports.
function summarize(values) {
  if (values.length === 0) return { count: 0 };
  const v = [...values].sort((x, y) => x - y);
  const at = (q) => {
    const rank = q * (v.length - 1), lo = Math.floor(rank), hi = Math.min(lo + 1, v.length - 1);
    return v[lo] + (v[hi] - v[lo]) * (rank - lo);
  };
  return { count: v.length, mean: v.reduce((s, x) => s + x, 0) / v.length, p50: at(0.5),
           p99: at(0.99), min: v[0], max: v[v.length - 1] };
}

function classStats(done) {
  const ok = done.filter((r) => r.ok);
  const tpot = ok.filter((r) => r.output_tokens > 1)
    .map((r) => (r.e2e_ms - r.ttft_ms) / (r.output_tokens - 1));
  return { requests: done.length, succeeded: ok.length, failed: done.length - ok.length,
           ttft_ms: summarize(ok.map((r) => r.ttft_ms)), tpot_ms: summarize(tpot),
           e2e_ms: summarize(ok.map((r) => r.e2e_ms)),
           prompt_tokens: summarize(ok.filter((r) => r.prompt_tokens).map((r) => r.prompt_tokens)) };
}

const a = parseArgs(process.argv.slice(2));
const words = readFileSync(a.text, "utf8").split(/\s+/).filter((w) => w.length > 0);
const requests = plan(a, words);
const client = new OpenAI({ baseURL: `${a.url}/v1`, apiKey: "none", maxRetries: 0,
                            timeout: 900_000 });
const rss = peakRssSampler(a.serverPid);
const t0 = performance.now();
const done = [];
let nextIndex = 0;
const progress = setInterval(() => {
  if (process.stderr.isTTY) {
    process.stderr.write(`\r${done.length}/${requests.length} done, ` +
                         `${((performance.now() - t0) / 1000).toFixed(0)} s`);
  }
}, 1000);
// Closed loop: `concurrency` workers, each sending the next planned request when its last ends.
await Promise.all(Array.from({ length: Math.min(a.concurrency, requests.length) }, async () => {
  while (nextIndex < requests.length) done.push(await send(client, requests[nextIndex++], a, t0));
}));
clearInterval(progress);
const wallS = (performance.now() - t0) / 1000;
const peak = rss.stop();
if (process.stderr.isTTY) process.stderr.write("\n");

const byClass = { length: {}, sla: {} };
for (const group of ["length", "sla"]) {
  for (const name of new Set(done.map((r) => r[group]))) {
    byClass[group][name] = classStats(done.filter((r) => r[group] === name));
  }
}
const overall = classStats(done);
const report = {
  tool: "openai npm client (bench/openai_bimodal.mjs)", url: a.url, options: a, wall_s: wallS,
  // req/s counts successes, as k25-bench does; finished/s also counts requests that ended in an
  // error after being served (llama-server rejects some random-weight outputs with broken UTF-8).
  summary: { overall, req_per_s: overall.succeeded / wallS, finished_per_s: done.length / wallS,
             by_class: byClass },
  server_memory: { peak_rss_bytes: peak }, requests: done.sort((x, y) => x.id - y.id),
};
writeFileSync(a.json, JSON.stringify(report, null, 1));
const ms = (s) => (s.count ? `${s.p50.toFixed(0)} / ${s.p99.toFixed(0)}` : "n/a");
console.log(`${overall.succeeded}/${done.length} ok in ${wallS.toFixed(1)} s: ` +
            `${report.summary.req_per_s.toFixed(3)} req/s, TPOT mean ` +
            `${overall.tpot_ms.mean?.toFixed(1) ?? "n/a"} ms`);
for (const [group, classes] of Object.entries(byClass)) {
  for (const [name, s] of Object.entries(classes)) {
    console.log(`  ${group}=${name}: ${s.succeeded}/${s.requests} ok, TTFT p50 / p99 ` +
                `${ms(s.ttft_ms)} ms, prompt tokens mean ${s.prompt_tokens.mean?.toFixed(0) ?? "n/a"}`);
  }
}
if (overall.failed > 0) {
  console.log(`${overall.failed} failed (${report.summary.finished_per_s.toFixed(3)} finished/s): ` +
              [...new Set(done.filter((r) => !r.ok).map((r) => r.error))].join("; "));
}
if (overall.succeeded === 0) process.exitCode = 1;
