// server.mjs: a MODERN-ONLY MCP server (protocol 2026-07-28) for the reverse
// bridge tests, built on @modelcontextprotocol/server 2.x and
// @modelcontextprotocol/node. It refuses legacy (2025) requests
// (`legacy: 'reject'`), so a legacy client can only reach it through the
// gateway. Its tools ask for input the 2026 way, by returning
// input_required (inputRequests + requestState), never in-line:
//
//   plan_party {occasion}          three rounds: elicitation (host), sampling
//                                  (a toast), elicitation (confirm); progress
//                                  kept in an HMAC-signed requestState
//   test_elicitation {message}     the 2025-11-25 conformance fixtures, asked
//   test_sampling {prompt}         via input_required (same argument names and
//   test_elicitation_sep1034_defaults   schemas as the conformance suite's
//   test_elicitation_sep1330_enums      reference server)
//
//   node server.mjs <port>         serves http://127.0.0.1:<port>/mcp
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import {
  McpServer,
  acceptedContent,
  createMcpHandler,
  createRequestStateCodec,
  inputRequired,
  inputResponse,
} from '@modelcontextprotocol/server';
import { toNodeHandler } from '@modelcontextprotocol/node';
import * as z from 'zod';

const port = Number(process.argv[2]);
if (!Number.isInteger(port) || port <= 0) {
  process.stderr.write('usage: node server.mjs <port>\n');
  process.exit(2);
}

// The state codec signs requestState; a per-process key is enough because
// this one process serves every round.
const codec = createRequestStateCodec({ key: randomBytes(32), ttlSeconds: 600 });

const text = (t) => ({ content: [{ type: 'text', text: t }] });

// samplingText returns the text of a sampling answer, or undefined.
function samplingText(responses, key) {
  const view = inputResponse(responses, key);
  if (view.kind !== 'sampling') return undefined;
  const c = Array.isArray(view.result.content) ? view.result.content[0] : view.result.content;
  return c?.type === 'text' ? c.text : '(non-text response)';
}

// elicitAnswer returns "action=..., content=..." for an elicitation answer,
// or undefined when there is none.
function elicitAnswer(responses, key) {
  const view = inputResponse(responses, key);
  if (view.kind !== 'elicit') return undefined;
  return `action=${view.action}, content=${JSON.stringify(view.content ?? {})}`;
}

