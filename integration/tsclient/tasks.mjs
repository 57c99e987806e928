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
// stderr and exits 1 (see sdk.mjs).
import { existsSync } from 'node:fs';
import { connect, report, scenario, sdkLoader, text } from './sdk.mjs';

const [sdkDir, url, name, ...args] = process.argv.slice(2);
const load = sdkLoader(sdkDir);
const { CallToolResultSchema, CreateTaskResultSchema } = await load('types.js');
const client = await connect(load, url, 'fiskfleet-tsclient-tasks');
const tasks = client.experimental.tasks;

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

await report(client, () => scenario({ stream, cancel }, name, args));
