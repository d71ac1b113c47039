// An OpenAPI→MCP bridge in front of the REST face: @ivotoby/openapi-mcp-
// server (stdio), given the gateway's openapi.json and the face's base,
// driven by the TypeScript SDK 1.x client. It calls a tool that asks
// questions through the bridge's tools made from the document, as an MCP
// host would: the PUT that starts the call, then the advance, with a
// plain accept answer each time the call awaits one, until it ends. As a
// model fills a tool's arguments from its inputSchema, each call's
// arguments are the first of their possible shapes that the bridge's
// inputSchema for that tool accepts (the answer's members as arguments,
// or the answer as one `body` argument, the bridge's form for a body
// whose schema has no properties). Prints ONE JSON line {"tools": [the
// bridge's tool names], "steps": [the call resource after each step]}.
//
// usage: node openapi-bridge.mjs <document-url> <api-base-url> <tool> <call-id> <json-args> <field> <value>
//   each question is answered {"action":"accept","content":{<field>:<value>}}
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { createRequire } from 'node:module';
import path from 'node:path';
import { armTimeout, describeError, emit, fail } from './common.mjs';

const SCRIPT = 'openapi-bridge';
armTimeout(SCRIPT);
const [docURL, apiBase, tool, callID, rawArgs, field, value] = process.argv.slice(2);
if (!value) fail(SCRIPT, 'usage: node openapi-bridge.mjs <document-url> <api-base-url> <tool> <call-id> <json-args> <field> <value>', 2);

const require = createRequire(import.meta.url);
const bridge = path.join(path.dirname(require.resolve('@ivotoby/openapi-mcp-server/package.json')), 'bin', 'mcp-server.js');
const transport = new StdioClientTransport({
  command: process.execPath,
  args: [bridge, '--transport', 'stdio', '--openapi-spec', docURL, '--api-base-url', apiBase],
  stderr: 'pipe',
});
let bridgeLog = '';
transport.stderr?.on('data', (d) => {
  bridgeLog = (bridgeLog + d).slice(-4000);
});
const client = new Client({ name: SCRIPT, version: '1.0.0' });
let step = 'connect';
try {
  await client.connect(transport);
  step = 'tools/list';
  const { tools } = await client.listTools();
  const validator = new AjvJsonSchemaValidator();
  // find is the bridge's tool for op (named after its operationId,
  // abbreviated: call_ask → call-ask, advance_ask_call →
  // advance-ask-call), and the first of shapes (the arguments a model
  // could give it) that its inputSchema accepts.
  const find = (op, ...shapes) => {
    const t = tools.find((t) => t.name.startsWith(op) && t.name.includes(tool));
    if (!t) fail(SCRIPT, `no ${op} tool for ${tool} (have: ${tools.map((t) => t.name).join(', ')})`);
    const fits = validator.getValidator(t.inputSchema);
    const args = shapes.find((a) => fits(a).valid);
    if (!args) fail(SCRIPT, `no arguments fit ${t.name}'s inputSchema ${JSON.stringify(t.inputSchema)}`);
    return { name: t.name, arguments: args };
  };
  const answer = { action: 'accept', content: { [field]: value } };
  const start = find('call', { toolCallID: callID, 'Idempotency-Key': `${callID}-key`, arguments: JSON.parse(rawArgs) });
  const advance = find('advance', { toolCallID: callID, ...answer }, { toolCallID: callID, body: answer });
  const read = (res) => {
    const text = res.content?.find((c) => c.type === 'text')?.text ?? '';
    try {
      return JSON.parse(text);
    } catch {
      return { bridgeText: text, isError: res.isError ?? false };
    }
  };
  const steps = [];
  step = `tools/call ${start.name}`;
  let call = read(await client.callTool(start));
  steps.push(call);
  for (let i = 0; i < 8 && typeof call.status === 'string' && call.status.startsWith('awaiting'); i++) {
    step = `tools/call ${advance.name}`;
    call = read(await client.callTool(advance));
    steps.push(call);
  }
  await client.close();
  emit({ tools: tools.map((t) => t.name), steps });
} catch (e) {
  await client.close().catch(() => {});
  fail(SCRIPT, `${step} failed: ${describeError(e)}\nbridge stderr: ${bridgeLog}`);
}
