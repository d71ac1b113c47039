// oauth-code-client.mjs: a 2025-11-25 MCP client (@modelcontextprotocol/sdk
// 1.x) that authenticates as a user would, with the SDK's own client auth
// and the authorization code grant with PKCE: on the gateway's 401 it reads
// the Protected Resource Metadata, then the authorization server's
// metadata, registers itself (RFC 7591 dynamic client registration, a
// public client) and sends the user to the authorization URL. This script
// plays the user agent: it follows that URL, signs in as <user> on the
// authorization server's development login form (oidc-provider's
// devInteractions), consents, and hands the code from the redirect back to
// the SDK, which exchanges it (with the PKCE verifier and the resource,
// RFC 8707) and calls again.
//
//   node oauth-code-client.mjs <mcp-url> <tool> [json-args] user=<name>
//
// Then as legacy-client.mjs: lists tools, calls <tool> (answering an
// elicitation) and prints one JSON line, with "registeredClient" (the
// client id the registration gave), "authorizationParams" (the PKCE
// method, resource and scope the authorization URL carried) and
// "tokenOpaque".
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { answerers, armTimeout, callOnce, fail, parseArgs } from './common.mjs';

const SCRIPT = 'oauth-code-client';
armTimeout(SCRIPT);
const call = parseArgs(SCRIPT);
const user = [...call.options].find((o) => o.startsWith('user='))?.slice(5) ?? 'alice';
// Never listened on: the user agent below stops at the redirect to it.
const redirectUrl = 'http://127.0.0.1:9/callback';

// provider is the SDK's OAuthClientProvider, holding everything in memory.
const provider = {
  saved: {},
  get redirectUrl() { return redirectUrl; },
  get clientMetadata() {
    return { client_name: SCRIPT, redirect_uris: [redirectUrl], grant_types: ['authorization_code'], response_types: ['code'], token_endpoint_auth_method: 'none' };
  },
  state: () => 'state-' + Math.random().toString(36).slice(2),
  clientInformation() { return this.saved.client; },
  saveClientInformation(info) { this.saved.client = info; },
  tokens() { return this.saved.tokens; },
  saveTokens(tokens) { this.saved.tokens = tokens; },
  redirectToAuthorization(url) { this.saved.authorizationUrl = url; },
  saveCodeVerifier(v) { this.saved.verifier = v; },
  codeVerifier() { return this.saved.verifier; },
};

// authorize plays the user agent from the authorization URL to the code:
// redirects followed by hand, cookies kept, each interaction page's form
// (login, then consent) submitted.
async function authorize(start) {
  const jar = new Map();
  let url = new URL(start);
  let method = 'GET';
  let body;
  for (let hop = 0; hop < 20; hop++) {
    const res = await fetch(url, {
      method,
      body,
      redirect: 'manual',
      headers: {
        cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; '),
        ...(body ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
      },
    });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const i = pair.indexOf('=');
      jar.set(pair.slice(0, i), pair.slice(i + 1));
    }
    method = 'GET';
    body = undefined;
    const location = res.headers.get('location');
    if (location) {
      url = new URL(location, url);
      if (url.href.startsWith(redirectUrl)) {
        const code = url.searchParams.get('code');
        if (!code) fail(SCRIPT, `the authorization server redirected back without a code: ${url.search}`);
        return code;
      }
      continue;
    }
    const page = await res.text();
    const prompt = page.match(/name="prompt" value="(\w+)"/)?.[1];
    if (res.status !== 200 || !prompt) fail(SCRIPT, `unexpected page at ${url.pathname} (${res.status}): ${page.slice(0, 500)}`);
    method = 'POST';
    body = new URLSearchParams(prompt === 'login' ? { prompt, login: user, password: 'any' } : { prompt }).toString();
  }
  return fail(SCRIPT, 'too many redirects');
}

// The first connection ends at the 401: the SDK registers and asks for
// the user's authorization.
const first = new StreamableHTTPClientTransport(call.url, { authProvider: provider });
try {
  await new Client({ name: SCRIPT, version: '1.0.0' }).connect(first);
  fail(SCRIPT, 'connected without authorization');
} catch (e) {
  if (!(e instanceof UnauthorizedError) || !provider.saved.authorizationUrl) fail(SCRIPT, `want the authorization redirect, got ${e}`);
}
const authorizationUrl = provider.saved.authorizationUrl;
await first.finishAuth(await authorize(authorizationUrl));

const { counts, elicit } = answerers(SCRIPT);
const client = new Client({ name: SCRIPT, version: '1.0.0' }, { capabilities: { elicitation: {} } });
client.setRequestHandler(ElicitRequestSchema, elicit);
const transport = new StreamableHTTPClientTransport(call.url, { authProvider: provider });
await callOnce(SCRIPT, client, transport, call, counts, () => ({
  protocolVersion: transport.protocolVersion ?? null,
  registeredClient: provider.saved.client?.client_id ?? null,
  authorizationParams: Object.fromEntries(['code_challenge_method', 'resource', 'scope'].map((k) => [k, authorizationUrl.searchParams.get(k)])),
  tokenOpaque: provider.saved.tokens.access_token.split('.').length !== 3,
}));
