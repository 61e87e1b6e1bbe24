// Tool calling through the official openai client: with tool_choice "required" or a named
// function the model must call a tool, and the arguments must parse and fit the tool's schema
// (stories260K answers nonsense, so only constrained decoding makes this hold), whole and
// streamed. Usage: node openai_tools.mjs BASE_URL [API_KEY]
import OpenAI from "openai";

import { matchesSchema, runChecks, serverArgs } from "./check.mjs";

const { baseUrl, apiKey } = serverArgs("node openai_tools.mjs BASE_URL [API_KEY]");
const client = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey, maxRetries: 0 });

const weather = {
  type: "object",
  properties: {
    city: { type: "string" },
    unit: { type: "string", enum: ["celsius", "fahrenheit"] },
  },
  required: ["city", "unit"],
  additionalProperties: false,
};
const tools = [
  { type: "function",
    function: { name: "get_weather", description: "Weather in a city", parameters: weather,
                strict: true } },
  { type: "function",
    function: { name: "get_time", description: "Local time in a city",
                parameters: { type: "object", properties: { city: { type: "string" } },
                              required: ["city"], additionalProperties: false } } },
];
const messages = [{ role: "user", content: "What is the weather in Paris?" }];

// One tool call that names a known tool and whose arguments parse and fit its schema.
function checkCall(check, call, where, expectedName) {
  check(call?.type === "function", `${where}: tool call type ${call?.type}`);
  check(typeof call?.id === "string" && call.id.length > 0, `${where}: tool call id`);
  const name = call?.function?.name;
  const tool = tools.find((t) => t.function.name === name);
  check(tool && (!expectedName || name === expectedName), `${where}: tool name '${name}'`);
  let args;
  try {
    args = JSON.parse(call.function.arguments);
  } catch (e) {
    check(false, `${where}: arguments do not parse: ${call?.function?.arguments} (${e.message})`);
    return;
  }
  check(tool && matchesSchema(args, tool.function.parameters),
        `${where}: arguments do not fit the schema: ${call.function.arguments}`);
}

await runChecks("openai tools", async (check) => {
  const required = await client.chat.completions.create({
    model: "k25", messages, tools, tool_choice: "required", max_tokens: 256, temperature: 0.8,
  });
  const choice = required.choices[0];
  check(choice.finish_reason === "tool_calls", `required: finish_reason ${choice.finish_reason}`);
  check(choice.message.tool_calls?.length >= 1, "required: no tool_calls");
  for (const call of choice.message.tool_calls ?? []) checkCall(check, call, "required");

  const named = await client.chat.completions.create({
    model: "k25", messages, tools, max_tokens: 256,
    tool_choice: { type: "function", function: { name: "get_weather" } },
  });
  // (OpenAI itself ends a call forced by name with finish_reason "stop": not checked.)
  check(named.choices[0].message.tool_calls?.length >= 1, "named: no tool_calls");
  checkCall(check, named.choices[0].message.tool_calls?.[0], "named", "get_weather");

  // Streamed: the deltas of each call (by index) add up to a call that parses.
  const stream = await client.chat.completions.create({
    model: "k25", messages, tools, tool_choice: "required", max_tokens: 256, stream: true,
  });
  const calls = [];
  let finish = null;
  for await (const chunk of stream) {
    const delta = chunk.choices[0]?.delta;
    for (const d of delta?.tool_calls ?? []) {
      const call = (calls[d.index] ??= { type: "function", id: "", function: { name: "", arguments: "" } });
      if (d.id) call.id = d.id;
      if (d.function?.name) call.function.name += d.function.name;
      if (d.function?.arguments) call.function.arguments += d.function.arguments;
    }
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  check(calls.length >= 1, "streamed: no tool call deltas");
  check(finish === "tool_calls", `streamed: finish_reason ${finish}`);
  for (const call of calls) checkCall(check, call, "streamed");

  // The tool's answer goes back as a `tool` message; the model then answers in text.
  const call = choice.message.tool_calls?.[0];
  if (call) {
    const followUp = await client.chat.completions.create({
      model: "k25", tools, max_tokens: 16,
      messages: [...messages, choice.message,
                 { role: "tool", tool_call_id: call.id, content: "{\"temperature\": 21}" }],
    });
    check(typeof followUp.choices[0].message.content === "string", "tool result: no text answer");
  }

  try {
    await client.chat.completions.create({
      model: "k25", messages, tools: [{ type: "function", function: { parameters: {} } }],
    });
    check(false, "a tool without a name was accepted");
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError, `nameless tool: ${e.status} ${e.message}`);
  }
});
