// stream.mjs drives fiskfleet's MCP gateway with the official TypeScript
// SDK client, for integration/tsclient_test.go.
//
// Usage: node stream.mjs SDK_DIR URL SCENARIO [ARGS...]
//
//   progress TOOL            call TOOL (the demo ticker) with onprogress
//   abort TOOL PIDFILE       call TOOL (the demo spawn) and abort it once
//                            the command has written PIDFILE
//
// It prints one JSON object on stdout and exits 0, or prints the error on
// stderr and exits 1. The SDK is loaded from SDK_DIR (the package installed
// by `make tools`), so this directory needs no node_modules of its own.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [sdkDir, url, scenario, ...args] = process.argv.slice(2);
const load = (p) => import(pathToFileURL(join(sdkDir, 'dist/esm', p)).href);
const { Client } = await load('client/index.js');
const { StreamableHTTPClientTransport } = await load('client/streamableHttp.js');

const client = new Client({ name: 'fiskfleet-tsclient', version: '0' });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));

const text = (res) => res.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');

async function progress(tool) {
  const notes = [];
  const res = await client.callTool(
    { name: tool, arguments: { every: '100ms', count: 15 } },
    undefined,
    { onprogress: (p) => notes.push({ progress: p.progress, message: p.message ?? '' }), timeout: 60000 },
  );
  // Copied now: anything arriving after the result does not count.
  return { notesBeforeResult: notes.slice(), isError: !!res.isError, text: text(res) };
}

async function abort(tool, pidfile) {
  const ac = new AbortController();
  const call = client.callTool(
    { name: tool, arguments: { duration: '1m', pidfile } },
    undefined,
    { signal: ac.signal, timeout: 120000 },
  );
  const deadline = Date.now() + 30000;
  while (!existsSync(pidfile)) {
    if (Date.now() > deadline) throw new Error(`no ${pidfile} within 30s`);
    await new Promise((r) => setTimeout(r, 50));
  }
  ac.abort('stopped by the test');
  try {
    await call;
    return { aborted: false };
  } catch (err) {
    return { aborted: ac.signal.aborted, error: String(err) };
  }
}

try {
  let out;
  switch (scenario) {
    case 'progress':
      out = await progress(args[0]);
      break;
    case 'abort':
      out = await abort(args[0], args[1]);
      break;
    default:
      throw new Error(`unknown scenario ${scenario}`);
  }
  process.stdout.write(JSON.stringify(out) + '\n');
  await client.close();
  process.exit(0);
} catch (err) {
  process.stderr.write(`${err?.stack ?? err}\n`);
  process.exit(1);
}
