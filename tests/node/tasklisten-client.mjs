// tasklisten-client.mjs: listens for task status notifications with the
// TypeScript SDK 2.x Client (@modelcontextprotocol/client) and the Tasks
// extension's helpers (@modelcontextprotocol/ext-tasks), as a host does:
// Client.listen with the filter contributeTaskFilterV2 builds, the client
// declaring the extension; each notifications/tasks the SDK dispatches
// (to its fallback notification handler, where ext-tasks' adapter reads
// them) is checked with isTaskStatusNotificationV2.
//
//   node tasklisten-client.mjs <authorization> <url> <taskId>...
//
// Prints one JSON line {"event":"ack","honored"} once the listen is
// acknowledged (honored is the SDK's honoredFilter), then one line
// {"event":"task","taskId","status","valid","text"} per notifications/tasks,
// and exits once every taskId has sent a terminal status.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { contributeTaskFilterV2, isTaskStatusNotificationV2 } from '@modelcontextprotocol/ext-tasks/core/v2';
import { armTimeout, fail } from './common.mjs';

const SCRIPT = 'tasklisten-client';
armTimeout(SCRIPT);
const [auth, url, ...taskIds] = process.argv.slice(2);
if (!auth || !url || taskIds.length === 0) {
  fail(SCRIPT, 'usage: node tasklisten-client.mjs <authorization> <url> <taskId>...', 2);
}
const say = (event) => process.stdout.write(JSON.stringify(event) + '\n');
const TERMINAL = new Set(['completed', 'failed', 'cancelled']);
const ended = new Set();

const client = new Client(
  { name: SCRIPT, version: '1.0.0' },
  { capabilities: { extensions: { 'io.modelcontextprotocol/tasks': {} } }, versionNegotiation: { mode: 'auto' } },
);
client.fallbackNotificationHandler = async (n) => {
  if (n.method !== 'notifications/tasks') return;
  say({
    event: 'task',
    taskId: n.params?.taskId,
    status: n.params?.status,
    valid: isTaskStatusNotificationV2(n),
    text: n.params?.result?.content?.[0]?.text ?? null,
  });
  if (TERMINAL.has(n.params?.status)) ended.add(n.params.taskId);
  if (taskIds.every((id) => ended.has(id))) {
    await client.close();
    process.exit(0);
  }
};
try {
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: auth } } }));
  const sub = await client.listen(contributeTaskFilterV2({}, taskIds).notifications);
  say({ event: 'ack', honored: sub.honoredFilter });
} catch (e) {
  fail(SCRIPT, e?.stack ?? String(e));
}
