// Third-party OpenAPI tooling on a document the gateway serves: fetches
// it and prints ONE JSON line {"swaggerParser": null | "<why it is not
// valid>", "redocly": [{"severity", "rule", "message", "at"}]}:
// @apidevtools/swagger-parser's validate (the OpenAPI 3.1 schema, every
// $ref resolved) and @redocly/openapi-core's lint with Redocly's
// `minimal` ruleset (every problem it reports, warnings included).
//
// usage: node openapi-lint.mjs <document-url>
import SwaggerParser from '@apidevtools/swagger-parser';
import { createConfig, lintFromString } from '@redocly/openapi-core';
import { armTimeout, describeError, emit, fail } from './common.mjs';

const SCRIPT = 'openapi-lint';
armTimeout(SCRIPT);
const url = process.argv[2];
if (!url) fail(SCRIPT, 'usage: node openapi-lint.mjs <document-url>', 2);
let text;
try {
  const resp = await fetch(url);
  text = await resp.text();
  if (!resp.ok) fail(SCRIPT, `GET ${url}: HTTP ${resp.status}: ${text}`);
} catch (e) {
  fail(SCRIPT, `GET ${url}: ${describeError(e)}`);
}
let swaggerParser = null;
try {
  await SwaggerParser.validate(JSON.parse(text));
} catch (e) {
  swaggerParser = String(e?.message ?? e);
}
const config = await createConfig({ extends: ['minimal'] });
const problems = await lintFromString({ source: text, absoluteRef: url, config });
const redocly = problems.map((p) => ({
  severity: p.severity,
  rule: p.ruleId,
  message: p.message,
  at: p.location?.[0]?.pointer ?? '',
}));
emit({ swaggerParser, redocly });
