// The conformance suite cannot send credentials, and kenny answers nothing on /mcp
// without them (a 401 would even pass the DNS-rebinding check for the wrong reason).
// This loopback proxy adds `Authorization: Bearer $KENNY_PAT` to every request and
// passes everything else through as sent: method, path, body, and the Host and Origin
// headers, so the server's own host check is what the suite meets.
//
// Usage: KENNY_PAT=... node proxy.mjs <upstream base URL>; prints "proxy listening on
// http://127.0.0.1:PORT" once ready.
import http from 'node:http';

const upstream = new URL(process.argv[2] ?? '');
const pat = process.env.KENNY_PAT;
if (!pat || upstream.protocol !== 'http:') {
  console.error('usage: KENNY_PAT=<token> node proxy.mjs http://127.0.0.1:<port>');
  process.exit(2);
}

const server = http.createServer((req, res) => {
  // rawHeaders keeps each header's spelling and order; only credentials are replaced.
  const headers = [];
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    if (req.rawHeaders[i].toLowerCase() !== 'authorization') {
      headers.push(req.rawHeaders[i], req.rawHeaders[i + 1]);
    }
  }
  headers.push('Authorization', `Bearer ${pat}`);
  const forward = http.request(
    { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers },
    (answer) => {
      res.writeHead(answer.statusCode, answer.statusMessage, answer.rawHeaders);
      // Streams (SSE) pass through as they arrive.
      answer.pipe(res);
    },
  );
  forward.on('error', (err) => {
    if (!res.headersSent) {
      res.writeHead(502, { 'Content-Type': 'text/plain' });
    }
    res.end(`conformance proxy: kenny-server at ${upstream.origin} did not answer: ${err.message}\n`);
  });
  // A client that gives up (the suite aborts streams it has read enough of) ends the
  // upstream request too, so the server sees the disconnect.
  res.on('close', () => forward.destroy());
  req.pipe(forward);
});

server.listen(0, '127.0.0.1', () => {
  console.log(`proxy listening on http://127.0.0.1:${server.address().port}`);
});
