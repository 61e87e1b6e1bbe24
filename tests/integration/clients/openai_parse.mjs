// Structured output through the official openai client: chat.completions.parse with a JSON
// schema response format (strict) built from a zod schema; the answer must parse and validate,
// whatever stories260K would say unconstrained. Also json_object mode.
// Usage: node openai_parse.mjs BASE_URL [API_KEY]
import OpenAI from "openai";
import { zodResponseFormat } from "openai/helpers/zod";
import { z } from "zod";

import { runChecks, serverArgs } from "./check.mjs";

const { baseUrl, apiKey } = serverArgs("node openai_parse.mjs BASE_URL [API_KEY]");
const client = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey, maxRetries: 0 });

const Story = z.object({
  title: z.string(),
  mood: z.enum(["happy", "sad", "scary"]),
  characters: z.array(z.string()),
  has_dog: z.boolean(),
});

await runChecks("openai parse", async (check) => {
  const completion = await client.chat.completions.parse({
    model: "k25",
    messages: [{ role: "user", content: "Describe a story about a girl and her dog." }],
    response_format: zodResponseFormat(Story, "story"),
    max_tokens: 400,
  });
  const message = completion.choices[0].message;
  check(completion.choices[0].finish_reason === "stop",
        `finish_reason ${completion.choices[0].finish_reason} (content ${message.content})`);
  check(message.parsed !== null, `nothing parsed from ${message.content}`);
  const again = Story.safeParse(JSON.parse(message.content));
  check(again.success, `content does not validate: ${message.content}`);

  const object = await client.chat.completions.create({
    model: "k25",
    messages: [{ role: "user", content: "Answer in JSON." }],
    response_format: { type: "json_object" },
    max_tokens: 400,
  });
  const text = object.choices[0].message.content;
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    check(false, `json_object content does not parse: ${text} (${e.message})`);
  }
  check(typeof value === "object" && value !== null && !Array.isArray(value),
        `json_object content is not an object: ${text}`);

  try {
    await client.chat.completions.create({
      model: "k25", messages: [{ role: "user", content: "x" }],
      response_format: { type: "json_schema", json_schema: { name: "bad", strict: true,
                                                             schema: { type: "no-such-type" } } },
    });
    check(false, "a schema with an unknown type was accepted");
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError, `bad schema: ${e.status} ${e.message}`);
  }
});
