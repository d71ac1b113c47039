// A fastmcp server (legacy 2025 Streamable HTTP, sessions) on 127.0.0.1:<port>/mcp,
// with one tool, `echo`. fastmcp answers a tools/call for an unknown tool with
// -32601 (Method not found), which the interop tests rely on.
//
// usage: node interop-fastmcp-server.mjs <port>
import { FastMCP } from 'fastmcp';
import { z } from 'zod';

const port = Number(process.argv[2]);
if (!port) {
  process.stderr.write('usage: node interop-fastmcp-server.mjs <port>\n');
  process.exit(2);
}
const server = new FastMCP({ name: 'interop-fastmcp', version: '1.0.0' });
server.addTool({
  name: 'echo',
  description: 'Echoes its text.',
  parameters: z.object({ text: z.string() }),
  execute: async ({ text }) => text,
});
await server.start({ transportType: 'httpStream', httpStream: { host: '127.0.0.1', port, endpoint: '/mcp' } });
