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
// stderr and exits 1 (see sdk.mjs).
import { existsSync } from 'node:fs';
import { connect, report, scenario, sdkLoader, text } from './sdk.mjs';

const [sdkDir, url, name, ...args] = process.argv.slice(2);
const client = await connect(sdkLoader(sdkDir), url, 'fiskfleet-tsclient');

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

await report(client, () => scenario({ progress, abort }, name, args));
