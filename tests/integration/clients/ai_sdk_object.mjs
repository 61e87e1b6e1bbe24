// The Vercel AI SDK (ai + @ai-sdk/openai, chat completions provider): a structured object from
// a zod schema with generateText + Output.object (AI SDK 6's successor of the deprecated
// generateObject; it sends response_format json_schema, strict), which must validate whatever
// stories260K would say unconstrained. Usage: node ai_sdk_object.mjs BASE_URL [API_KEY]
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, Output } from "ai";
import { z } from "zod";

import { runChecks, serverArgs } from "./check.mjs";

const { baseUrl, apiKey } = serverArgs("node ai_sdk_object.mjs BASE_URL [API_KEY]");
// .chat(): the Chat Completions API (the provider's default model is the Responses API).
const model = createOpenAI({ baseURL: `${baseUrl}/v1`, apiKey }).chat("k25");

const Pet = z.object({
  name: z.string(),
  kind: z.enum(["cat", "dog", "bird"]),
  friendly: z.boolean(),
});

await runChecks("ai sdk object", async (check) => {
  const result = await generateText({
    model, prompt: "Describe a pet.", maxOutputTokens: 300, maxRetries: 0,
    output: Output.object({ schema: Pet }),
  });
  check(Pet.safeParse(result.output).success, `object does not validate: ${result.text}`);
});
