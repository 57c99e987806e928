// cors.mjs opens a page of another origin in Debian's chromium through
// playwright-core and, from it, calls the gateway's echo tool as a
// browser MCP client of the 2026-07-28 revision does: a POST with
// Mcp-Protocol-Version, Mcp-Method and Mcp-Name, which makes the browser
// ask the gateway first (a CORS preflight). It prints one JSON event:
// {"event": "called", "message": <the answer's text>} when the call got
// through, or {"event": "refused", "message": <the browser's error>}.
//
// Environment:
//   PAGE_URL         the page of the allowed origin
//   GATEWAY_URL      the gateway's /mcp
//   PROTOCOL         the MCP revision, 2026-07-28
//   PLAYWRIGHT_CORE  the playwright-core package directory (make tools)
//   CHROMIUM         the browser; /usr/bin/chromium when unset
//   OUT              a directory for the browser's profile

import { createRequire } from "node:module";
import { mkdtempSync } from "node:fs";
import path from "node:path";

const env = (name, fallback) => {
  const v = process.env[name] ?? fallback;
  if (v === undefined || v === "") {
    console.error(`cors.mjs: ${name} is not set`);
    process.exit(2);
  }
  return v;
};
const { chromium } = createRequire(import.meta.url)(env("PLAYWRIGHT_CORE"));
const context = await chromium.launchPersistentContext(mkdtempSync(path.join(env("OUT"), "chromium-")), {
  executablePath: env("CHROMIUM", "/usr/bin/chromium"),
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const page = context.pages()[0] ?? (await context.newPage());
  await page.goto(env("PAGE_URL"));
  const result = await page.evaluate(async ({ url, protocol }) => {
    const body = JSON.stringify({
      jsonrpc: "2.0", id: 1, method: "tools/call",
      params: {
        name: "echo", arguments: { message: "from the browser" },
        _meta: { "io.modelcontextprotocol/protocolVersion": protocol, "io.modelcontextprotocol/clientCapabilities": {} },
      },
    });
    try {
      const r = await fetch(url, {
        method: "POST",
        headers: {
          "Content-Type": "application/json",
          Accept: "application/json, text/event-stream",
          "Mcp-Protocol-Version": protocol,
          "Mcp-Method": "tools/call",
          "Mcp-Name": "echo",
        },
        body,
      });
      return { event: "called", message: `${r.status} ${await r.text()}` };
    } catch (e) {
      return { event: "refused", message: String(e) };
    }
  }, { url: env("GATEWAY_URL"), protocol: env("PROTOCOL") });
  console.log(JSON.stringify(result));
} finally {
  await context.close();
}
