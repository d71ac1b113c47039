// A legacy (2025-11-25) MCP server with the 2025 *experimental* tasks of
// @modelcontextprotocol/sdk 1.x (registerToolTask, InMemoryTaskStore,
// InMemoryTaskMessageQueue), on 127.0.0.1:<port>/mcp with Streamable HTTP
// sessions. A fixture of ours: no published server exposes 2025 tasks with
// the behaviour the gateway's bridge needs to be tested against (a task
// that asks for input in-line, one that fails), so this one uses the SDK's
// own task machinery and adds nothing of its own to the wire.
//
// It declares capabilities.tasks (requests.tools.call, list, cancel). Its
// tools:
//   slow_task{seconds}    optional: a task that completes after `seconds`
//                         with "Done after {seconds}s"
//   ask_task{filename}    optional: a task that asks "Delete {filename}?"
//                         (a form elicitation, {confirm:boolean}) and ends
//                         "Deleted {filename}" or "Kept {filename}"; as the
//                         SDK does, the question waits in the task's queue
//                         until the client calls tasks/result on the session
//   failing_task{}        optional: a task that fails after 300 ms
//   echo{text}            a plain tool (no tasks)
//
// and, for the conformance suite's tasks-* scenarios (docs/testing.md says
// what they check), the same tools as 2025 task tools:
//   slow_compute{seconds,label} optional, completes after `seconds`
//   failing_job{}               required, completes after 1 s with isError
//   protocol_error_job{}        required, fails after 500 ms
//   confirm_delete{filename}    optional, asks "Delete {filename}?"
//   multi_input{}               optional, asks two names at once
//   greet{name}                 a plain tool, "Hello, {name}!"
//   test_tool_with_task{}       a plain tool that asks a name in-line at
//                               once (no task: the gateway's task policy
//                               makes it one), then works 1.5 s
//
// GET /seen answers the JSON-RPC methods it was sent, in order, each as
// "method" or "method taskId" (tasks/*), so that tests can see what reached
// it.
//
// usage: node tasks2025-server.mjs <port>
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import * as z from 'zod/v4';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { ElicitResultSchema, isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { InMemoryTaskStore, InMemoryTaskMessageQueue } from '@modelcontextprotocol/sdk/experimental/tasks/stores/in-memory.js';

const port = Number(process.argv[2]);
if (!port) {
  process.stderr.write('usage: node tasks2025-server.mjs <port>\n');
  process.exit(2);
}

const taskStore = new InMemoryTaskStore();
const taskMessageQueue = new InMemoryTaskMessageQueue();

// later runs fn after ms, swallowing the error of a task that was
// cancelled meanwhile (the store refuses a result for it).
function later(ms, fn) {
  setTimeout(() => { Promise.resolve().then(fn).catch(() => {}); }, ms);
}

function newServer() {
  const server = new McpServer(
    { name: 'tasks2025-fixture', version: '1.0.0' },
    {
      capabilities: { tasks: { requests: { tools: { call: {} } }, list: {}, cancel: {} } },
      taskStore,
      taskMessageQueue,
      defaultTaskPollInterval: 100,
    },
  );
  const handlers = (run) => ({
    async createTask(args, extra) {
      const task = await extra.taskStore.createTask({ ttl: extra.taskRequestedTtl ?? 60000, pollInterval: 100 });
      run(args, extra.taskStore, task.taskId);
      return { task };
    },
    async getTask(_args, extra) { return await extra.taskStore.getTask(extra.taskId); },
    async getTaskResult(_args, extra) { return await extra.taskStore.getTaskResult(extra.taskId); },
  });

  server.experimental.tasks.registerToolTask('slow_task', {
    description: 'Completes after `seconds`.',
    inputSchema: { seconds: z.number() },
    execution: { taskSupport: 'optional' },
  }, handlers(({ seconds }, store, id) => later(seconds * 1000, () =>
    store.storeTaskResult(id, 'completed', { content: [{ type: 'text', text: `Done after ${seconds}s` }] }))));

  server.experimental.tasks.registerToolTask('ask_task', {
    description: 'Asks whether to delete a file.',
    inputSchema: { filename: z.string() },
    execution: { taskSupport: 'optional' },
  }, handlers(({ filename }, store, id) => later(0, async () => {
    // As the SDK's own extra.sendRequest does for a request within a task.
    await store.updateTaskStatus(id, 'input_required');
    const answer = await server.server.elicitInput({
      mode: 'form',
      message: `Delete ${filename}?`,
      requestedSchema: { type: 'object', properties: { confirm: { type: 'boolean' } }, required: ['confirm'] },
    }, { relatedTask: { taskId: id } });
    const yes = answer.action === 'accept' && answer.content?.confirm === true;
    await store.updateTaskStatus(id, 'working');
    await store.storeTaskResult(id, 'completed', { content: [{ type: 'text', text: `${yes ? 'Deleted' : 'Kept'} ${filename}` }] });
  })));

  server.experimental.tasks.registerToolTask('failing_task', {
    description: 'Fails after 300 ms.',
    inputSchema: {},
    execution: { taskSupport: 'optional' },
  }, handlers((_args, store, id) => later(300, () =>
    store.storeTaskResult(id, 'failed', { content: [{ type: 'text', text: 'the job broke' }], isError: true }))));

  // The conformance suite's tools (see the header).
  const text = (t) => ({ content: [{ type: 'text', text: t }] });
  const ask = (id, message, properties) => server.server.elicitInput({
    mode: 'form', message, requestedSchema: { type: 'object', properties },
  }, { relatedTask: { taskId: id } });
  server.experimental.tasks.registerToolTask('slow_compute', {
    inputSchema: { seconds: z.number(), label: z.string().optional() },
    execution: { taskSupport: 'optional' },
  }, handlers(({ seconds, label }, store, id) => later(seconds * 1000, () =>
    store.storeTaskResult(id, 'completed', text(`computed ${label ?? ''} in ${seconds}s`)))));
  server.experimental.tasks.registerToolTask('failing_job', {
    inputSchema: {},
    execution: { taskSupport: 'required' },
  }, handlers((_args, store, id) => later(1000, () =>
    store.storeTaskResult(id, 'completed', { ...text('the job failed'), isError: true }))));
  server.experimental.tasks.registerToolTask('protocol_error_job', {
    inputSchema: {},
    execution: { taskSupport: 'required' },
  }, handlers((_args, store, id) => later(500, () =>
    store.storeTaskResult(id, 'failed', { ...text('internal error in the job'), isError: true }))));
  server.experimental.tasks.registerToolTask('confirm_delete', {
    inputSchema: { filename: z.string() },
    execution: { taskSupport: 'optional' },
  }, handlers(({ filename }, store, id) => later(0, async () => {
    await store.updateTaskStatus(id, 'input_required');
    const answer = await ask(id, `Delete ${filename}?`, { confirm: { type: 'boolean' } });
    await store.updateTaskStatus(id, 'working');
    await store.storeTaskResult(id, 'completed', text(answer.content?.confirm ? `Deleted ${filename}` : `Kept ${filename}`));
  })));
  server.experimental.tasks.registerToolTask('multi_input', {
    inputSchema: {},
    execution: { taskSupport: 'optional' },
  }, handlers((_args, store, id) => later(0, async () => {
    await store.updateTaskStatus(id, 'input_required');
    const [a, b] = await Promise.all([
      ask(id, 'First name?', { name: { type: 'string' } }),
      ask(id, 'Second name?', { name: { type: 'string' } }),
    ]);
    await store.updateTaskStatus(id, 'working');
    await store.storeTaskResult(id, 'completed', text(`Got ${a.content?.name} and ${b.content?.name}`));
  })));
  server.registerTool('greet', { inputSchema: { name: z.string() } },
    async ({ name }) => text(`Hello, ${name}!`));
  server.registerTool('test_tool_with_task', { inputSchema: {} }, async (_args, extra) => {
    const answer = await extra.sendRequest({
      method: 'elicitation/create',
      params: { mode: 'form', message: 'What is your name?', requestedSchema: { type: 'object', properties: { name: { type: 'string' } } } },
    }, ElicitResultSchema);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    return text(`Hello, ${answer.content?.name}!`);
  });

  server.registerTool('echo', { description: 'Echoes its text.', inputSchema: { text: z.string() } },
    async ({ text }) => ({ content: [{ type: 'text', text }] }));
  return server;
}

const transports = new Map(); // session id -> transport
const seen = [];               // see GET /seen

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      if (chunks.length === 0) return resolve(undefined);
      try { resolve(JSON.parse(Buffer.concat(chunks).toString('utf8'))); } catch (e) { reject(e); }
    });
    req.on('error', reject);
  });
}

