// sdk.mjs is what the scripts of this directory share: loading the
// official TypeScript SDK from SDK_DIR (the package `make tools`
// installs), so this directory needs no node_modules of its own;
// connecting a client to the gateway; and reporting a scenario's result
// the way the Go tests read it.
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

// sdkLoader returns a function that imports a module of the SDK by its
// path under dist/esm.
export function sdkLoader(sdkDir) {
  return (p) => import(pathToFileURL(join(sdkDir, 'dist/esm', p)).href);
}

// connect returns a client named name, connected to the gateway at url
// over streamable HTTP.
export async function connect(load, url, name) {
  const { Client } = await load('client/index.js');
  const { StreamableHTTPClientTransport } = await load('client/streamableHttp.js');
  const client = new Client({ name, version: '0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

// text joins the text content items of a tool result.
export const text = (res, sep = '\n') =>
  res.content.filter((c) => c.type === 'text').map((c) => c.text).join(sep);

// report runs fn and prints its result as one JSON object on stdout,
// exiting 0, or prints the error on stderr and exits 1.
export async function report(client, fn) {
  try {
    const out = await fn();
    await client.close();
    // Exit once the answer is written: stdout is a pipe, whose writes
    // Node finishes asynchronously, and exiting sooner cuts it short.
    process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(0));
  } catch (err) {
    process.stderr.write(`${err?.stack ?? err}\n`);
    process.exit(1);
  }
}

// scenario runs the function of scenarios named name with args, or fails
// naming it.
export function scenario(scenarios, name, args) {
  const fn = scenarios[name];
  if (!fn) throw new Error(`unknown scenario ${name}`);
  return fn(...args);
}
