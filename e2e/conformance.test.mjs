// The official MCP conformance suite (@modelcontextprotocol/conformance)
// against `hutch mcp --http`: every scenario that applies to hutch must
// pass. docs/mcp.md lists them, and the others with why they do not apply
// (they call the suite's own fixture tools, prompts or resources).
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import path from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { hutchBin, tempRoot } from './helpers.mjs';

const run = promisify(execFile);
const here = path.dirname(fileURLToPath(import.meta.url));
const conformance = path.join(here, 'node_modules', '.bin', 'conformance');

export const applicable = ['server-initialize', 'ping', 'tools-list', 'server-sse-multiple-streams', 'dns-rebinding-protection'];

describe('MCP conformance suite against hutch mcp --http', () => {
  test('every applicable scenario passes', { timeout: 300_000 }, async (t) => {
    const { root, base } = tempRoot(t);
    // No token: the suite's client sends none. The listener is loopback.
    const proc = spawn(hutchBin(), ['mcp', '--http', '127.0.0.1:0', '--http-no-auth', '--tier', 'local', '--root', root, '--mode', 'auto'], { stdio: ['ignore', 'ignore', 'pipe'] });
    t.after(() => proc.kill('SIGKILL'));
    const url = await new Promise((resolve, reject) => {
      let stderr = '';
      proc.stderr.on('data', (c) => {
        stderr += c;
        const m = /serving MCP on (http:\/\/\S+)/.exec(stderr);
        if (m) resolve(m[1]);
      });
      proc.on('exit', (code) => reject(new Error(`hutch exited ${code}: ${stderr}`)));
    });
    for (const scenario of applicable) {
      let out;
      try {
        out = await run(conformance, ['server', '--url', url, '--scenario', scenario], { cwd: base, timeout: 120_000, maxBuffer: 16 << 20 });
      } catch (err) {
        assert.fail(`scenario ${scenario} failed:\n${err.stdout ?? ''}${err.stderr ?? ''}${err.message}`);
      }
      assert.match(out.stdout, /Passed: (\d+)\/\1, 0 failed/, `scenario ${scenario}:\n${out.stdout}`);
    }
  });
});
