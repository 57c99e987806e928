// tasks.mjs drives fiskfleet's MCP gateway's tasks (protocol 2025-11-25)
// with the official TypeScript SDK client, for integration/tstasks_test.go.
//
// Usage: node tasks.mjs SDK_DIR URL SCENARIO [ARGS...]
//
//   stream TOOL              call TOOL (a ticker) as a task with the SDK's
//                            callToolStream, which polls tasks/get and then
//                            fetches tasks/result; then ask tasks/get,
//                            tasks/result and tasks/list again
//   cancel TOOL PIDFILE      create a task of TOOL (a spawn), and once the
//                            command has written PIDFILE cancel it with
//                            tasks/cancel; then ask tasks/get and
//                            tasks/result of the cancelled task
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
const { CallToolResultSchema, CreateTaskResultSchema } = await load('types.js');

const client = new Client({ name: 'fiskfleet-tsclient-tasks', version: '0' });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
const tasks = client.experimental.tasks;

const text = (res) => res.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');

async function stream(tool) {
  // tools/list teaches the client which tools may run as tasks.
  const listed = await client.listTools();
  const taskSupport = listed.tools.find((t) => t.name === tool)?.execution?.taskSupport ?? null;
  const capability = !!client.getServerCapabilities()?.tasks?.requests?.tools?.call;

  const seen = [];
  let taskId;
  let result;
  for await (const msg of tasks.callToolStream(
    { name: tool, arguments: { every: '100ms', count: 15 } },
    CallToolResultSchema,
    { task: { ttl: 60000 }, timeout: 60000 },
  )) {
    switch (msg.type) {
      case 'taskCreated':
        taskId = msg.task.taskId;
        seen.push(`created:${msg.task.status}`);
        break;
      case 'taskStatus':
        seen.push(`status:${msg.task.status}`);
        break;
      case 'result':
        result = msg.result;
        seen.push('result');
        break;
      case 'error':
        throw msg.error;
    }
  }
  const got = await tasks.getTask(taskId);
  const again = await tasks.getTaskResult(taskId, CallToolResultSchema);
  const listed2 = await tasks.listTasks();
  return {
    capability,
    taskSupport,
    taskId,
    seen,
    text: text(result),
    isError: !!result.isError,
    status: got.status,
    ttl: got.ttl,
    againText: text(again),
    listed: listed2.tasks.map((t) => t.taskId),
  };
}

async function cancel(tool, pidfile) {
  const created = await client.request(
    { method: 'tools/call', params: { name: tool, arguments: { duration: '1m', pidfile } } },
    CreateTaskResultSchema,
    { task: { ttl: 60000 }, timeout: 60000 },
  );
  const taskId = created.task.taskId;
  const deadline = Date.now() + 30000;
  while (!existsSync(pidfile)) {
    if (Date.now() > deadline) throw new Error(`no ${pidfile} within 30s`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const before = await tasks.getTask(taskId);
  const cancelled = await tasks.cancelTask(taskId, { timeout: 60000 });
  const after = await tasks.getTask(taskId);
  let resultError = '';
  try {
    await tasks.getTaskResult(taskId, CallToolResultSchema);
  } catch (err) {
    resultError = String(err);
  }
  let againError = '';
  try {
    await tasks.cancelTask(taskId);
  } catch (err) {
    againError = String(err);
  }
  return {
    taskId,
    before: before.status,
    cancelled: cancelled.status,
    after: after.status,
    resultError,
    againError,
  };
}

try {
  let out;
  switch (scenario) {
    case 'stream':
      out = await stream(args[0]);
      break;
    case 'cancel':
      out = await cancel(args[0], args[1]);
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
