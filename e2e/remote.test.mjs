// An agent on one machine uses `hutch mcp --tier remote` against `hutch
// serve --listen` on another (loopback here), with the official TypeScript
// MCP client: the tools act in the served isolated tier, under its policy.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';

import { connect, hutchBin, show, tempRoot, text } from './helpers.mjs';

const T = { timeout: 120_000 };

// serve starts hutch serve --listen on loopback and returns its URL and
// token file.
async function serve(t, args) {
  const { base } = tempRoot(t);
  const tokenFile = path.join(base, 'token');
  const proc = spawn(hutchBin(), ['serve', '--listen', '127.0.0.1:0', '--token-file', tokenFile, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  t.after(() => proc.kill('SIGKILL'));
  const url = await new Promise((resolve, reject) => {
    let stderr = '';
    proc.stderr.on('data', (c) => {
      stderr += c;
      const m = /tier on (http:\/\/\S+)\//.exec(stderr);
      if (m) resolve(m[1]);
    });
    proc.on('exit', (code) => reject(new Error(`hutch serve exited ${code}: ${stderr}`)));
  });
  return { url, tokenFile };
}

describe('hutch mcp --tier remote', () => {
  test('tools act on the served isolated tier, under its policy', T, async (t) => {
    const { root: work } = tempRoot(t);
    const { root: outside } = tempRoot(t);
    fs.writeFileSync(path.join(outside, 'secret.txt'), 'TOP-SECRET');
    const { url, tokenFile } = await serve(t, ['--write', work]);
    const { client } = await connect(t, ['--tier', 'remote', '--server', url, '--token-file', tokenFile, '--mode', 'auto']);
    const instr = client.getInstructions();
    assert.ok(instr.includes('another machine') && instr.includes('isolated'), `instructions: ${instr}`);
    const names = (await client.listTools()).tools.map((x) => x.name);
    for (const n of ['read_file', 'write_file', 'shell']) assert.ok(names.includes(n), `tools ${names}`);

    let res = await client.callTool({ name: 'write_file', arguments: { path: 'hello.txt', content: 'hi from afar\n' } });
    assert.equal(res.isError ?? false, false, show(res));
    assert.equal(fs.readFileSync(path.join(work, 'hello.txt'), 'utf8'), 'hi from afar\n');
    res = await client.callTool({ name: 'read_file', arguments: { path: 'hello.txt' } });
    assert.ok(text(res).includes('hi from afar'), show(res));
    res = await client.callTool({ name: 'shell', arguments: { command: `pwd; cat ${path.join(outside, 'secret.txt')}; echo status=$?` } });
    const out = text(res);
    assert.ok(out.includes(work) && !out.includes('TOP-SECRET') && /status=[1-9]/.test(out), `shell: ${out}`);
    res = await client.callTool({ name: 'read_file', arguments: { path: path.join(outside, 'secret.txt') } });
    assert.equal(res.isError, true, `read outside the root: ${show(res)}`);
  });

  test('a wrong token is a clear error at start', T, async (t) => {
    const { root: work, base } = tempRoot(t);
    const { url } = await serve(t, ['--write', work]);
    const bad = path.join(base, 'bad-token');
    fs.writeFileSync(bad, 'another-servers-token-0123456789\n', { mode: 0o600 });
    const r = spawnSync(hutchBin(), ['mcp', '--tier', 'remote', '--server', url, '--token-file', bad], { input: '', encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 125, `exit ${r.status}: ${r.stderr}`);
    assert.match(r.stderr, /refused.*401/, r.stderr);
  });
});
