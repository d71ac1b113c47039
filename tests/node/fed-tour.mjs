// fed-tour.mjs: one client session over a whole MCP endpoint, driven by a
// plan, with one of three clients.
//
//   node fed-tour.mjs <legacy|modern|aisdk> <mcp-url> <plan-json>
//
// legacy: @modelcontextprotocol/sdk 1.x (2025-11-25, sessions);
// modern: @modelcontextprotocol/client 2.x with versionNegotiation auto;
// aisdk: @ai-sdk/mcp (probes server/discover; answers elicitation only and
// has neither subscriptions nor list changes: leave sampling tools,
// "subscriptions" and "changes" out of its plan).
//
// The plan (every member optional), done in this order after listing tools,
// resources, resource templates and prompts (every page):
//   "calls": [{"name", "arguments"}]        tools/call
//   "reads": [uri]                          resources/read
//   "prompts": [{"name", "arguments"}]      prompts/get
//   "completes": [{"ref", "argument", "context"}]   completion/complete
//   "subscriptions": [uri]   legacy resources/subscribe, modern
//       subscriptions/listen with resourceSubscriptions; then waits for
//       notifications/resources/updated about uri
//   "changes": [{"call", "notification"}]   listens for list changes
//       (modern: one subscriptions/listen for every list; legacy: the
//       session's GET stream), then for each calls the tool and waits for
//       the notification
//   "refused": [{"method", "params"}]       requests expected to fail
//       (tools/call, resources/read, prompts/get; legacy:
//       resources/subscribe; modern: subscriptions/listen)
//   "bearer": token          legacy, modern: sent as Authorization: Bearer
//       on every request
// It prints one JSON line:
//   {"protocolVersion", "era", "tools", "resources", "templates",
//    "promptNames", "calls", "reads", "prompts", "completions", "updated"
//    (the uris updates came for), "changed" (the notifications that came),
//    "refused" (each one's {"method", "code", "message", "data"}, or its
//    "result" when it did not fail), "elicitations", "samplings",
//    "rootsLists"}
// Elicitations and sampling are answered as common.mjs does. Any failure,
// or HARD_TIMEOUT_MS passing, exits non-zero naming the step.
import { ElicitationRequestSchema as AISDKElicitationRequestSchema, createMCPClient } from '@ai-sdk/mcp';
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport } from '@modelcontextprotocol/client';
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  PromptListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { HARD_TIMEOUT_MS, acceptElicitation, answerers, describeError, emit, fail } from './common.mjs';

const SCRIPT = 'fed-tour';
let step = 'start';
setTimeout(() => fail(SCRIPT, `${step}: timed out after ${HARD_TIMEOUT_MS} ms`, 124), HARD_TIMEOUT_MS).unref();
const [flavour, rawURL, rawPlan] = process.argv.slice(2);
if (!['legacy', 'modern', 'aisdk'].includes(flavour) || !rawURL) {
  fail(SCRIPT, 'usage: node fed-tour.mjs <legacy|modern|aisdk> <mcp-url> [plan-json]', 2);
}
let plan;
try {
  plan = JSON.parse(rawPlan || '{}');
} catch (e) {
  fail(SCRIPT, `plan is not JSON: ${e.message}`, 2);
}
const url = new URL(rawURL);

const { counts, elicit, sample, roots } = answerers(SCRIPT);
// updated: the uris notifications/resources/updated came for; waiting: the
// one the script waits for, and how it is told.
const updated = [];
let waiting = { uri: null, seen: () => {} };
const onUpdated = (n) => {
  const uri = n.params?.uri;
  if (!updated.includes(uri)) updated.push(uri);
  if (uri === waiting.uri) waiting.seen();
};

let client, transport;
if (flavour === 'aisdk') {
  // connected below: createMCPClient connects as it is made
} else if (flavour === 'legacy') {
  client = new LegacyClient(
    { name: SCRIPT, version: '1.0.0' },
    { capabilities: { elicitation: {}, sampling: {}, roots: { listChanged: true } } },
  );
  client.setRequestHandler(ElicitRequestSchema, elicit);
  client.setRequestHandler(CreateMessageRequestSchema, sample);
  client.setRequestHandler(ListRootsRequestSchema, roots);
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, onUpdated);
  transport = new LegacyTransport(url, requestInit());
} else {
  client = new ModernClient(
    { name: SCRIPT, version: '1.0.0' },
    {
      capabilities: { elicitation: { form: {}, url: {} }, sampling: {}, roots: { listChanged: true } },
      versionNegotiation: { mode: 'auto' },
    },
  );
  client.setRequestHandler('elicitation/create', elicit);
  client.setRequestHandler('sampling/createMessage', sample);
  client.setRequestHandler('roots/list', roots);
  client.setNotificationHandler('notifications/resources/updated', onUpdated);
  transport = new ModernTransport(url, requestInit());
}

