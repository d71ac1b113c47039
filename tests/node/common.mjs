// Shared helpers for the MCP client scripts in this folder.
//
// Every script: argv[2] is the MCP endpoint URL, prints ONE JSON line on
// stdout, exits non-zero with a message on stderr on any failure, and is
// killed by a hard timeout so a stuck peer never hangs the Go tests.

export const HARD_TIMEOUT_MS = Number(process.env.MCP_SCRIPT_TIMEOUT_MS || 20000);

export const SAMPLING_TEXT = (who) => `sampled by ${who}`;
export const ROOTS = [{ uri: 'file:///tmp', name: 'tmp' }];

// fail prints a one-line reason on stderr and exits non-zero.
export function fail(script, msg, code = 1) {
  process.stderr.write(`${script}: ${msg}\n`);
  process.exit(code);
}

// armTimeout kills the script after HARD_TIMEOUT_MS.
export function armTimeout(script) {
  const t = setTimeout(() => fail(script, `timed out after ${HARD_TIMEOUT_MS} ms`, 124), HARD_TIMEOUT_MS);
  t.unref();
}

// parseArgs reads: URL, tool name, JSON arguments (default {}), and options.
export function parseArgs(script) {
  let [url, tool, rawArgs, ...options] = process.argv.slice(2);
  if (rawArgs === 'terminate') {
    // allow "<url> <tool> terminate" without the {} placeholder
    options.unshift(rawArgs);
    rawArgs = undefined;
  }
  if (!url || !tool) {
    fail(script, `usage: node ${script} <mcp-url> <tool> [json-args] [terminate]`, 2);
  }
  let args = {};
  if (rawArgs !== undefined && rawArgs !== '') {
    try {
      args = JSON.parse(rawArgs);
    } catch (e) {
      fail(script, `tool arguments are not JSON: ${e.message}`, 2);
    }
    if (args === null || typeof args !== 'object' || Array.isArray(args)) {
      fail(script, 'tool arguments must be a JSON object', 2);
    }
  }
  let endpoint;
  try {
    endpoint = new URL(url);
  } catch (e) {
    fail(script, `bad URL ${JSON.stringify(url)}: ${e.message}`, 2);
  }
  return { url: endpoint, tool, args, options: new Set(options) };
}

// dateIn returns an ISO date (YYYY-MM-DD) `days` from today.
function dateIn(days) {
  return new Date(Date.now() + days * 86400000).toISOString().slice(0, 10);
}

// valueFor returns a plausible value for one property of an elicitation
// requestedSchema (a flat object of primitive / enum / enum-array fields).
export function valueFor(key, prop = {}) {
  const later = /end|last|until|return|checkout/i.test(key) ? 3 : 0; // end dates after start dates
  if (prop.default !== undefined) return prop.default;
  if (prop.const !== undefined) return prop.const;
  if (Array.isArray(prop.enum) && prop.enum.length) return prop.enum[0];
  if (Array.isArray(prop.oneOf) && prop.oneOf.length && prop.oneOf[0].const !== undefined) {
    return prop.oneOf[0].const;
  }
  const k = key.toLowerCase();
  switch (prop.type) {
    case 'boolean':
      return true;
    case 'integer':
    case 'number': {
      let n = /size|count|people|guests|party/.test(k) ? 2 : 7;
      if (typeof prop.minimum === 'number' && n < prop.minimum) n = prop.minimum;
      if (typeof prop.maximum === 'number' && n > prop.maximum) n = prop.maximum;
      return prop.type === 'integer' ? Math.ceil(n) : n;
    }
    case 'array': {
      const items = prop.items || {};
      const choices = items.enum || (items.anyOf || items.oneOf || []).map((c) => c.const);
      const first = choices.find((c) => c !== undefined);
      return first !== undefined ? [first] : [];
    }
    default: {
      // strings
      switch (prop.format) {
        case 'email':
          return 'test.user@example.com';
        case 'uri':
          return 'https://example.com/';
        case 'date':
          return dateIn(30 + later);
        case 'date-time':
          return new Date(Date.now() + (30 + later) * 86400000).toISOString();
      }
      if (/date|when|day/.test(k)) return dateIn(30 + later);
      if (/email/.test(k)) return 'test.user@example.com';
      if (/name|user/.test(k)) return 'Test User';
      if (/destination|city|place|location/.test(k)) return 'Lisbon';
      let s = `test ${key}`;
      if (typeof prop.minLength === 'number' && s.length < prop.minLength) s = s.padEnd(prop.minLength, 'x');
      if (typeof prop.maxLength === 'number' && s.length > prop.maxLength) s = s.slice(0, prop.maxLength);
      return s;
    }
  }
}

