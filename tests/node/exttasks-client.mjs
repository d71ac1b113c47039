// exttasks-client.mjs: a Tasks requester built on @modelcontextprotocol/ext-tasks
// (the Tasks extension's TypeScript client, on @modelcontextprotocol/client 2.x),
// driven by a Go test through a gateway fleet whose instances it is told to
// switch between.
//
//   node exttasks-client.mjs <authorization> <tool> <json-args> <url0> <url1> ...
//
// The SDK Client connects (server/discover) to the last URL. ext-tasks sends
// tools/call and tasks/* through rawDispatch (the host's part, as its README
// asks of a 2026-07-28 Tasks server): one POST per request to the current
// target, url0 at first; a JSON-RPC error in the body is handed to ext-tasks
// as the response's error, whatever the HTTP status (what a host that reads
// the body does), and a body that is no JSON-RPC response is a DispatchError.
//
// ext-tasks polls the task and answers its inputRequests with tasks/update
// through the session's onInputRequest. Each question is printed on stdout
// as one JSON line {"event":"asked","taskId","message"}; the script then
// reads one line on stdin, {"target":<index>,"answer":"<text>"}, switches
// every later request to that URL and answers accept with {answer}. At the
// end one line {"event":"outcome","status","text"|"error","updates"}:
// updates lists every tasks/update as {"status","retryAfter","ms","error"}.
import { createInterface } from 'node:readline';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createTaskSessionFromClient, DispatchError } from '@modelcontextprotocol/ext-tasks/client';
import { armTimeout, fail } from './common.mjs';

const SCRIPT = 'exttasks-client';
armTimeout(SCRIPT);
const [auth, tool, rawArgs, ...urls] = process.argv.slice(2);
if (!auth || !tool || urls.length === 0) {
  fail(SCRIPT, 'usage: node exttasks-client.mjs <authorization> <tool> <json-args> <url>...', 2);
}
const VERSION = '2026-07-28';
const clientInfo = { name: SCRIPT, version: '1.0.0' };
const clientCapabilities = { elicitation: { form: {} } };
let target = 0;
let nextId = 1;
const updates = [];

const say = (event) => process.stdout.write(JSON.stringify(event) + '\n');

// rpcResponse finds the JSON-RPC response to id in a JSON or SSE body.
function rpcResponse(contentType, text, id) {
  const bodies = contentType.includes('text/event-stream')
    ? text.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim())
    : [text];
  for (const b of bodies) {
    try {
      const msg = JSON.parse(b);
      if (msg && msg.id === id && ('result' in msg || 'error' in msg)) return msg;
    } catch {
      // not JSON: no response in it
    }
  }
  return undefined;
}

// rawDispatch POSTs one framed request to the current target.
async function rawDispatch(request, options = {}) {
  const id = nextId++;
  const name = request.method === 'tools/call' ? request.params?.name : undefined;
  const headers = {
    'Content-Type': 'application/json',
    Accept: 'application/json, text/event-stream',
    Authorization: auth,
    'MCP-Protocol-Version': VERSION,
    'Mcp-Method': request.method,
    ...(name === undefined ? {} : { 'Mcp-Name': name }),
    ...(options.context?.headers ?? {}),
  };
  const start = Date.now();
  const res = await fetch(urls[target], {
    method: 'POST',
    headers,
    body: JSON.stringify({ jsonrpc: '2.0', id, ...request }),
    signal: options.signal,
  });
  const msg = rpcResponse(res.headers.get('content-type') ?? '', await res.text(), id);
  if (request.method === 'tasks/update') {
    updates.push({
      status: res.status,
      retryAfter: res.headers.get('retry-after'),
      ms: Date.now() - start,
      ...(msg?.error ? { error: msg.error } : {}),
    });
  }
  if (msg === undefined) throw new DispatchError(`HTTP ${res.status}: no JSON-RPC response`);
  return msg.error ? { kind: 'error', error: msg.error } : { kind: 'result', result: msg.result };
}

// answerFromTest prints the question and waits for the test's line.
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
async function onInputRequest(request, context) {
  if (request.kind !== 'elicitation') throw new Error(`unexpected ${request.kind} request`);
  say({ event: 'asked', taskId: context.taskId, message: request.params.message });
  const { value, done } = await lines.next();
  if (done) fail(SCRIPT, 'stdin closed before an answer');
  const order = JSON.parse(value);
  target = order.target;
  return { action: 'accept', content: { answer: order.answer } };
}

const client = new Client(clientInfo, { capabilities: clientCapabilities, versionNegotiation: { mode: 'auto' } });
const transport = new StreamableHTTPClientTransport(new URL(urls[urls.length - 1]), {
  requestInit: { headers: { Authorization: auth } },
});
try {
  await client.connect(transport);
  const session = createTaskSessionFromClient(client, {
    endpointId: 'gateway-fleet',
    rawDispatch,
    v2RequestFraming: { protocolVersion: VERSION, clientInfo, clientCapabilities },
    onInputRequest,
    onError: (e) => process.stderr.write(`${SCRIPT}: ${e?.stack ?? e}\n`),
  });
  const execution = await session.callTool(tool, JSON.parse(rawArgs || '{}'), { task: { preference: 'require' } });
  const { outcome } = await execution.settle();
  const end = { event: 'outcome', status: outcome.status, updates };
  if (outcome.status === 'completed') end.text = outcome.result.content?.[0]?.text ?? null;
  if (outcome.status === 'failed') end.error = { message: outcome.error.message, code: outcome.error.code ?? null };
  say(end);
  await session.close();
  await client.close();
  process.exit(0);
} catch (e) {
  fail(SCRIPT, e?.stack ?? String(e));
}