// requestInit is the transports' option carrying the plan's bearer token.
function requestInit() {
  return plan.bearer ? { requestInit: { headers: { Authorization: `Bearer ${plan.bearer}` } } } : {};
}

// legacyNotification is the 1.x SDK's schema for a list-changed method.
function legacyNotification(method) {
  return {
    'notifications/tools/list_changed': ToolListChangedNotificationSchema,
    'notifications/prompts/list_changed': PromptListChangedNotificationSchema,
  }[method];
}

// all gathers every page of a list (the @ai-sdk/mcp client takes the
// cursor in params).
async function all(list, key) {
  const out = [];
  let cursor;
  do {
    const p = cursor ? { cursor } : undefined;
    const page = await list(flavour === 'aisdk' ? { params: p } : p);
    out.push(...page[key]);
    cursor = page.nextCursor;
  } while (cursor);
  return out;
}

step = 'connect';
try {
  let out;
  if (flavour === 'aisdk') {
    client = await createMCPClient({ transport: { type: 'http', url: url.href }, capabilities: { elicitation: {} } });
    client.onElicitationRequest(AISDKElicitationRequestSchema, (req) => {
      counts.elicitations++;
      return acceptElicitation(req.params);
    });
    out = { protocolVersion: client.initializeResult?.protocolVersion ?? null, era: null };
  } else {
    await client.connect(transport);
    out = {
      protocolVersion:
        flavour === 'legacy' ? (transport.protocolVersion ?? null) : (client.getNegotiatedProtocolVersion() ?? null),
      era: flavour === 'legacy' ? 'legacy' : (client.getProtocolEra() ?? null),
    };
  }
  step = 'tools/list';
  out.tools = (await all((p) => client.listTools(p), 'tools')).map((t) => t.name);
  step = 'resources/list';
  out.resources = (await all((p) => client.listResources(p), 'resources')).map((r) => r.uri);
  step = 'resources/templates/list';
  out.templates = (await all((p) => client.listResourceTemplates(p), 'resourceTemplates')).map((r) => r.uriTemplate);
  step = 'prompts/list';
  out.promptNames = (await all((p) => client.listPrompts(p), 'prompts')).map((p) => p.name);

  out.calls = [];
  for (const c of plan.calls || []) {
    step = `tools/call ${c.name}`;
    out.calls.push({ name: c.name, result: await client.callTool({ name: c.name, arguments: c.arguments || {} }) });
  }
  out.reads = [];
  for (const uri of plan.reads || []) {
    step = `resources/read ${uri}`;
    out.reads.push({ uri, result: await client.readResource({ uri }) });
  }
  out.prompts = [];
  for (const p of plan.prompts || []) {
    step = `prompts/get ${p.name}`;
    out.prompts.push({ name: p.name, result: await client.getPrompt({ name: p.name, arguments: p.arguments || {} }) });
  }
  out.completions = [];
  for (const c of plan.completes || []) {
    step = `completion/complete ${JSON.stringify(c.ref)}`;
    out.completions.push((await client.complete(c)).completion);
  }
  for (const uri of plan.subscriptions || []) {
    const seen = new Promise((resolve) => (waiting = { uri, seen: resolve }));
    step = `subscribe ${uri}`;
    if (flavour === 'legacy') {
      await client.subscribeResource({ uri });
    } else {
      await client.listen({ resourceSubscriptions: [uri] });
    }
    step = `waiting for notifications/resources/updated ${uri}`;
    if (!updated.includes(uri)) await seen;
  }
  out.updated = updated;
  out.changed = [];
  if (plan.changes?.length && flavour === 'modern') {
    step = 'subscriptions/listen (list changes)';
    await client.listen({ toolsListChanged: true, promptsListChanged: true, resourcesListChanged: true });
  }
  for (const { call, notification } of plan.changes || []) {
    const seen = new Promise((resolve) =>
      client.setNotificationHandler(flavour === 'legacy' ? legacyNotification(notification) : notification, resolve),
    );
    step = `tools/call ${call} (list change)`;
    await client.callTool({ name: call, arguments: {} });
    step = `waiting for ${notification}`;
    await seen;
    out.changed.push(notification);
  }
  const send = {
    'tools/call': (p) => client.callTool(p),
    'resources/read': (p) => client.readResource(p),
    'prompts/get': (p) => client.getPrompt(p),
    'resources/subscribe': (p) => client.subscribeResource(p),
    'subscriptions/listen': (p) => client.listen(p),
  };
  out.refused = [];
  for (const { method, params } of plan.refused || []) {
    step = `${method} ${JSON.stringify(params)} (refused)`;
    try {
      out.refused.push({ method, result: await send[method](params) });
    } catch (e) {
      out.refused.push({ method, code: e.code ?? null, message: e.message, data: e.data ?? null });
    }
  }
  step = 'close';
  await client.close();
  emit({ ...out, ...counts });
} catch (e) {
  fail(SCRIPT, `${step} failed against ${url}: ${describeError(e)}`);
}
