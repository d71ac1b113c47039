// modern-client.mjs: a 2026-07-28 MCP client (@modelcontextprotocol/client 2.x)
// that negotiates the version (server/discover, falling back to initialize)
// and answers input requests.
//
//   node modern-client.mjs <mcp-url> <tool> [json-args] [terminate]
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
import {
  ROOTS,
  acceptElicitation,
  armTimeout,
  describeError,
  emit,
  fail,
  parseArgs,
  samplingResult,
} from './common.mjs';

const SCRIPT = 'modern-client';
armTimeout(SCRIPT);
const { url, tool, args, options } = parseArgs(SCRIPT);

const counts = { elicitations: 0, samplings: 0, rootsLists: 0 };
const client = new Client(
  { name: SCRIPT, version: '1.0.0' },
  {
    capabilities: { elicitation: { form: {}, url: {} }, sampling: {}, roots: { listChanged: true } },
    versionNegotiation: { mode: 'auto' },
  },
);
client.setRequestHandler('elicitation/create', async (req) => {
  counts.elicitations++;
  return acceptElicitation(req.params);
});
client.setRequestHandler('sampling/createMessage', async () => {
  counts.samplings++;
  return samplingResult(SCRIPT);
});
client.setRequestHandler('roots/list', async () => {
  counts.rootsLists++;
  return { roots: ROOTS };
});
client.onerror = (e) => {
  if (process.env.MCP_SCRIPT_VERBOSE) process.stderr.write(`${SCRIPT}: transport: ${describeError(e)}\n`);
};

const transport = new StreamableHTTPClientTransport(url);
let step = 'connect';
try {
  await client.connect(transport);
  const protocolVersion = client.getNegotiatedProtocolVersion() ?? null;
  const era = client.getProtocolEra() ?? null;
  const sessionId = transport.sessionId ?? null;

  step = 'tools/list';
  const { tools } = await client.listTools();
  if (!tools.some((t) => t.name === tool)) {
    fail(SCRIPT, `tool ${JSON.stringify(tool)} is not in tools/list (have: ${tools.map((t) => t.name).join(', ')})`);
  }

  step = `tools/call ${tool}`;
  const result = await client.callTool({ name: tool, arguments: args });

  if (options.has('terminate') && transport.sessionId) {
    step = 'DELETE session';
    await transport.terminateSession();
  }
  step = 'close';
  await client.close();
  emit({ protocolVersion, era, sessionId, ...counts, result });
} catch (e) {
  fail(SCRIPT, `${step} failed against ${url}: ${describeError(e)}`);
}
