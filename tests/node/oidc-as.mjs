// oidc-as.mjs: a real OAuth 2.0 authorization server (the npm package
// oidc-provider) on 127.0.0.1 that issues OPAQUE access tokens and answers
// RFC 7662 introspection, for the gateway's resource server tests.
//
//   node oidc-as.mjs <port>
//
// Serves OpenID Connect discovery (naming its introspection_endpoint), a
// token endpoint with the client_credentials grant and resource indicators
// (RFC 8707: a token's audience is the `resource` asked for, any absolute
// URL, with the scopes `mcp` and `read`, for 600 seconds), introspection and
// revocation; and, for users, the authorization code grant (PKCE required)
// with open dynamic client registration (RFC 7591) and the package's
// development sign-in and consent pages (any login name is a user, any
// password). Two clients, both authenticating with HTTP Basic or the form:
//   mcp-client / mcp-client-secret    gets tokens (client_credentials)
//   mcp-gateway / mcp-gateway-secret  introspects them
// A token's subject (the `sub` of its introspection) is the user's login
// name, or for client_credentials the client's id, as RFC 9068 §2.2 has it
// for JWTs.
// Prints one JSON line {"issuer": "http://127.0.0.1:<port>"} once it listens.
//
// Routes of its own, for the tests, under /test/:
//   GET /test/counts          {"introspections": n, "maxInFlight": n, "tokens": n}
//   GET /test/delay?ms=N      every introspection answered N ms late from now on
import http from 'node:http';
import Provider from 'oidc-provider';

const port = Number(process.argv[2]);
if (!port) {
  process.stderr.write('usage: node oidc-as.mjs <port>\n');
  process.exit(2);
}
const issuer = `http://127.0.0.1:${port}`;

const provider = new Provider(issuer, {
  clients: [
    { client_id: 'mcp-client', client_secret: 'mcp-client-secret', grant_types: ['client_credentials'], response_types: [], redirect_uris: [], scope: 'mcp read' },
    { client_id: 'mcp-gateway', client_secret: 'mcp-gateway-secret', grant_types: [], response_types: [], redirect_uris: [] },
  ],
  scopes: ['mcp', 'read'],
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: true },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      getResourceServerInfo: (ctx, resource) => ({ scope: 'mcp read', audience: resource, accessTokenFormat: 'opaque', accessTokenTTL: 600 }),
    },
  },
  extraTokenClaims: (ctx, token) => (token.kind === 'ClientCredentials' ? { sub: token.clientId } : undefined),
});
// The defaults the package warns about (development keys, in-memory
// storage) are what a test wants; its warnings are noise here.
provider.on('server_error', (ctx, err) => process.stderr.write(`server_error: ${err.stack}\n`));

const counts = { introspections: 0, maxInFlight: 0, tokens: 0 };
let inFlight = 0;
let delay = 0;
const callback = provider.callback();
const server = http.createServer(async (req, res) => {
  const url = new URL(req.url, issuer);
  if (url.pathname === '/test/counts') {
    res.setHeader('Content-Type', 'application/json');
    res.end(JSON.stringify(counts));
    return;
  }
  if (url.pathname === '/test/delay') {
    delay = Number(url.searchParams.get('ms') ?? 0);
    res.end('ok');
    return;
  }
  if (url.pathname === '/token') counts.tokens++;
  if (url.pathname === '/token/introspection') {
    counts.introspections++;
    counts.maxInFlight = Math.max(counts.maxInFlight, ++inFlight);
    res.on('close', () => inFlight--);
    if (delay) await new Promise((r) => setTimeout(r, delay));
  }
  callback(req, res);
});
server.listen(port, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ issuer }) + '\n');
});
