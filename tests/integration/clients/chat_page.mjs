// The chat page in a real browser: headless Chromium (the system's, /usr/bin/chromium) driven
// by playwright-core. Loads the page, gives it the API key, sends a message and watches the
// answer stream in, checks the plan and timings under the answer and the metrics panel, stops
// a second answer half way and writes a screenshot.
// Usage: node chat_page.mjs URL SCREENSHOT_PATH API_KEY
// Exit 0 and "chat page: all checks passed" when every check holds; otherwise "FAILED: ...".
import { chromium } from "playwright-core";

const [url, screenshotPath, apiKey] = process.argv.slice(2);
if (!url || !screenshotPath || !apiKey) {
  console.log("FAILED: usage: node chat_page.mjs URL SCREENSHOT_PATH API_KEY");
  process.exit(2);
}
const TIMEOUT_MS = 60_000;

let browser;
async function fail(message, page) {
  console.log(`FAILED: ${message}`);
  if (page) await page.screenshot({ path: screenshotPath, fullPage: true }).catch(() => {});
  await browser?.close();
  process.exit(1);
}

browser = await chromium.launch({
  executablePath: process.env.K25_CHROMIUM || "/usr/bin/chromium",
  headless: true,
});
const page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
page.setDefaultTimeout(TIMEOUT_MS);

// The page must need nothing but the server: any other origin is refused and reported.
const origin = new URL(url).origin;
const foreign = [];
await page.route("**/*", (route) => {
  const target = route.request().url();
  if (new URL(target).origin === origin) return route.continue();
  foreign.push(target);
  return route.abort();
});
const pageErrors = [];
page.on("pageerror", (e) => pageErrors.push(String(e)));
// Chromium logs every 401 as an error; the page answers those before the key is given.
page.on("console", (m) => {
  if (m.type() === "error" && !m.text().includes("status of 401")) pageErrors.push(m.text());
});

try {
  await page.goto(url);
  // The server has an API key: the page shows the key field and says so.
  await page.locator("#key-field").waitFor({ state: "visible" });
  await page.locator("#api-key").fill(apiKey);
  await page.locator("#api-key").press("Enter");
  await page.waitForSelector('#status[data-state="ok"]');

  await page.locator("#temperature").fill("0");
  await page.locator("#max-tokens").fill("40");
  await page.locator("#system-prompt").fill("You tell short stories.");

  // Records the answer's length at every change of the conversation, with the answer's state,
  // so the check below sees whether text arrived before the answer was complete.
  await page.evaluate(() => {
    window.k25Samples = [];
    new MutationObserver(() => {
      const answers = document.querySelectorAll(".msg.assistant");
      const last = answers[answers.length - 1];
      if (!last) return;
      window.k25Samples.push({
        length: last.querySelector(".text").textContent.length,
        state: last.dataset.state,
      });
    }).observe(document.getElementById("messages"),
               { subtree: true, childList: true, characterData: true, attributes: true });
  });
  await page.locator("#input").fill("Tell me a story about a cat.");
  await page.locator("#send").click();
  const answer = page.locator(".msg.assistant").first();
  await answer.and(page.locator('[data-state="done"], [data-state="error"]')).waitFor();
  if ((await answer.getAttribute("data-state")) !== "done") {
    await fail(`the answer ended in an error: ${await answer.locator(".error").textContent()}`,
               page);
  }
  const text = await answer.locator(".text").textContent();
  if (text.length === 0) await fail("the answer is empty", page);
  const samples = await page.evaluate(() => window.k25Samples);
  const whileStreaming = new Set(
    samples.filter((s) => s.state === "streaming" && s.length > 0).map((s) => s.length));
  if (whileStreaming.size < 2) {
    await fail(`the answer did not grow while streaming (lengths seen while streaming: ` +
               `${[...whileStreaming].join(",") || "none"}; final ${text.length})`, page);
  }

  // The plan and timings under the answer.
  const meta = await answer.locator(".meta").textContent();
  for (const part of ["plan full", "level 0", "TTFT", "ms", "tok/s", "tokens", "finish"]) {
    if (!meta.includes(part)) await fail(`the answer's meta line lacks '${part}': '${meta}'`, page);
  }
  if ((await answer.getAttribute("data-plan")) !== "full") await fail("data-plan is not 'full'");

  // The metrics panel: filled from /metrics, and the tok/s rate after two polls.
  await page.waitForFunction(() => {
    const get = (k) => document.querySelector(`[data-metric="${k}"]`).textContent;
    return /tok\/s$/.test(get("tok_s")) && !get("tok_s").startsWith("…") &&
           /^\d+$/.test(get("running")) && /^\d+$/.test(get("waiting")) &&
           /B$/.test(get("kv_l2")) && /^\d+ \/ \d+$/.test(get("kv_pages"));
  });
  const metrics = await page.locator("#metrics").textContent();

  // A long second answer, stopped after its first text: the page says "stopped" and is ready
  // for the next message.
  // (it must fit in stories260K's 512-token context beside the conversation, or the server
  // answers 400 as OpenAI does)
  await page.locator("#max-tokens").fill("300");
  await page.locator("#input").fill("And then?");
  await page.locator("#send").click();
  const second = page.locator(".msg.assistant").nth(1);
  await page.waitForFunction(() => {
    const a = document.querySelectorAll(".msg.assistant")[1];
    return a && a.querySelector(".text").textContent.length > 0;
  });
  if ((await second.getAttribute("data-state")) !== "streaming") {
    await fail("the second answer finished before it could be stopped", page);
  }
  await page.locator("#stop").click();
  await second.and(page.locator('[data-state="stopped"]')).waitFor();
  if (!(await second.locator(".meta").textContent()).includes("finish stopped")) {
    await fail("the stopped answer does not say so", page);
  }
  if (await page.locator("#send").isDisabled()) await fail("send stays disabled after stop", page);

  if (foreign.length > 0) await fail(`requests to other origins: ${foreign.join(", ")}`, page);
  if (pageErrors.length > 0) await fail(`errors in the page: ${pageErrors.join(" | ")}`, page);
  await page.locator("#messages").evaluate((m) => { m.scrollTop = 0; });
  await page.screenshot({ path: screenshotPath });
  console.log(`answer: ${JSON.stringify(text)}`);
  console.log(`lengths seen while streaming: ${[...whileStreaming].join(",")}`);
  console.log(`meta: ${meta}`);
  console.log(`metrics: ${metrics.replace(/\s+/g, " ").trim()}`);
  console.log("chat page: all checks passed");
} catch (e) {
  await fail(e.stack || String(e), page);
}
await browser.close();