function build() {
  const server = new McpServer(
    { name: 'modern-fixture', version: '1.0.0' },
    { requestState: { verify: codec.verify } },
  );

  server.registerTool(
    'plan_party',
    {
      description: 'Plans a party in three rounds of input: the host (elicitation), a toast (sampling), a confirmation (elicitation).',
      inputSchema: z.object({ occasion: z.string() }),
    },
    async ({ occasion }, ctx) => {
      const responses = ctx.mcpReq.inputResponses;
      const state = ctx.mcpReq.requestState() ?? { step: 0 };
      const ask = async (inputRequests, next) =>
        inputRequired({ inputRequests, requestState: await codec.mint(next) });
      const askHost = () =>
        ask(
          {
            host: inputRequired.elicit({
              message: `Who hosts the ${occasion}?`,
              requestedSchema: { type: 'object', properties: { name: { type: 'string', description: 'Host name' } }, required: ['name'] },
            }),
          },
          { step: 1 },
        );
      const askToast = (host) =>
        ask(
          {
            toast: inputRequired.createMessage({
              messages: [{ role: 'user', content: { type: 'text', text: `Write a toast for ${host}'s ${occasion}` } }],
              maxTokens: 60,
            }),
          },
          { step: 2, host },
        );
      const askConfirm = (host, toast) =>
        ask(
          {
            confirm: inputRequired.elicit({
              message: `Send the invitations for ${host}'s ${occasion}?`,
              requestedSchema: { type: 'object', properties: { send: { type: 'boolean', description: 'Send now' } }, required: ['send'] },
            }),
          },
          { step: 3, host, toast },
        );
      switch (state.step) {
        case 0:
          return askHost();
        case 1: {
          const host = acceptedContent(responses, 'host')?.name;
          return typeof host === 'string' && host ? askToast(host) : askHost();
        }
        case 2: {
          const toast = samplingText(responses, 'toast');
          return toast === undefined ? askToast(state.host) : askConfirm(state.host, toast);
        }
        case 3: {
          const confirm = acceptedContent(responses, 'confirm');
          if (confirm === undefined) return askConfirm(state.host, state.toast);
          return text(`Party (${occasion}) hosted by ${state.host}; toast: "${state.toast}"; invitations sent: ${confirm.send === true}`);
        }
      }
      throw new Error(`bad step ${state.step}`);
    },
  );

  server.registerTool(
    'test_elicitation',
    { description: 'Asks the user for information (elicitation via input_required).', inputSchema: z.object({ message: z.string() }) },
    async ({ message }, ctx) => {
      const answer = elicitAnswer(ctx.mcpReq.inputResponses, 'user_info');
      if (answer !== undefined) return text(`User response: ${answer}`);
      return inputRequired({
        inputRequests: {
          user_info: inputRequired.elicit({
            message,
            requestedSchema: {
              type: 'object',
              properties: {
                username: { type: 'string', description: "User's response" },
                email: { type: 'string', description: "User's email address" },
              },
              required: ['username', 'email'],
            },
          }),
        },
      });
    },
  );

  server.registerTool(
    'test_sampling',
    { description: 'Asks the client LLM for a completion (sampling via input_required).', inputSchema: z.object({ prompt: z.string() }) },
    async ({ prompt }, ctx) => {
      const answer = samplingText(ctx.mcpReq.inputResponses, 'completion');
      if (answer !== undefined) return text(`LLM response: ${answer}`);
      return inputRequired({
        inputRequests: {
          completion: inputRequired.createMessage({
            messages: [{ role: 'user', content: { type: 'text', text: prompt } }],
            maxTokens: 100,
          }),
        },
      });
    },
  );

  server.registerTool(
    'test_elicitation_sep1034_defaults',
    { description: 'Elicitation with default values for every primitive type (SEP-1034).', inputSchema: z.object({}) },
    async (_args, ctx) => {
      const answer = elicitAnswer(ctx.mcpReq.inputResponses, 'defaults');
      if (answer !== undefined) return text(`Elicitation completed: ${answer}`);
      return inputRequired({
        inputRequests: {
          defaults: inputRequired.elicit({
            message: 'Test defaults for primitives',
            requestedSchema: {
              type: 'object',
              properties: {
                name: { type: 'string', description: 'User name', default: 'John Doe' },
                age: { type: 'integer', description: 'User age', default: 30 },
                score: { type: 'number', description: 'User score', default: 95.5 },
                status: { type: 'string', description: 'User status', enum: ['active', 'inactive', 'pending'], default: 'active' },
                verified: { type: 'boolean', description: 'Verification status', default: true },
              },
            },
          }),
        },
      });
    },
  );

  server.registerTool(
    'test_elicitation_sep1330_enums',
    { description: 'Elicitation with every enum schema form (SEP-1330).', inputSchema: z.object({}) },
    async (_args, ctx) => {
      const answer = elicitAnswer(ctx.mcpReq.inputResponses, 'enums');
      if (answer !== undefined) return text(`Elicitation completed: ${answer}`);
      const titled = [
        { const: 'value1', title: 'First Option' },
        { const: 'value2', title: 'Second Option' },
        { const: 'value3', title: 'Third Option' },
      ];
      return inputRequired({
        inputRequests: {
          enums: inputRequired.elicit({
            message: 'Test enum schemas',
            requestedSchema: {
              type: 'object',
              properties: {
                untitledSingle: { type: 'string', enum: ['option1', 'option2', 'option3'] },
                titledSingle: { type: 'string', oneOf: titled },
                legacyEnum: { type: 'string', enum: ['opt1', 'opt2', 'opt3'], enumNames: ['Option One', 'Option Two', 'Option Three'] },
                untitledMulti: { type: 'array', minItems: 1, maxItems: 3, items: { type: 'string', enum: ['option1', 'option2', 'option3'] } },
                titledMulti: { type: 'array', minItems: 1, maxItems: 3, items: { anyOf: titled } },
              },
            },
          }),
        },
      });
    },
  );
  return server;
}

const handler = createMcpHandler(build, { legacy: 'reject', onerror: (e) => process.stderr.write(`modern-fixture: ${e.message}\n`) });
const serve = toNodeHandler(handler);
http
  .createServer((req, res) => {
    if (new URL(req.url, 'http://x').pathname !== '/mcp') {
      res.writeHead(404).end();
      return;
    }
    void serve(req, res);
  })
  .listen(port, '127.0.0.1', () => process.stdout.write(`modern-fixture listening on http://127.0.0.1:${port}/mcp\n`));
