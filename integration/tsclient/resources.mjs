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
// exits 1 (see sdk.mjs).
import { connect, report, sdkLoader, text } from './sdk.mjs';

const [sdkDir, url, query] = process.argv.slice(2);
const client = await connect(sdkLoader(sdkDir), url, 'fiskfleet-tsresources');

// readText reads a resource and joins the text of its contents; the SDK
// validates the result against its schema before it gets here.
async function readText(uri) {
  const res = await client.readResource({ uri });
  return {
    uri,
    contents: res.contents.map((c) => ({ uri: c.uri, mimeType: c.mimeType ?? '', text: c.text ?? null })),
  };
}

await report(client, async () => {
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
  const found = text(call, '');
  const links = call.content.filter((c) => c.type === 'resource_link');
  const opened = [];
  for (const l of links) opened.push({ name: l.name, ...(await readText(l.uri)) });

  return {
    resourcesCapability: caps.resources ?? null,
    pages,
    templates,
    document,
    search: { isError: !!call.isError, text: found },
    links: opened,
  };
});
