// Drives the gateway's Agent2Agent surface with @a2a-js/sdk's own client,
// in protocol 1.0 (the SDK's default client) or 0.3 (its v0.3 JSON-RPC
// transport), and prints one JSON object of what it saw for the Go test
// (integration/agent2agent_jsclient_test.go) to check.
//
//   node client.mjs SDK_DIR BASE_URL VERSION SCENARIO [ARG]
//
// VERSION is 1.0 or 0.3; BASE_URL is where the card is (the gateway, or
// BASE/a2a/IDENTITY). Scenarios: send TOOL ARGS_JSON, stream TOOL
// ARGS_JSON, cancel ARGS_JSON (spawn, not blocking, then get and cancel),
// unknown (getTask of an id that does not exist), text (a message without
// a DataPart).
import { pathToFileURL } from 'node:url';
import path from 'node:path';
import fs from 'node:fs';

const [sdk, base, version, scenario, ...rest] = process.argv.slice(2);
const load = (p) => import(pathToFileURL(path.join(sdk, p)).href);
const { ClientFactory, Client } = await load('dist/client/index.js');
const { Role, TaskState } = await load('dist/index.js');

const factory = new ClientFactory();
let client = await factory.createFromUrl(base);
const card = await client.getAgentCard();
if (version === '0.3') {
  const { LegacyJsonRpcTransport } = await load('dist/compat/v0_3/client/index.js');
  const v03 = card.supportedInterfaces.find((i) => i.protocolVersion === '0.3');
  if (!v03) throw new Error('the card lists no 0.3 interface');
  client = new Client(new LegacyJsonRpcTransport({ endpoint: v03.url }), card);
}

// Messages as docs/agent2agent.md writes them: only the members a call needs.
const message = (parts) => ({ messageId: crypto.randomUUID(), role: Role.ROLE_USER, parts });
const call = (tool, args) => message([{ content: { $case: 'data', value: { tool, arguments: args } } }]);
const request = (msg, returnImmediately = false) => (returnImmediately ? { message: msg, configuration: { returnImmediately } } : { message: msg });
const stateName = (s) => TaskState[s] ?? String(s);
// parts as plain JSON: {text} or {data}.
const plain = (parts) => (parts ?? []).map((p) => p.content?.$case === 'text' ? { text: p.content.value } : p.content?.$case === 'data' ? { data: p.content.value } : { other: p.content?.$case });
const task = (t) => ({
  id: t.id, state: stateName(t.status?.state),
  status: plain(t.status?.message?.parts).map((p) => p.text ?? '').join(''),
  artifacts: (t.artifacts ?? []).map((a) => ({ id: a.artifactId, parts: plain(a.parts) })),
});
const result = (r) => ('messageId' in r && !('status' in r)) ? { message: plain(r.parts) } : { task: task(r) };
const out = { protocol: client.protocolVersion, skills: card.skills.map((s) => ({ id: s.id, tags: s.tags })) };

try {
  switch (scenario) {
    case 'send': {
      out.result = result(await client.sendMessage(request(call(rest[0], JSON.parse(rest[1] ?? '{}')))));
      if (out.result.task) out.got = task(await client.getTask({ tenant: '', id: out.result.task.id, historyLength: undefined }));
      break;
    }
    case 'text':
      out.result = result(await client.sendMessage(request(message([{ content: { $case: 'text', value: 'please echo hello' } }]))));
      break;
    case 'stream': {
      out.events = [];
      for await (const ev of client.sendMessageStream(request(call(rest[0], JSON.parse(rest[1] ?? '{}'))))) {
        const p = ev.payload ?? {};
        switch (p.$case) {
          case 'task': out.events.push({ task: task(p.value) }); break;
          case 'artifactUpdate': out.events.push({ artifact: p.value.artifact.artifactId, append: p.value.append, parts: plain(p.value.artifact.parts), at: Date.now() }); break;
          case 'statusUpdate': out.events.push({ state: stateName(p.value.status?.state) }); break;
          case 'message': out.events.push({ message: plain(p.value.parts) }); break;
        }
      }
      break;
    }
    case 'cancel': {
      const args = JSON.parse(rest[0]);
      const started = await client.sendMessage(request(call('spawn', args), true));
      out.started = task(started);
      // Cancel once the command's child runs (it writes its pid file).
      for (let i = 0; i < 300 && !(fs.existsSync(args.pidfile) && fs.readFileSync(args.pidfile, 'utf8').trim()); i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      out.running = task(await client.getTask({ tenant: '', id: started.id, historyLength: undefined }));
      out.cancelled = task(await client.cancelTask({ tenant: '', id: started.id, metadata: undefined }));
      try {
        await client.cancelTask({ tenant: '', id: started.id, metadata: undefined });
        out.again = 'no error';
      } catch (e) {
        out.again = e.constructor.name + ': ' + e.message;
      }
      break;
    }
    case 'unknown':
      try {
        await client.getTask({ tenant: '', id: 'task-00000000000000000000000000000000', historyLength: undefined });
        out.error = 'no error';
      } catch (e) {
        out.error = e.constructor.name + ': ' + e.message;
      }
      break;
    default:
      throw new Error('unknown scenario ' + scenario);
  }
} finally {
  process.stdout.write(JSON.stringify(out) + '\n');
}
process.exit(0);
