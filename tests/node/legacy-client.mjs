// legacy-client.mjs: a 2025-11-25 MCP client (@modelcontextprotocol/sdk 1.x,
// Streamable HTTP with sessions) that answers server->client requests.
//
//   node legacy-client.mjs <mcp-url> <tool> [json-args] [terminate]
//
// Connects (initialize), lists tools, calls <tool> and prints one JSON line:
//   {"protocolVersion", "sessionId", "elicitations", "samplings", "rootsLists", "result"}
// Elicitation is accepted with a value for every required field, sampling is
// answered with "sampled by legacy-client", roots/list with file:///tmp.
// "terminate" sends DELETE for the session (if one was made) before exiting.
// A tool result with isError:true is still printed and exits 0; transport or
// JSON-RPC errors exit non-zero.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { answerers, armTimeout, callOnce, parseArgs } from './common.mjs';

const SCRIPT = 'legacy-client';
armTimeout(SCRIPT);
const call = parseArgs(SCRIPT);

const { counts, elicit, sample, roots } = answerers(SCRIPT);
const client = new Client(
  { name: SCRIPT, version: '1.0.0' },
  { capabilities: { elicitation: {}, sampling: {}, roots: { listChanged: true } } },
);
client.setRequestHandler(ElicitRequestSchema, elicit);
client.setRequestHandler(CreateMessageRequestSchema, sample);
client.setRequestHandler(ListRootsRequestSchema, roots);

const transport = new StreamableHTTPClientTransport(call.url);
await callOnce(SCRIPT, client, transport, call, counts, () => ({
  protocolVersion: transport.protocolVersion ?? null,
  sessionId: transport.sessionId ?? null,
}));
