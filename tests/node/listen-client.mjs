// listen-client.mjs: a 2026-07-28 MCP client (@modelcontextprotocol/client
// 2.x, version negotiation auto) that opens a subscriptions/listen for
// tools list changes and reports how the subscription ended, as the SDK
// tells it: 'graceful' (the server answered the listen request: the
// completion result), 'remote' (the stream ended without it, or an error
// came) or 'local'.
//
//   node listen-client.mjs <mcp-url>
//
// Prints two JSON lines: {"era", "honoredFilter"} once the subscription is
// acknowledged, then {"closed": "<how>"} when it ends. Exits non-zero on
// any failure before, and after MCP_SCRIPT_TIMEOUT_MS (20 s) in all.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { armTimeout, describeError, fail } from './common.mjs';

const SCRIPT = 'listen-client';
armTimeout(SCRIPT);
const url = process.argv[2];
if (!url) fail(SCRIPT, `usage: node ${SCRIPT}.mjs <mcp-url>`, 2);

const client = new Client({ name: SCRIPT, version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
client.onerror = (e) => {
  if (process.env.MCP_SCRIPT_VERBOSE) process.stderr.write(`${SCRIPT}: transport: ${describeError(e)}\n`);
};
let step = 'connect';
try {
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  step = 'subscriptions/listen';
  const sub = await client.listen({ toolsListChanged: true });
  process.stdout.write(JSON.stringify({ era: client.getProtocolEra() ?? null, honoredFilter: sub.honoredFilter }) + '\n');
  const closed = await sub.closed;
  process.stdout.write(JSON.stringify({ closed }) + '\n', () => process.exit(0));
} catch (e) {
  fail(SCRIPT, `${step} failed against ${url}: ${describeError(e)}`);
}
