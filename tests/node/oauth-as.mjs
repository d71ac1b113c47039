// oauth-as.mjs: a real OAuth 2.0 authorization server (the npm package
// oauth2-mock-server) on 127.0.0.1, for the gateway's resource server tests.
//
//   node oauth-as.mjs <port>
//
// Serves OpenID Connect discovery, a JWKS with one RS256 key and a token
// endpoint (client_credentials and the other grants the package has), and
// prints one JSON line {"issuer": "http://127.0.0.1:<port>"} once it listens.
// As an authorization server following RFC 8707 and RFC 9068 does, a token's
// `aud` is the `resource` the client asked for and, for client_credentials,
// its `sub` is the client's id (the package leaves both out).
//
// Two routes of its own, for the tests, under /test/:
//   GET /test/counts          {"jwks": n, "token": n}: requests to each
//   GET /test/mint?claims=J&header=H&expires_in=S
//                            a token signed with the server's key, its
//                            claims over the defaults (iss, iat, exp, nbf)
//                            set from the JSON object J (a null deletes
//                            one), its header's from H (`kid`: another key
//                            id, the signature still the server's key's)
import http from 'node:http';
import { OAuth2Issuer, OAuth2Service } from 'oauth2-mock-server';

const port = Number(process.argv[2]);
if (!port) {
  process.stderr.write('usage: node oauth-as.mjs <port>\n');
  process.exit(2);
}
const issuer = new OAuth2Issuer();
issuer.url = `http://127.0.0.1:${port}`;
await issuer.keys.generate('RS256');
const service = new OAuth2Service(issuer);

service.on('beforeTokenSigning', (token, req) => {
  const body = req.body ?? {};
  if (body.resource) token.payload.aud = body.resource;
  if (body.grant_type === 'client_credentials') {
    const basic = (req.headers.authorization ?? '').match(/^Basic (.+)$/i);
    const id = basic ? decodeURIComponent(Buffer.from(basic[1], 'base64').toString().split(':')[0]) : body.client_id;
    token.payload.sub = id;
    token.payload.client_id = id;
  }
});

const counts = { jwks: 0, token: 0 };
const server = http.createServer(async (req, res) => {
  const url = new URL(req.url, issuer.url);
  if (url.pathname === '/jwks') counts.jwks++;
  if (url.pathname === '/token') counts.token++;
  if (url.pathname === '/test/counts') {
    res.setHeader('Content-Type', 'application/json');
    res.end(JSON.stringify(counts));
    return;
  }
  if (url.pathname === '/test/mint') {
    const claims = JSON.parse(url.searchParams.get('claims') ?? '{}');
    const headerOver = JSON.parse(url.searchParams.get('header') ?? '{}');
    const expiresIn = Number(url.searchParams.get('expires_in') ?? 3600);
    const token = await issuer.buildToken({
      expiresIn,
      scopesOrTransform: (header, payload) => {
        Object.assign(header, headerOver);
        for (const [k, v] of Object.entries(claims)) {
          if (v === null) delete payload[k];
          else payload[k] = v;
        }
      },
    });
    res.end(token);
    return;
  }
  service.requestHandler(req, res);
});
server.listen(port, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ issuer: issuer.url }) + '\n');
});
