// The TypeScript SDK 1.12 client (it speaks 2025-03-26, the one revision with
// JSON-RPC batches, and sends no MCP-Protocol-Version header) initializes,
// then POSTs one batch of two requests, tools/list and tools/call <tool>
// <json-args>, with its own transport, and prints ONE JSON line:
// {"protocolVersion", "responses": [message...]} (in the order they came), or
// {"protocolVersion", "error": message} when the POST failed.
//
// usage: node interop-batch-client.mjs <mcp-url> <tool> [json-args]
import { Client } from 'sdk-1-12/client/index.js';
import { StreamableHTTPClientTransport } from 'sdk-1-12/client/streamableHttp.js';
import { armTimeout, emit, fail, parseArgs } from './common.mjs';

const SCRIPT = 'interop-batch-client';
armTimeout(SCRIPT);
const call = parseArgs(SCRIPT);
const client = new Client({ name: SCRIPT, version: '1.0.0' }, { capabilities: {} });
client.onerror = () => {};
const transport = new StreamableHTTPClientTransport(call.url);
try {
  await client.connect(transport);
} catch (e) {
  fail(SCRIPT, `connect failed: ${e?.message ?? e}`);
}
const protocolVersion = transport.protocolVersion ?? '2025-03-26';
const ids = new Set(['batch-1', 'batch-2']);
const responses = [];
let done;
const allIn = new Promise((resolve) => (done = resolve));
const passOn = transport.onmessage;
transport.onmessage = (msg, extra) => {
  if (ids.has(msg.id)) {
    responses.push(msg);
    if (responses.length === ids.size) done();
    return;
  }
  passOn?.(msg, extra);
};
try {
  await transport.send([
    { jsonrpc: '2.0', id: 'batch-1', method: 'tools/list', params: {} },
    { jsonrpc: '2.0', id: 'batch-2', method: 'tools/call', params: { name: call.tool, arguments: call.args } },
  ]);
} catch (e) {
  await client.close().catch(() => {});
  emit({ protocolVersion, error: String(e?.message ?? e) });
}
await allIn;
await client.close();
emit({ protocolVersion, responses });
