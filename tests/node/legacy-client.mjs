// legacy-client.mjs: a 2025-11-25 MCP client (@modelcontextprotocol/sdk 1.x,
// Streamable HTTP with sessions) that answers server->client requests.
//
//   node legacy-client.mjs <mcp-url> <tool> [json-args] [terminate]
//
// Connects (initialize), lists tools, calls <tool> and prints one JSON line:
//   {"protocolVersion", "sessionId", "elicitations", "samplings", "rootsLists", "result"}
// Elicitation is accepted with a value for every required field, sampling is
// answered with "sampled by legacy-client", roots/list with file:///tmp.
// "terminate" sends DELETE for the session before exiting.
// A tool result with isError:true is still printed and exits 0; transport or
// JSON-RPC errors exit non-zero.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
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

const SCRIPT = 'legacy-client';
armTimeout(SCRIPT);
const { url, tool, args, options } = parseArgs(SCRIPT);

const counts = { elicitations: 0, samplings: 0, rootsLists: 0 };
const client = new Client(
  { name: SCRIPT, version: '1.0.0' },
  { capabilities: { elicitation: {}, sampling: {}, roots: { listChanged: true } } },
);
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  counts.elicitations++;
  return acceptElicitation(req.params);
});
client.setRequestHandler(CreateMessageRequestSchema, async () => {
  counts.samplings++;
  return samplingResult(SCRIPT);
});
client.setRequestHandler(ListRootsRequestSchema, async () => {
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
  const sessionId = transport.sessionId ?? null;
  const protocolVersion = transport.protocolVersion ?? null;

  step = 'tools/list';
  const { tools } = await client.listTools();
  if (!tools.some((t) => t.name === tool)) {
    fail(SCRIPT, `tool ${JSON.stringify(tool)} is not in tools/list (have: ${tools.map((t) => t.name).join(', ')})`);
  }

  step = `tools/call ${tool}`;
  const result = await client.callTool({ name: tool, arguments: args });

  if (options.has('terminate')) {
    step = 'DELETE session';
    await transport.terminateSession();
  }
  step = 'close';
  await client.close();
  emit({ protocolVersion, sessionId, ...counts, result });
} catch (e) {
  fail(SCRIPT, `${step} failed against ${url}: ${describeError(e)}`);
}