// acceptElicitation answers a form elicitation: every required property is
// filled with a plausible value (optional ones are left out).
export function acceptElicitation(params = {}) {
  if (params.mode === 'url') {
    return { action: 'accept' };
  }
  const schema = params.requestedSchema || {};
  const props = schema.properties || {};
  const content = {};
  for (const key of schema.required || []) {
    content[key] = valueFor(key, props[key]);
  }
  return { action: 'accept', content };
}

// samplingResult is the fixed answer to sampling/createMessage.
export function samplingResult(who) {
  return {
    role: 'assistant',
    content: { type: 'text', text: SAMPLING_TEXT(who) },
    model: 'test-model',
    stopReason: 'endTurn',
  };
}

// describeError turns any thrown value into one line.
export function describeError(e) {
  if (e instanceof Error) {
    const code = e.code !== undefined ? ` (code ${e.code})` : '';
    const data = e.data !== undefined ? ` data=${JSON.stringify(e.data)}` : '';
    return `${e.name}: ${e.message}${code}${data}`;
  }
  return String(e);
}

// answerers returns the handlers every client script registers, and the
// counts they keep: elicitation accepted with a value for every required
// field, sampling answered with SAMPLING_TEXT(who), roots/list with ROOTS.
export function answerers(who) {
  const counts = { elicitations: 0, samplings: 0, rootsLists: 0 };
  return {
    counts,
    elicit: async (req) => {
      counts.elicitations++;
      return acceptElicitation(req.params);
    },
    sample: async () => {
      counts.samplings++;
      return samplingResult(who);
    },
    roots: async () => {
      counts.rootsLists++;
      return { roots: ROOTS };
    },
  };
}

// callOnce connects client over transport, checks that tool is listed,
// calls it with args, sends DELETE for the session when options has
// "terminate" (and there is one), closes and emits
// {...describe(), ...counts, result}; describe runs right after connecting.
// Any failure exits non-zero naming the step.
export async function callOnce(script, client, transport, { url, tool, args, options }, counts, describe) {
  client.onerror = (e) => {
    if (process.env.MCP_SCRIPT_VERBOSE) process.stderr.write(`${script}: transport: ${describeError(e)}\n`);
  };
  let step = 'connect';
  try {
    await client.connect(transport);
    const described = describe();

    step = 'tools/list';
    const { tools } = await client.listTools();
    if (!tools.some((t) => t.name === tool)) {
      fail(script, `tool ${JSON.stringify(tool)} is not in tools/list (have: ${tools.map((t) => t.name).join(', ')})`);
    }

    step = `tools/call ${tool}`;
    const result = await client.callTool({ name: tool, arguments: args });

    if (options.has('terminate') && transport.sessionId) {
      step = 'DELETE session';
      await transport.terminateSession();
    }
    step = 'close';
    await client.close();
    emit({ ...described, ...counts, result });
  } catch (e) {
    fail(script, `${step} failed against ${url}: ${describeError(e)}`);
  }
}

// emit prints the outcome as a single JSON line and exits 0 once stdout is flushed.
export function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n', () => process.exit(0));
}
