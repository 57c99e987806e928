// approvals.mjs drives Debian's chromium through playwright-core on the
// gateway's /approvals page, as an approver would: sign in with a token,
// wait for a request to appear while the page is open, approve it, deny the
// next one with a reason, watch a third leave the page by itself, and take
// a screenshot.
//
// The Go test that runs it (TestApprovalsWebBrowser) makes the requests.
// The two talk by lines: the script prints one JSON object per line on
// stdout ({"event": "ready"}, {"event": "seen", "id": ...}, ...) and the
// test makes the next request when it reads the line it waits for. Anything
// unexpected (a timeout, a console error such as a Content-Security-Policy
// violation, a message that is not the one expected) ends the script with a
// non-zero exit and the reason on stderr.
//
// Environment:
//   APPROVALS_URL        the page, e.g. http://127.0.0.1:PORT/approvals
//   APPROVALS_TOKEN      the approver's token
//   APPROVALS_REASON     the reason to deny with
//   APPROVALS_OUT        a directory for the screenshot and the browser's profile
//   PLAYWRIGHT_CORE      the playwright-core package directory (make tools)
//   CHROMIUM             the browser; /usr/bin/chromium when unset

import { createRequire } from "node:module";
import { mkdtempSync } from "node:fs";
import path from "node:path";

const env = (name, fallback) => {
  const v = process.env[name] ?? fallback;
  if (v === undefined || v === "") {
    console.error(`approvals.mjs: ${name} is not set`);
    process.exit(2);
  }
  return v;
};
const url = env("APPROVALS_URL");
const token = env("APPROVALS_TOKEN");
const reason = env("APPROVALS_REASON");
const out = env("APPROVALS_OUT");
const { chromium } = createRequire(import.meta.url)(env("PLAYWRIGHT_CORE"));

const say = (event, fields = {}) => console.log(JSON.stringify({ event, ...fields }));
const wait = 30_000;

const context = await chromium.launchPersistentContext(mkdtempSync(path.join(out, "chromium-")), {
  executablePath: env("CHROMIUM", "/usr/bin/chromium"),
  headless: true,
  args: [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
  viewport: { width: 1100, height: 900 },
});
let failed = false;
try {
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(wait);
  const problems = [];
  // Console errors are script errors and Content-Security-Policy
  // violations; a failed resource (the sign-in page's 401, a favicon's 404)
  // is logged there too and left out.
  page.on("console", (m) => {
    if (m.type() === "error" && !m.text().startsWith("Failed to load resource")) problems.push(`console: ${m.text()}`);
  });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  const check = () => {
    if (problems.length) throw new Error(problems.join("; "));
  };

  // submit clicks a button of a form that posts and is sent back to the
  // list (303 to GET /approvals), and waits for the list to load.
  const submit = async (button) => {
    await Promise.all([
      page.waitForResponse((r) => r.request().method() === "GET" && new URL(r.url()).pathname === "/approvals"),
      button.click(),
    ]);
    await page.waitForLoadState("load");
  };

  // Sign in.
  await page.goto(url);
  await page.fill("#token", token);
  await submit(page.locator("#signin"));
  const who = await page.textContent("#who");
  await page.waitForSelector("body[data-live='1']", { state: "attached" });
  say("ready", { who });

  // seen waits for a request other than those in done to appear on the
  // open page, and reports it.
  const done = new Set();
  const seen = async () => {
    const row = await page.waitForFunction(
      (done) => [...document.querySelectorAll("#pending > li[data-id]")].find((li) => !done.includes(li.dataset.id)),
      [...done],
      { timeout: wait },
    );
    const li = row.asElement();
    const id = await li.getAttribute("data-id");
    done.add(id);
    say("seen", {
      id,
      tool: await li.$eval(".tool", (e) => e.textContent),
      command: await li.$eval(".command", (e) => e.textContent),
      caller: await li.$eval(".caller", (e) => e.textContent),
    });
    return li;
  };
  const row = (id) => page.locator(`#pending > li[data-id="${id}"]`);
  const flash = async () => (await page.textContent("#flash")).trim();

  // Approve the first request to appear.
  let li = await seen();
  let id = await li.getAttribute("data-id");
  await submit(row(id).locator("button.approve"));
  await row(id).waitFor({ state: "detached" });
  let msg = await flash();
  if (!msg.startsWith(`Approved ${id}`)) throw new Error(`after approving ${id} the page says ${JSON.stringify(msg)}`);
  say("approved", { id, message: msg });

  // Deny the next one, with a reason.
  li = await seen();
  id = await li.getAttribute("data-id");
  await row(id).locator("summary").click();
  await row(id).locator("input[name=reason]").fill(reason);
  await submit(row(id).locator("button.deny"));
  await row(id).waitFor({ state: "detached" });
  msg = await flash();
  if (!msg.startsWith(`Denied ${id}`)) throw new Error(`after denying ${id} the page says ${JSON.stringify(msg)}`);
  say("denied", { id, message: msg });

  // A third one leaves the page by itself when its caller gives up: no
  // reload, the same document throughout.
  await page.evaluate(() => (window.__sameDocument = true));
  li = await seen();
  id = await li.getAttribute("data-id");
  const shot = path.join(out, "approvals.png");
  await page.screenshot({ path: shot, fullPage: true });
  say("screenshot", { path: shot });
  await row(id).waitFor({ state: "detached" });
  if (!(await page.evaluate(() => window.__sameDocument === true))) throw new Error("the page reloaded");
  await page.waitForSelector("#empty:not([hidden])", { state: "attached" });
  // How the list came: "stream" (server-sent events) or "poll".
  say("gone", { id, feed: await page.evaluate(() => document.body.dataset.feed ?? "") });
  check();
} catch (e) {
  failed = true;
  console.error(`approvals.mjs: ${e.stack ?? e}`);
} finally {
  await context.close();
}
process.exit(failed ? 1 : 0);
