// @ai-sdk/mcp as a legacy client (protocolVersionDiscovery off: initialize,
// then the 2025 Streamable HTTP transport). Right after initialize it opens
// the standalone GET stream twice at once (once when the negotiated version
// is set, once when notifications/initialized is accepted). The script
// records the status of every GET through its fetch, lists the tools, waits
// until two GETs were answered (or 10 s), and prints ONE JSON line:
// {"gets": [status...], "errors": [message...], "tools": [name...]}.
//
// usage: node interop-aisdk-gets.mjs <mcp-url>
import { createMCPClient } from '@ai-sdk/mcp';
import { armTimeout, emit, fail } from './common.mjs';

const SCRIPT = 'interop-aisdk-gets';
armTimeout(SCRIPT);
const url = process.argv[2];
if (!url) fail(SCRIPT, 'usage: node interop-aisdk-gets.mjs <mcp-url>', 2);

const gets = [];
const errors = [];
let answered;
const twoGets = new Promise((resolve) => (answered = resolve));
const recording = async (input, init) => {
  const resp = await fetch(input, init);
  if ((init?.method ?? 'GET').toUpperCase() === 'GET') {
    gets.push(resp.status);
    if (gets.length >= 2) answered();
  }
  return resp;
};
let client;
try {
  client = await createMCPClient({
    transport: { type: 'http', url, fetch: recording },
    protocolVersionDiscovery: false,
    onUncaughtError: (e) => errors.push(String(e?.message ?? e)),
  });
  const tools = await client.listTools();
  await Promise.race([twoGets, new Promise((r) => setTimeout(r, 10000))]);
  await client.close();
  emit({ gets, errors, tools: tools.tools.map((t) => t.name) });
} catch (e) {
  fail(SCRIPT, `failed against ${url}: ${e?.message ?? e}; gets ${JSON.stringify(gets)}; errors ${JSON.stringify(errors)}`);
}
