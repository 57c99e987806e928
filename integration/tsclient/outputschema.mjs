// outputschema.mjs lists the gateway's tools with the official TypeScript
// SDK client and calls the ones it is given, for
// integration/tsclient_test.go. listTools makes the SDK keep every
// tool's outputSchema, and callTool then checks each result against it:
// a result without structured content, or with structured content the
// schema does not accept, is an error the SDK throws, and this script
// fails.
//
// Usage: node outputschema.mjs SDK_DIR URL CALLS_JSON
//
//   CALLS_JSON is an array of {name, arguments}
//
// It prints {tools: [{name, title, outputSchema}], results: [{name,
// isError, structured, command, exitCode, output}]} (output cut at 256
// characters) on stdout and exits 0, or prints the
// error on stderr and exits 1 (see sdk.mjs).
import { connect, report, sdkLoader } from './sdk.mjs';

const [sdkDir, url, calls] = process.argv.slice(2);
const client = await connect(sdkLoader(sdkDir), url, 'fiskfleet-tsclient');

await report(client, async () => {
  const tools = [];
  let cursor;
  let pages = 0;
  do {
    pages++;
    const page = await client.listTools(cursor ? { cursor } : undefined);
    for (const t of page.tools) {
      tools.push({ name: t.name, title: t.title ?? t.annotations?.title ?? '', outputSchema: t.outputSchema ?? null });
    }
    cursor = page.nextCursor;
  } while (cursor);
  if (tools.length > 0 && pages > 1) {
    // The SDK keeps the output schemas of the latest page only.
    throw new Error(`tools/list came in ${pages} pages: the SDK would check the last page's tools alone`);
  }
  const results = [];
  for (const c of JSON.parse(calls)) {
    const res = await client.callTool({ name: c.name, arguments: c.arguments }, undefined, { timeout: 60000 });
    // The SDK has checked the structured content against the schema; the
    // answer carries what the test asserts, not the whole output.
    const sc = res.structuredContent;
    results.push({
      name: c.name,
      isError: !!res.isError,
      structured: sc !== undefined,
      command: sc?.command ?? '',
      exitCode: sc?.exit_code ?? null,
      output: (sc?.output ?? '').slice(0, 256),
    });
  }
  return { tools, results };
});
