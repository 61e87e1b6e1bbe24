// The official OpenAI client's embeddings against k25-server: its default request (base64,
// decoded by the SDK), encoding_format float, a batch in order, token-id input.
// Usage: node embeddings.mjs PORT   (exit 0 when every check holds; prints what failed otherwise)
import OpenAI from "openai";

const port = process.argv[2];
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "unused", maxRetries: 0 });
const failures = [];
const check = (ok, what) => { if (!ok) failures.push(what); };
const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const same = (a, b) => a.length === b.length && a.every((x, i) => Math.fround(x) === Math.fround(b[i]));

const texts = ["Once upon a time", "Lily", "Tom had a toy car."];
const byDefault = await client.embeddings.create({ model: "k25", input: texts[0] });
const vector = byDefault.data[0].embedding;
check(byDefault.object === "list" && byDefault.data[0].object === "embedding", "object names");
check(Array.isArray(vector) && vector.length === 64, `default (base64) vector of ${vector.length}`);
check(Math.abs(norm(vector) - 1) < 1e-5, `norm ${norm(vector)}`);
check(byDefault.usage.prompt_tokens > 0 && byDefault.usage.total_tokens === byDefault.usage.prompt_tokens, "usage");

const asFloat = await client.embeddings.create({ model: "k25", input: texts[0], encoding_format: "float" });
check(same(asFloat.data[0].embedding, vector), "float and base64 give the same vector");

const batch = await client.embeddings.create({ model: "k25", input: texts, encoding_format: "float" });
check(batch.data.length === 3 && batch.data.every((d, i) => d.index === i), "batch indices");
check(same(batch.data[0].embedding, vector), "batch entry 0 is the lone vector");
check(!same(batch.data[1].embedding, vector), "different texts, different vectors");

const tokenized = await fetch(`http://127.0.0.1:${port}/tokenize`, {
  method: "POST", body: JSON.stringify({ content: texts[1], add_special: true }),
}).then((r) => r.json());
const byIds = await client.embeddings.create({ model: "k25", input: tokenized.tokens, encoding_format: "float" });
check(same(byIds.data[0].embedding, batch.data[1].embedding), "token-id input equals the text");

try {
  await client.embeddings.create({ model: "k25", input: "" });
  check(false, "empty input accepted");
} catch (e) {
  check(e.status === 400, `empty input gave ${e.status}`);
}

if (failures.length > 0) {
  console.log("failed: " + failures.join("; "));
  process.exit(1);
}
console.log("all checks passed");
