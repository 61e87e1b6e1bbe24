// The official openai client against k25-server: completions and chat, streamed and not, the
// model list and an error. Usage: node openai_chat.mjs BASE_URL [API_KEY]
import OpenAI from "openai";

import { runChecks, serverArgs } from "./check.mjs";

const { baseUrl, apiKey } = serverArgs("node openai_chat.mjs BASE_URL [API_KEY]");
const client = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey, maxRetries: 0 });

await runChecks("openai chat", async (check) => {
  const completion = await client.completions.create({
    model: "k25", prompt: "Once upon a time", max_tokens: 16, temperature: 0, logprobs: 2,
  });
  check(completion.object === "text_completion", "completion object");
  check(typeof completion.choices[0].text === "string" && completion.choices[0].text.length > 0,
        "completion text");
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
  check(chat.object === "chat.completion", "chat object");
  check(chat.choices[0].message.role === "assistant", "chat role");
  check(typeof chat.choices[0].message.content === "string", "chat content");
  check(chat.choices[0].logprobs.content.length > 0, "chat logprobs");
  // k25's extension fields reach the caller through the client untouched.
  check(typeof chat.flash?.plan === "string" && chat.timings?.ttft_ms >= 0, "chat flash/timings");

  let chatStreamed = "";
  let finish = null;
  const chatStream = await client.chat.completions.create({
    model: "k25", messages, max_tokens: 16, temperature: 0, stream: true,
  });
  for await (const chunk of chatStream) {
    chatStreamed += chunk.choices[0]?.delta?.content ?? "";
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  check(chatStreamed === chat.choices[0].message.content, `streamed chat text '${chatStreamed}'`);
  check(finish === chat.choices[0].finish_reason, `streamed finish_reason ${finish}`);

  try {
    await client.chat.completions.create({ model: "k25", messages: [] });
    check(false, "empty messages accepted");
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError, `empty messages: ${e.status} ${e.message}`);
  }

  const models = await client.models.list();
  check(models.data.length === 1, "models list");
});
