// resources.mjs reads fiskfleet's knowledge documents as MCP resources
// with the official TypeScript SDK client, for
// integration/tsresources_test.go.
//
// Usage: node resources.mjs SDK_DIR URL QUERY
//
// It lists the resources page by page (following nextCursor), lists the
// resource templates, reads the first document, calls knowledge_search
// with QUERY and reads every resource_link of the result. It prints one
// JSON object on stdout and exits 0, or prints the error on stderr and
// exits 1. The SDK is loaded from SDK_DIR (the package installed by `make
// tools`), so this directory needs no node_modules of its own.
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [sdkDir, url, query] = process.argv.slice(2);
const load = (p) => import(pathToFileURL(join(sdkDir, 'dist/esm', p)).href);
const { Client } = await load('client/index.js');
const { StreamableHTTPClientTransport } = await load('client/streamableHttp.js');

const client = new Client({ name: 'fiskfleet-tsresources', version: '0' });

// readText reads a resource and joins the text of its contents; the SDK
// validates the result against its schema before it gets here.
async function readText(uri) {
  const res = await client.readResource({ uri });
  return {
    uri,
    contents: res.contents.map((c) => ({ uri: c.uri, mimeType: c.mimeType ?? '', text: c.text ?? null })),
  };
}

try {
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  const caps = client.getServerCapabilities() ?? {};

  const pages = [];
  let cursor;
  do {
    const page = await client.listResources(cursor ? { cursor } : {});
    pages.push(page.resources.map((r) => ({ uri: r.uri, name: r.name, title: r.title ?? '', mimeType: r.mimeType ?? '' })));
    cursor = page.nextCursor;
    if (pages.length > 1000) throw new Error('more than 1000 pages: the cursor does not advance');
  } while (cursor);

  const templates = (await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);
  const first = pages.flat()[0];
  const document = first ? await readText(first.uri) : null;

  const call = await client.callTool({ name: 'knowledge_search', arguments: { query } });
  const text = call.content.filter((c) => c.type === 'text').map((c) => c.text).join('');
  const links = call.content.filter((c) => c.type === 'resource_link');
  const opened = [];
  for (const l of links) opened.push({ name: l.name, ...(await readText(l.uri)) });

  const out = {
    resourcesCapability: caps.resources ?? null,
    pages,
    templates,
    document,
    search: { isError: !!call.isError, text },
    links: opened,
  };
  process.stdout.write(JSON.stringify(out) + '\n');
  await client.close();
  process.exit(0);
} catch (err) {
  process.stderr.write(`${err?.stack ?? err}\n`);
  process.exit(1);
}