const httpServer = http.createServer(async (req, res) => {
  try {
    if (req.url === '/seen') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(seen));
      return;
    }
    if (!req.url.startsWith('/mcp')) { res.writeHead(404).end(); return; }
    const body = req.method === 'POST' ? await readBody(req) : undefined;
    for (const m of Array.isArray(body) ? body : [body]) {
      if (typeof m?.method === 'string') {
        seen.push(m.method.startsWith('tasks/') ? `${m.method} ${m.params?.taskId}` : m.method);
      }
    }
    const sid = req.headers['mcp-session-id'];
    let transport = sid ? transports.get(sid) : undefined;
    if (!transport) {
      if (sid || req.method !== 'POST' || !isInitializeRequest(body)) {
        res.writeHead(sid ? 404 : 400, { 'content-type': 'application/json' })
          .end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message: sid ? 'Session not found' : 'Bad Request: no session' } }));
        return;
      }
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => { transports.set(id, transport); },
      });
      transport.onclose = () => { if (transport.sessionId) transports.delete(transport.sessionId); };
      await newServer().connect(transport);
    }
    await transport.handleRequest(req, res, body);
  } catch (e) {
    if (!res.headersSent) res.writeHead(500).end(String(e));
  }
});
httpServer.listen(port, '127.0.0.1');
