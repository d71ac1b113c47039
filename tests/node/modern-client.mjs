// modern-client.mjs: a 2026-07-28 MCP client (@modelcontextprotocol/client 2.x)
// that negotiates the version (server/discover, falling back to initialize)
// and answers input requests.
//
//   node modern-client.mjs <mcp-url> <tool> [json-args] [terminate] [bearer=<token>]
//
// Connects, lists tools, calls <tool> and prints one JSON line:
//   {"protocolVersion", "era", "sessionId", "elicitations", "samplings", "rootsLists", "result"}
// The same handlers answer legacy server->client requests and modern
// input_required results (the SDK retries the call with inputResponses):
// elicitation is accepted with a value for every required field, sampling is
// answered with "sampled by modern-client", roots/list with file:///tmp.
// "terminate" sends DELETE for the session (only if one was made).
// A tool result with isError:true is still printed and exits 0; transport or
// JSON-RPC errors exit non-zero.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { answerers, armTimeout, callOnce, parseArgs } from './common.mjs';

const SCRIPT = 'modern-client';
armTimeout(SCRIPT);
const call = parseArgs(SCRIPT);

const { counts, elicit, sample, roots } = answerers(SCRIPT);
const client = new Client(
  { name: SCRIPT, version: '1.0.0' },
  {
    capabilities: { elicitation: { form: {}, url: {} }, sampling: {}, roots: { listChanged: true } },
    versionNegotiation: { mode: 'auto' },
  },
);
client.setRequestHandler('elicitation/create', elicit);
client.setRequestHandler('sampling/createMessage', sample);
client.setRequestHandler('roots/list', roots);

// bearer=<token>: sent as Authorization on every request.
const bearer = [...call.options].find((o) => o.startsWith('bearer='))?.slice('bearer='.length);
const transport = new StreamableHTTPClientTransport(call.url, bearer ? { requestInit: { headers: { Authorization: `Bearer ${bearer}` } } } : {});
await callOnce(SCRIPT, client, transport, call, counts, () => ({
  protocolVersion: client.getNegotiatedProtocolVersion() ?? null,
  era: client.getProtocolEra() ?? null,
  sessionId: transport.sessionId ?? null,
}));
