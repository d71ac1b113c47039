// screenshot.mjs: a picture of one trace in the Jaeger UI, for
// tests/traces/picture.sh. Starts headless Chromium, drives it over the
// DevTools protocol (node's own WebSocket; no package), opens the trace
// page, waits for its SPANS rows, expands the detail of the last span named
// NAME (default the gateway's "tools/call plan_trip") of service SERVICE
// (default gw-0) with its attributes open, and writes a PNG of the page
// down to the last row.
//
//   node screenshot.mjs <trace-page-url> <out.png> <spans> [service] [name]
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [url, outFile, spans, service = 'gw-0', spanName = 'tools/call plan_trip'] = process.argv.slice(2);
if (!url || !outFile || !(spans > 0)) {
  console.error('usage: node screenshot.mjs <trace-page-url> <out.png> <spans> [service] [name]');
  process.exit(2);
}
const WIDTH = 1280;
const HEIGHT = 1400; // the viewport; the picture is cut below the last row

const profile = mkdtempSync(join(tmpdir(), 'picture-chromium-'));
const chromium = spawn('chromium', [
  '--headless', '--no-sandbox', '--disable-gpu', '--hide-scrollbars', '--no-first-run',
  `--user-data-dir=${profile}`, '--remote-debugging-port=0', `--window-size=${WIDTH},${HEIGHT}`, 'about:blank',
], { stdio: ['ignore', 'ignore', 'pipe'] });
const exited = new Promise((resolve) => chromium.on('exit', resolve));
// done stops Chromium, removes its profile once it has exited, and exits.
const done = async (code) => {
  chromium.kill();
  await exited;
  rmSync(profile, { recursive: true, force: true });
  process.exit(code);
};
// fail reports err and stops, Chromium with it.
const fail = (err) => { console.error(`screenshot.mjs: ${err.message ?? err}`); return done(1); };
setTimeout(() => fail('timed out after 60 s'), 60_000).unref();

try {
  // The browser's DevTools endpoint, from what Chromium prints at start.
  const endpoint = await new Promise((resolve, reject) => {
    let seen = '';
    chromium.stderr.on('data', (chunk) => {
      seen += chunk;
      const m = seen.match(/DevTools listening on (ws:\/\/\S+)/);
      if (m) resolve(m[1]);
    });
    chromium.on('exit', (code) => reject(new Error(`chromium exited (${code}): ${seen}`)));
  });

  const ws = new WebSocket(endpoint);
  await new Promise((resolve, reject) => { ws.onopen = resolve; ws.onerror = reject; });
  let lastId = 0;
  const pending = new Map();
  ws.onmessage = ({ data }) => {
    const msg = JSON.parse(data);
    const p = pending.get(msg.id);
    if (!p) return;
    pending.delete(msg.id);
    if (msg.error) p.reject(new Error(JSON.stringify(msg.error)));
    else p.resolve(msg.result);
  };
  // send calls a DevTools method, in the page's session when sessionId is set.
  const send = (method, params = {}, sessionId) => new Promise((resolve, reject) => {
    const id = ++lastId;
    pending.set(id, { resolve, reject });
    ws.send(JSON.stringify({ id, method, params, sessionId }));
  });

  const { targetId } = await send('Target.createTarget', { url: 'about:blank' });
  const { sessionId } = await send('Target.attachToTarget', { targetId, flatten: true });
  const page = (method, params) => send(method, params, sessionId);
  // evaluate runs fn (with args) in the page and returns its JSON value.
  const evaluate = async (fn, ...args) => {
    const { result, exceptionDetails } = await page('Runtime.evaluate', {
      expression: `(${fn})(...${JSON.stringify(args)})`, returnByValue: true, awaitPromise: true,
    });
    if (exceptionDetails) throw new Error(exceptionDetails.exception?.description ?? exceptionDetails.text);
    return result.value;
  };
  // until polls fn in the page (every 100 ms, at most 20 s) until it returns a truthy value.
  const until = async (what, fn, ...args) => {
    for (let i = 0; i < 200; i++) {
      const v = await evaluate(fn, ...args);
      if (v) return v;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`no ${what} in the page`);
  };

  await page('Emulation.setDeviceMetricsOverride', { width: WIDTH, height: HEIGHT, deviceScaleFactor: 1, mobile: false });
  await page('Page.enable');
  await page('Page.navigate', { url });
  await until(`${spans} span rows`, (n) => document.querySelectorAll('.span-row').length >= n, Number(spans));

  // Open the span's detail, then its attributes ("Tags" in this UI).
  await until(`span ${spanName} of ${service}`, (svc, name) => {
    const rows = [...document.querySelectorAll('.span-row')].filter((r) =>
      r.querySelector('.span-svc-name')?.textContent.trim() === svc &&
      r.querySelector('.endpoint-name, .span-name')?.textContent.includes(name));
    rows.at(-1)?.querySelector('.span-name')?.click();
    return rows.length > 0;
  }, service, spanName);
  await until('span detail', () => {
    const header = document.querySelector('.detail-row .AccordianKeyValues--header');
    header?.click();
    return header !== null;
  });
  await until('attribute table', () => document.querySelector('.detail-row .KeyValueTable') !== null);

  // The picture: from the top of the page to the bottom of the last row.
  const bottom = await evaluate(() => Math.ceil([...document.querySelectorAll('.span-row')].at(-1).getBoundingClientRect().bottom) + 4);
  const { data } = await page('Page.captureScreenshot', {
    format: 'png', clip: { x: 0, y: 0, width: WIDTH, height: Math.min(bottom, HEIGHT), scale: 1 },
  });
  writeFileSync(outFile, Buffer.from(data, 'base64'));
  ws.close();
} catch (err) {
  await fail(err);
}
await done(0);
