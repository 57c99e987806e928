// oauth.mjs drives the gateway as an OAuth 2.1 protected resource with the
// official TypeScript SDK's OAuth client (client/auth.js), from nothing to
// a tool call, and prints one JSON object saying what happened
// (TestTSClientOAuthFlow reads it).
//
//   node oauth.mjs SDK_DIR URL [LOGIN_HINT]
//
// The SDK does the protocol: on the gateway's 401 it reads the protected
// resource metadata, the authorization server's metadata, registers a
// client dynamically, and builds the authorization URL with PKCE and the
// resource parameter. This script is the user agent and the storage: its
// provider keeps client information, tokens and the code verifier in
// memory, and redirectToAuthorization performs the authorization request
// with fetch, following the provider's redirects by hand through its
// automatic login (login_hint, when given, names the user, as a user
// typing their name would) until one reaches the redirect URI with a code.
// Then transport.finishAuth(code) redeems it, and a new connection with
// the same provider initializes, lists tools and calls echo; when that
// connection is refused (a caller in no role of the policy), the report
// carries the SDK's error as connectError instead.
//
// Every HTTP request the SDK makes goes through a recording fetch, so the
// report lists them in order with their status. The token itself is never
// printed: only its type and its (unverified) claims.
import { sdkLoader, text } from './sdk.mjs';

const [sdkDir, url, loginHint] = process.argv.slice(2);
const load = sdkLoader(sdkDir);
const { Client } = await load('client/index.js');
const { StreamableHTTPClientTransport } = await load('client/streamableHttp.js');
const { UnauthorizedError } = await load('client/auth.js');

// The client's redirect URI: nothing listens there, the user agent stops
// at the redirect to it and takes the code from its query.
const REDIRECT = 'http://127.0.0.1/oauth-callback';

const requests = [];
async function recordingFetch(input, init) {
  const res = await fetch(input, init);
  const u = input instanceof Request ? input.url : String(input);
  requests.push({ method: init?.method ?? (input instanceof Request ? input.method : 'GET'), url: u, status: res.status });
  return res;
}

// authorize is the user agent: it follows the authorization request's
// redirects until one goes to REDIRECT and returns that URL.
async function authorize(start) {
  let u = new URL(start);
  for (let hops = 0; hops < 10; hops++) {
    const res = await fetch(u, { redirect: 'manual' });
    await res.arrayBuffer();
    const location = res.headers.get('location');
    if (res.status < 300 || res.status >= 400 || !location) {
      throw new Error(`authorization: ${u} answered ${res.status} without a redirect`);
    }
    u = new URL(location, u);
    if (u.href.startsWith(REDIRECT)) return { final: u, hops: hops + 1 };
  }
  throw new Error('authorization: more than 10 redirects');
}

class MemoryProvider {
  constructor() {
    this.info = undefined;
    this.tok = undefined;
    this.verifier = undefined;
    this.registered = false;
    this.authorizationURL = undefined;
    this.code = undefined;
    this.hops = 0;
  }
  get redirectUrl() { return REDIRECT; }
  get clientMetadata() {
    return {
      client_name: 'fiskfleet oauth.mjs',
      redirect_uris: [REDIRECT],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  clientInformation() { return this.info; }
  saveClientInformation(info) { this.info = info; this.registered = true; }
  tokens() { return this.tok; }
  saveTokens(tokens) { this.tok = tokens; }
  saveCodeVerifier(v) { this.verifier = v; }
  codeVerifier() {
    if (!this.verifier) throw new Error('no code verifier saved');
    return this.verifier;
  }
  async redirectToAuthorization(authorizationURL) {
    this.authorizationURL = authorizationURL.href;
    const u = new URL(authorizationURL);
    if (loginHint) u.searchParams.set('login_hint', loginHint);
    const { final, hops } = await authorize(u);
    this.hops = hops;
    const q = final.searchParams;
    if (q.get('error')) throw new Error(`authorization: ${q.get('error')}: ${q.get('error_description')}`);
    if (q.get('state') !== u.searchParams.get('state')) {
      throw new Error(`authorization: state ${q.get('state')}, want ${u.searchParams.get('state')}`);
    }
    this.code = q.get('code');
  }
}

function claimsOf(jwt) {
  const payload = jwt.split('.')[1];
  return JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
}

const provider = new MemoryProvider();
const transport = () => new StreamableHTTPClientTransport(new URL(url), { authProvider: provider, fetch: recordingFetch });

try {
  let firstConnect = 'connected';
  const first = new Client({ name: 'oauth.mjs', version: '0' });
  const t1 = transport();
  try {
    await first.connect(t1);
  } catch (err) {
    if (!(err instanceof UnauthorizedError)) throw err;
    firstConnect = 'unauthorized';
  }
  if (!provider.code) throw new Error(`no authorization code after the first connect (${firstConnect})`);
  await t1.finishAuth(provider.code);

  const out = {
    clientId: provider.info?.client_id,
    registered: provider.registered,
    firstConnect,
    authorizationURL: provider.authorizationURL,
    hops: provider.hops,
    tokenType: provider.tok?.token_type,
    claims: claimsOf(provider.tok.access_token),
    requests,
  };
  const client = new Client({ name: 'oauth.mjs', version: '0' });
  const t2 = transport();
  try {
    await client.connect(t2);
  } catch (err) {
    // The token was issued but the gateway refuses its caller (403 of
    // the policy): what the SDK tells its user.
    out.connectError = String(err?.message ?? err);
    process.stdout.write(JSON.stringify(out) + '\n');
    process.exit(0);
  }
  out.protocolVersion = t2.protocolVersion;
  out.tools = (await client.listTools()).tools.map((t) => t.name).sort();
  const res = await client.callTool({ name: 'echo', arguments: { message: 'over oauth' } });
  out.text = text(res);
  out.isError = res.isError === true;
  process.stdout.write(JSON.stringify(out) + '\n');
  await client.close();
  process.exit(0);
} catch (err) {
  process.stderr.write(`${err?.stack ?? err}\nrequests: ${JSON.stringify(requests)}\n`);
  process.exit(1);
}
