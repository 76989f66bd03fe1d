// A loopback reverse proxy for the conformance run: the suite cannot send a
// bearer token, so this adds `Authorization: Bearer <token>` to every request
// and forwards it to the real server, streaming the answer back (SSE too).
//
// Usage: CONFORMANCE_PROXY_TOKEN=… node proxy.mjs <target base URL, e.g. http://127.0.0.1:8080>
// Prints one line, `http://127.0.0.1:<port>`, once listening. The token is
// read from the environment so it never shows in a process list, and never
// logged.
//
// It is transparent otherwise: a Host or Origin naming this proxy becomes the
// target's (the address the client meant); any other Host or Origin passes
// through untouched, so the server's DNS-rebinding checks still see what
// the suite sent.

import http from 'node:http';

const target = new URL(process.argv[2] ?? '');
const token = process.env.CONFORMANCE_PROXY_TOKEN;
if (!token || target.protocol !== 'http:') {
  console.error('usage: CONFORMANCE_PROXY_TOKEN=… node proxy.mjs http://127.0.0.1:PORT');
  process.exit(2);
}

// Per-connection hop-by-hop headers (RFC 9110 §7.6.1) stay on their hop.
const HOP = new Set([
  'connection', 'keep-alive', 'proxy-connection', 'te', 'trailer',
  'transfer-encoding', 'upgrade', 'authorization',
]);

const server = http.createServer((req, res) => {
  const headers = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (!HOP.has(name)) headers[name] = value;
  }
  const self = `127.0.0.1:${server.address().port}`;
  if (!headers.host || headers.host === self) headers.host = target.host;
  if (headers.origin === `http://${self}`) headers.origin = target.origin;
  headers.authorization = `Bearer ${token}`;

  const upstream = http.request(
    { host: target.hostname, port: target.port, method: req.method, path: req.url, headers },
    (answer) => {
      const out = {};
      for (const [name, value] of Object.entries(answer.headers)) {
        if (!HOP.has(name)) out[name] = value;
      }
      res.writeHead(answer.statusCode ?? 502, out);
      res.flushHeaders();
      answer.pipe(res);
    },
  );
  upstream.on('error', (err) => {
    console.error(`proxy: upstream error: ${err.message}`);
    if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
    res.end('proxy: upstream unreachable\n');
  });
  // The suite may close a stream early (e.g. an SSE GET): end ours too.
  res.on('close', () => upstream.destroy());
  req.pipe(upstream);
});

server.listen(0, '127.0.0.1', () => {
  console.log(`http://127.0.0.1:${server.address().port}`);
});
