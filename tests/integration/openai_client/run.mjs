// The official OpenAI client against k25-server: completions and chat, streamed and not.
// Usage: node run.mjs PORT   (exit 0 when every check holds; prints what failed otherwise)
import OpenAI from "openai";

const port = process.argv[2];
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "unused", maxRetries: 0 });
const failures = [];
const check = (ok, what) => { if (!ok) failures.push(what); };

const completion = await client.completions.create({
  model: "k25", prompt: "Once upon a time", max_tokens: 16, temperature: 0, logprobs: 2,
});
check(completion.object === "text_completion", "completion object");
check(typeof completion.choices[0].text === "string" && completion.choices[0].text.length > 0, "completion text");
check(completion.usage.completion_tokens === 16, "completion usage");
check(completion.choices[0].logprobs.tokens.length === 16, "completion logprobs");

let streamed = "";
let usage = null;
const stream = await client.completions.create({
  model: "k25", prompt: "Once upon a time", max_tokens: 16, temperature: 0, stream: true,
  stream_options: { include_usage: true },
});
for await (const chunk of stream) {
  if (chunk.choices.length > 0) streamed += chunk.choices[0].text;
  if (chunk.usage) usage = chunk.usage;
}
check(streamed === completion.choices[0].text, `streamed completion text '${streamed}'`);
check(usage && usage.completion_tokens === 16, "streamed completion usage");

const messages = [{ role: "user", content: "Tell me a story about a cat." }];
const chat = await client.chat.completions.create({
  model: "k25", messages, max_tokens: 16, temperature: 0, logprobs: true, top_logprobs: 2,
});
check(chat.choices[0].message.role === "assistant", "chat role");
check(typeof chat.choices[0].message.content === "string", "chat content");
check(chat.choices[0].logprobs.content.length > 0, "chat logprobs");

let chatStreamed = "";
const chatStream = await client.chat.completions.create({
  model: "k25", messages, max_tokens: 16, temperature: 0, stream: true,
});
for await (const chunk of chatStream) chatStreamed += chunk.choices[0]?.delta?.content ?? "";
check(chatStreamed === chat.choices[0].message.content, `streamed chat text '${chatStreamed}'`);

const two = await client.completions.create({ model: "k25", prompt: "x", n: 2, max_tokens: 4 });
check(two.choices.length === 2 && two.choices[1].index === 1, "n=2 choices");
try {
  await client.completions.create({ model: "k25", prompt: "x", n: 17 });
  check(false, "n=17 accepted");
} catch (e) {
  check(e.status === 400, `n=17 status ${e.status}`);
}

const models = await client.models.list();
check(models.data.length === 1, "models list");

if (failures.length > 0) {
  console.log("FAILED: " + failures.join("; "));
  process.exit(1);
}
console.log("openai client: all checks passed");
