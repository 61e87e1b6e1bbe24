// The Anthropic Messages API (/v1/messages) through the official @anthropic-ai/sdk: a message,
// the same streamed (the SDK's event parser and its text/finalMessage helpers), count_tokens
// and an error. Usage: node anthropic_messages.mjs BASE_URL [API_KEY]
import Anthropic from "@anthropic-ai/sdk";

import { runChecks, serverArgs } from "./check.mjs";

const { baseUrl, apiKey } = serverArgs("node anthropic_messages.mjs BASE_URL [API_KEY]");
// The SDK appends /v1/messages to the base URL itself.
const client = new Anthropic({ baseURL: baseUrl, apiKey, maxRetries: 0 });
const STOP_REASONS = ["end_turn", "max_tokens", "stop_sequence", "tool_use"];

await runChecks("anthropic messages", async (check) => {
  const request = {
    model: "k25", max_tokens: 24, temperature: 0, system: "You tell stories.",
    messages: [{ role: "user", content: "Tell me a story about a cat." }],
  };
  const message = await client.messages.create(request);
  check(message.type === "message" && message.role === "assistant", "message type/role");
  check(typeof message.id === "string" && message.id.length > 0, "message id");
  check(message.content.length >= 1 && message.content[0].type === "text", "text content block");
  const text = message.content.map((b) => b.text ?? "").join("");
  check(STOP_REASONS.includes(message.stop_reason), `stop_reason ${message.stop_reason}`);
  check(message.usage.input_tokens > 0 && message.usage.output_tokens > 0, "usage");
  check(message.stop_reason !== "max_tokens" || message.usage.output_tokens === 24,
        `max_tokens stop after ${message.usage.output_tokens} tokens`);

  // Streamed: message_start, content_block_start/delta/stop, message_delta, message_stop.
  let streamedText = "";
  const events = new Set();
  const stream = client.messages.stream(request);
  stream.on("text", (t) => { streamedText += t; });
  stream.on("streamEvent", (e) => events.add(e.type));
  const final = await stream.finalMessage();
  for (const type of ["message_start", "content_block_start", "content_block_delta",
                      "content_block_stop", "message_delta", "message_stop"]) {
    check(events.has(type), `stream lacks ${type}`);
  }
  check(streamedText === text, `streamed text '${streamedText}' vs '${text}'`);
  check(final.content[0]?.text === text, "finalMessage text");
  check(STOP_REASONS.includes(final.stop_reason), `streamed stop_reason ${final.stop_reason}`);
  check(final.usage.output_tokens === message.usage.output_tokens, "streamed usage");

  const counted = await client.messages.countTokens({
    model: "k25", system: request.system, messages: request.messages,
  });
  check(counted.input_tokens === message.usage.input_tokens,
        `count_tokens ${counted.input_tokens} vs usage ${message.usage.input_tokens}`);

  try {
    await client.messages.create({ model: "k25", messages: request.messages });
    check(false, "a request without max_tokens was accepted");
  } catch (e) {
    check(e instanceof Anthropic.BadRequestError, `no max_tokens: ${e.status} ${e.message}`);
    check(e.error?.type === "error" && typeof e.error?.error?.type === "string",
          `error body is not Anthropic's shape: ${JSON.stringify(e.error)}`);
  }
});
