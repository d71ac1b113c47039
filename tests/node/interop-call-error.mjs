// The TypeScript SDK 2.x client, pinned to 2026-07-28, calls a tool and
// prints ONE JSON line: {"era", "result"} when the call succeeds, or
// {"era", "error": {"name", "code", "message"}} when it fails, so that the Go
// tests can tell a JSON-RPC error the server answered (a ProtocolError with
// its code) from a transport failure (no code).
//
// usage: node interop-call-error.mjs <mcp-url> <tool> [json-args]
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { armTimeout, emit, fail, parseArgs } from './common.mjs';

const SCRIPT = 'interop-call-error';
armTimeout(SCRIPT);
const call = parseArgs(SCRIPT);
const client = new Client({ name: SCRIPT, version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
client.onerror = () => {};
try {
  await client.connect(new StreamableHTTPClientTransport(call.url));
} catch (e) {
  fail(SCRIPT, `connect failed: ${e?.message ?? e}`);
}
const era = client.getProtocolEra() ?? null;
try {
  const result = await client.callTool({ name: call.tool, arguments: call.args });
  await client.close();
  emit({ era, result });
} catch (e) {
  await client.close().catch(() => {});
  emit({ era, error: { name: e?.constructor?.name ?? typeof e, code: typeof e?.code === 'number' ? e.code : null, message: String(e?.message ?? e) } });
}
