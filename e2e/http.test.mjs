// End-to-end tests of `hutch mcp --http` with the official TypeScript MCP
// client (@modelcontextprotocol/sdk) over the streamable HTTP transport:
// a real hutch process, a real listener on 127.0.0.1, a bearer token.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { hutchBin, show, tempRoot, text } from './helpers.mjs';

const T = { timeout: 60_000 };

// serve starts `hutch mcp --http 127.0.0.1:0 ARGS...` and resolves to the
// URL it prints and its stderr so far; the process is killed after the test.
function serve(t, args) {
  const proc = spawn(hutchBin(), ['mcp', '--http', '127.0.0.1:0', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  t.after(() => proc.kill('SIGKILL'));
  let stderr = '';
  return new Promise((resolve, reject) => {
    proc.stderr.on('data', (chunk) => {
      stderr += chunk;
      const m = /serving MCP on (http:\/\/\S+)/.exec(stderr);
      if (m) resolve({ url: m[1], stderr: () => stderr });
    });
    proc.on('exit', (code) => reject(new Error(`hutch mcp --http exited (${code}):\n${stderr}`)));
  });
}

async function connectHTTP(t, url, headers) {
  const client = new Client({ name: 'hutch-e2e-http', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  await client.connect(transport);
  t.after(() => client.close());
  return client;
}

describe('hutch mcp --http', () => {
  test('a client with the token from --http-token-file runs tools; without it, nothing', T, async (t) => {
    const { base, root } = tempRoot(t);
    const tokenFile = path.join(base, 'token');
    const { url, stderr } = await serve(t, ['--http-token-file', tokenFile, '--tier', 'local', '--root', root, '--mode', 'auto']);
    const token = fs.readFileSync(tokenFile, 'utf8').trim();
    assert.equal(fs.statSync(tokenFile).mode & 0o777, 0o600, 'token file mode');
    assert.ok(!stderr().includes(token), `the token file's token was logged:\n${stderr()}`);

    const client = await connectHTTP(t, url, { Authorization: `Bearer ${token}` });
    const res = await client.callTool({ name: 'shell', arguments: { command: 'echo over http' } });
    assert.equal(res.isError ?? false, false, show(res));
    assert.match(text(res), /over http/);

    for (const [what, headers] of [['no token', {}], ['wrong token', { Authorization: `Bearer ${token}x` }]]) {
      await assert.rejects(connectHTTP(t, url, headers), /401|Unauthorized|Authorization/, what);
    }
  });

  test('without a token file, a fresh token is printed on stderr and required', T, async (t) => {
    const { root } = tempRoot(t);
    const { url, stderr } = await serve(t, ['--tier', 'local', '--root', root, '--mode', 'read_only']);
    const m = /Authorization: Bearer (\S+?)"/.exec(stderr());
    assert.ok(m, `no token on stderr:\n${stderr()}`);
    const client = await connectHTTP(t, url, { Authorization: `Bearer ${m[1]}` });
    const list = await client.listTools();
    assert.ok(list.tools.some((tool) => tool.name === 'read_file'), show(list));
    await assert.rejects(connectHTTP(t, url, {}), /401|Unauthorized|Authorization/);
  });
});
