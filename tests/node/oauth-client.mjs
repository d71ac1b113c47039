// oauth-client.mjs: a 2025-11-25 MCP client (@modelcontextprotocol/sdk 1.x)
// that authenticates the way the MCP authorization specification asks, with
// the SDK's own client auth: on the gateway's 401 it reads the Protected
// Resource Metadata its WWW-Authenticate names, then the authorization
// server's metadata, gets a token for the resource (RFC 8707) with the
// client_credentials grant of a client registered beforehand, and retries.
//
//   node oauth-client.mjs <mcp-url> <tool> [json-args] client=<id> issuer=<url> [scope=<scopes>] [secret=<secret>]
//
// Then as legacy-client.mjs: lists tools, calls <tool> (answering an
// elicitation) and prints one JSON line, with "tokenAudience" and
// "tokenSubject" (the claims of the token it got, read without checking),
// or "tokenOpaque": true when the token is not a JWT.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { answerers, armTimeout, callOnce, parseArgs } from './common.mjs';

const SCRIPT = 'oauth-client';
armTimeout(SCRIPT);
const call = parseArgs(SCRIPT);
const opt = (name) => [...call.options].find((o) => o.startsWith(name + '='))?.slice(name.length + 1);

const provider = new ClientCredentialsProvider({
  clientId: opt('client') ?? 'mcp-client',
  clientSecret: opt('secret') ?? 'not-checked-by-the-mock',
  expectedIssuer: opt('issuer'),
  // client_credentials asks for the client's configured scope (the SDK
  // does not take it from a 403's challenge in that grant).
  scope: opt('scope'),
});
const { counts, elicit } = answerers(SCRIPT);
const client = new Client({ name: SCRIPT, version: '1.0.0' }, { capabilities: { elicitation: {} } });
client.setRequestHandler(ElicitRequestSchema, elicit);

const transport = new StreamableHTTPClientTransport(call.url, { authProvider: provider });
await callOnce(SCRIPT, client, transport, call, counts, () => {
  const parts = provider.tokens().access_token.split('.');
  if (parts.length !== 3) return { protocolVersion: transport.protocolVersion ?? null, tokenOpaque: true };
  const claims = JSON.parse(Buffer.from(parts[1], 'base64url').toString());
  return { protocolVersion: transport.protocolVersion ?? null, tokenAudience: claims.aud, tokenSubject: claims.sub };
});
