// The Vercel AI SDK (ai + @ai-sdk/openai, chat completions provider): generateText and
// streamText. Usage: node ai_sdk_text.mjs BASE_URL [API_KEY]
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, streamText } from "ai";

import { runChecks, serverArgs } from "./check.mjs";

const { baseUrl, apiKey } = serverArgs("node ai_sdk_text.mjs BASE_URL [API_KEY]");
// .chat(): the Chat Completions API (the provider's default model is the Responses API).
const model = createOpenAI({ baseURL: `${baseUrl}/v1`, apiKey }).chat("k25");

await runChecks("ai sdk text", async (check) => {
  const text = await generateText({ model, prompt: "Tell me a story.", maxOutputTokens: 16,
                                    temperature: 0, maxRetries: 0 });
  check(typeof text.text === "string" && text.text.length > 0, "generateText: no text");
  check(text.usage.outputTokens === 16 || text.finishReason === "stop",
        `generateText: ${text.usage.outputTokens} tokens, finish ${text.finishReason}`);

  const stream = streamText({ model, prompt: "Tell me a story.", maxOutputTokens: 16,
                              temperature: 0, maxRetries: 0 });
  let streamed = "";
  for await (const piece of stream.textStream) streamed += piece;
  check(streamed === text.text, `streamText: '${streamed}' vs '${text.text}'`);
  check((await stream.finishReason) === text.finishReason, "streamText: finish reason");
});
