// A legacy (2025-11-25) MCP server on @modelcontextprotocol/sdk 1.x with
// resumable streams, the benchmarks' TypeScript upstream (tests/bench/fleet.sh).
// A fixture of ours, written because no published server has an elicitation
// tool with a chosen number of rounds; everything on the wire is the
// TypeScript SDK's own: McpServer, its StreamableHTTPServerTransport
// (stateful sessions keyed by Mcp-Session-Id, POST, GET — the standalone
// stream, and resumption with Last-Event-ID, which the transport serves
// itself from its event store — and DELETE), and its EventStore interface.
//
// Its tools, as those of the Go bench server (tests/bench/server.go):
//   echo {text}     returns the text
//   ask {rounds}    elicits `rounds` times, one question after the other,
//                   each in-line on the call's own SSE stream
//                   (elicitInput with relatedRequestId), and returns
//                   "N answers, last X"
//
// The event store. By default a small one of ours, implementing the SDK's
// EventStore interface (storeEvent, replayEventsAfter): per session, events
// numbered per stream, a replay reading only its stream's later events, the
// oldest streams forgotten past a bound. The SDK ships an example store
// (examples/shared/inMemoryEventStore.js), ASK_EVENT_STORE=sdk-example uses
// it instead (one per session too), but it is unfit for a load test: every
// replay sorts every event the session ever stored (none is forgotten), two
// events of one stream stored in the same millisecond may be replayed out
// of order (their ids differ only by a random suffix), and the standalone
// GET stream's events cannot be replayed (its stream id, "_GET_stream",
// holds the "_" the store splits its ids on). The second one shows through
// the gateway: when a call's priming event and its question share a
// millisecond and sort the other way, a resumption from the priming event
// replays the result but not the question, the gateway skips the one
// message it had already seen (here the result), and the call fails ("the
// upstream ended the call without a result"). Neither store implements the
// optional getStreamIdForEventId, so a resumption takes the stream over
// from a connection still open (the SDK transport's behaviour without it)
// rather than getting 409.
//
// usage: node ask-server.mjs <port>     (or ASK_SERVER_PORT=<port>)
// Listens on 127.0.0.1:<port>/mcp and prints one line once listening.
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import * as z from 'zod/v4';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { InMemoryEventStore } from '@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js';

const port = Number(process.argv[2] || process.env.ASK_SERVER_PORT);
if (!port) {
  process.stderr.write('usage: node ask-server.mjs <port> (or ASK_SERVER_PORT=<port>)\n');
  process.exit(2);
}
const storeKind = process.env.ASK_EVENT_STORE || 'own';
if (storeKind !== 'own' && storeKind !== 'sdk-example') {
  process.stderr.write(`ask-server: ASK_EVENT_STORE must be own or sdk-example, not ${storeKind}\n`);
  process.exit(2);
}

// StreamEventStore keeps one session's SSE events for resumption. An event's
// id is "<stream id>.<n>", n counting the stream's events from 1. At most
// maxStreams streams are kept (the least recently written forgotten first),
// and the last maxEvents events of each: a Last-Event-ID older than that, or
// unknown, fails the replay (the transport answers 500) rather than
// resuming a stream with a gap.
class StreamEventStore {
  constructor(maxStreams = 256, maxEvents = 1024) {
    this.maxStreams = maxStreams;
    this.maxEvents = maxEvents;
    this.streams = new Map(); // stream id -> { first: n of events[0], events: [{ id, message }] }
  }

  async storeEvent(streamId, message) {
    let s = this.streams.get(streamId);
    if (s) {
      this.streams.delete(streamId); // re-inserted below: the Map's order is the recency
    } else {
      s = { first: 1, events: [] };
      if (this.streams.size >= this.maxStreams) {
        this.streams.delete(this.streams.keys().next().value);
      }
    }
    this.streams.set(streamId, s);
    const id = `${streamId}.${s.first + s.events.length}`;
    s.events.push({ id, message });
    if (s.events.length > this.maxEvents) {
      s.events.shift();
      s.first++;
    }
    return id;
  }

  async replayEventsAfter(lastEventId, { send }) {
    const dot = lastEventId.lastIndexOf('.');
    const streamId = lastEventId.slice(0, dot);
    const n = Number(lastEventId.slice(dot + 1));
    const s = dot > 0 ? this.streams.get(streamId) : undefined;
    if (!s || !Number.isInteger(n) || n < s.first - 1 || n >= s.first + s.events.length) {
      throw new Error(`unknown or forgotten event id ${JSON.stringify(lastEventId)}`);
    }
    // Events stored while this replay awaits are sent too (the transport
    // skips those it then sees it has replayed).
    for (let i = n - s.first + 1; i < s.events.length; i++) {
      await send(s.events[i].id, s.events[i].message);
    }
    return streamId;
  }
}

// newServer makes the McpServer of one session.
function newServer() {
  const server = new McpServer({ name: 'mcp-bench-ts', version: '1' });
  server.registerTool('echo', { description: 'Returns its text.', inputSchema: { text: z.string() } },
    async ({ text }) => ({ content: [{ type: 'text', text }] }));
  server.registerTool('ask', {
    description: 'Asks `rounds` questions in-line, one after the other.',
    inputSchema: { rounds: z.number().int().min(0) },
  }, async ({ rounds }, extra) => {
    let last;
    for (let i = 0; i < rounds; i++) {
      const res = await server.server.elicitInput({
        message: `Question ${i}`,
        requestedSchema: { type: 'object', properties: { answer: { type: 'string' } } },
      }, { relatedRequestId: extra.requestId, signal: extra.signal });
      if (res.action !== 'accept') {
        return { content: [{ type: 'text', text: 'declined' }] };
      }
      last = res.content?.answer;
    }
    return { content: [{ type: 'text', text: `${rounds} answers, last ${last}` }] };
  });
  return server;
}

const transports = new Map(); // session id -> transport

// readBody parses a POST's JSON body (undefined when empty).
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

function jsonError(res, status, message) {
  res.writeHead(status, { 'content-type': 'application/json' })
    .end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: status === 404 ? -32001 : -32000, message } }));
}

const httpServer = http.createServer(async (req, res) => {
  try {
    if (new URL(req.url, 'http://x').pathname !== '/mcp') { res.writeHead(404).end(); return; }
    const body = req.method === 'POST' ? await readBody(req) : undefined;
    const sid = req.headers['mcp-session-id'];
    let transport = sid ? transports.get(sid) : undefined;
    if (!transport) {
      if (sid) { jsonError(res, 404, 'Session not found'); return; }
      if (req.method !== 'POST' || !isInitializeRequest(body)) { jsonError(res, 400, 'Bad Request: no session'); return; }
      const t = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        eventStore: storeKind === 'own' ? new StreamEventStore() : new InMemoryEventStore(),
        onsessioninitialized: (id) => { transports.set(id, t); },
      });
      t.onclose = () => { if (t.sessionId) transports.delete(t.sessionId); };
      await newServer().connect(t);
      transport = t;
    }
    await transport.handleRequest(req, res, body);
  } catch (e) {
    if (!res.headersSent) jsonError(res, 500, String(e));
  }
});
httpServer.keepAliveTimeout = 60_000;
httpServer.listen(port, '127.0.0.1', () => {
  process.stdout.write(`ask-server (TypeScript SDK, event store ${storeKind}): http://127.0.0.1:${port}/mcp\n`);
});
