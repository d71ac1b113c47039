// tasks2025-client.mjs: a 2025-11-25 client (@modelcontextprotocol/sdk 1.x)
// using the SDK's experimental tasks API (client.experimental.tasks): it
// lists the tools (so that the SDK knows which may be tasks), calls <tool>
// with callToolStream (task-augmented when the server declares tasks and
// the tool's taskSupport allows), answers elicitations with
// {confirm: true}, and prints one JSON line:
//   {"serverTasks", "types", "elicitations", "taskId", "result", "error"}
// where types lists the stream's message types in order.
//
//   node tasks2025-client.mjs <mcp-url> <tool> [json-args]
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { armTimeout, fail, parseArgs } from './common.mjs';

const SCRIPT = 'tasks2025-client';
armTimeout(SCRIPT);
const call = parseArgs(SCRIPT);

let elicitations = 0;
const client = new Client({ name: SCRIPT, version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
client.setRequestHandler(ElicitRequestSchema, async () => {
  elicitations++;
  return { action: 'accept', content: { confirm: true } };
});
const transport = new StreamableHTTPClientTransport(new URL(call.url));
try {
  await client.connect(transport);
  await client.listTools();
  const out = { serverTasks: !!client.getServerCapabilities()?.tasks, types: [], elicitations: 0, taskId: null, result: null, error: null };
  for await (const msg of client.experimental.tasks.callToolStream({ name: call.tool, arguments: call.args })) {
    out.types.push(msg.type);
    if (msg.type === 'taskCreated') out.taskId = msg.task.taskId;
    if (msg.type === 'result') out.result = msg.result;
    if (msg.type === 'error') out.error = String(msg.error?.message ?? msg.error);
  }
  out.elicitations = elicitations;
  process.stdout.write(JSON.stringify(out) + '\n');
  await transport.terminateSession().catch(() => {});
  process.exit(0);
} catch (e) {
  fail(SCRIPT, e?.stack ?? String(e));
}
