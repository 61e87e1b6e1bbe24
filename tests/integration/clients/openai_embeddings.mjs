// Embeddings through the official openai client: one string and a batch, the client's default
// base64 transfer and explicit floats; vectors of the model's width, normalised, the same text
// giving the same vector. Usage: node openai_embeddings.mjs BASE_URL [API_KEY]
import OpenAI from "openai";

import { runChecks, serverArgs } from "./check.mjs";

const { baseUrl, apiKey } = serverArgs("node openai_embeddings.mjs BASE_URL [API_KEY]");
const client = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey, maxRetries: 0 });

const norm = (v) => Math.sqrt(v.reduce((a, x) => a + x * x, 0));
const close = (a, b, tolerance) => a.length === b.length && a.every((x, i) => Math.abs(x - b[i]) <= tolerance);

await runChecks("openai embeddings", async (check) => {
  const width = (await client.models.list()).data[0].meta?.n_embd;
  check(Number.isInteger(width), "the model list gives no meta.n_embd");

  // No encoding_format: the client asks for base64 and decodes it to floats itself.
  const one = await client.embeddings.create({ model: "k25", input: "The cat sat on the mat." });
  check(one.object === "list" && one.data.length === 1, "single input: one embedding");
  const v = one.data[0].embedding;
  check(one.data[0].object === "embedding" && one.data[0].index === 0, "single input: shape");
  check(Array.isArray(v) && v.length === width, `single input: ${v?.length} values, not ${width}`);
  check(Math.abs(norm(v) - 1) < 1e-3, `single input: norm ${norm(v)}`);
  check(one.usage?.prompt_tokens > 0, "single input: usage.prompt_tokens");

  const batch = await client.embeddings.create({
    model: "k25", encoding_format: "float",
    input: ["The cat sat on the mat.", "A dragon flew over the castle.", "x"],
  });
  check(batch.data.length === 3, `batch: ${batch.data.length} embeddings`);
  check(batch.data.every((d, i) => d.index === i && d.embedding.length === width), "batch: order/width");
  // The same text in a batch and alone: the same vector (float32 through base64 vs JSON floats).
  check(close(batch.data[0].embedding, v, 1e-5), "batch[0] differs from the same text alone");
  check(!close(batch.data[0].embedding, batch.data[1].embedding, 1e-3), "different texts, same vector");

  try {
    await client.embeddings.create({ model: "k25", input: [] });
    check(false, "empty input accepted");
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError, `empty input: ${e.status} ${e.message}`);
  }
});
