// loopback.mjs: preload (node --import ./loopback.mjs app.js) that makes a
// server which listens on a bare port bind to 127.0.0.1 (or $HOST) instead of
// all interfaces. server-everything has no host option of its own.
import net from 'node:net';

const host = process.env.HOST || '127.0.0.1';
const listen = net.Server.prototype.listen;

net.Server.prototype.listen = function (...args) {
  const [first, second] = args;
  const isPort = typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first));
  if (isPort && typeof second !== 'string') {
    args.splice(1, 0, host); // listen(port, [backlog], [cb]) -> listen(port, host, ...)
  } else if (first && typeof first === 'object' && first.path === undefined && first.host === undefined) {
    args[0] = { ...first, host };
  }
  return listen.apply(this, args);
};
