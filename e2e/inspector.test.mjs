// The MCP Inspector's CLI (@modelcontextprotocol/inspector, --cli) drives
// every tool `hutch mcp --mode auto` offers on a temporary root, once each,
// over stdio and over --http. The arguments are in tool-args.mjs; a tool
// without an entry there fails the test.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { hutchBin, tempRoot } from './helpers.mjs';
import { toolArgs } from './tool-args.mjs';

const run = promisify(execFile);
const here = path.dirname(fileURLToPath(import.meta.url));
const inspector = path.join(here, 'node_modules', '.bin', 'mcp-inspector');
const T = { timeout: 300_000 };

function freshRoot(t) {
  const { root } = tempRoot(t);
  for (const [name, content] of [['a.txt', 'alpha\n'], ['b.txt', 'bravo\n'], ['c.txt', 'charlie\n']]) {
    fs.writeFileSync(path.join(root, name), content);
  }
  return root;
}

// cli runs the inspector CLI with target (a command line or a URL and its
// options) and the method's options, and returns its JSON output.
async function cli(target, method) {
  const { stdout } = await run(inspector, ['--cli', ...target, ...method], { timeout: 60_000, maxBuffer: 16 << 20 });
  return JSON.parse(stdout);
}

function toolArgv(name, args) {
  const argv = ['--method', 'tools/call', '--tool-name', name];
  for (const [k, v] of Object.entries(args)) argv.push('--tool-arg', `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`);
  return argv;
}

async function driveEveryTool(target) {
  const list = await cli(target, ['--method', 'tools/list']);
  const names = list.tools.map((t) => t.name);
  const missing = names.filter((n) => !(n in toolArgs));
  assert.deepEqual(missing, [], `tools/list returned tools without an entry in e2e/tool-args.mjs: ${missing.join(', ')}`);
  for (const name of names) {
    const { args, error } = toolArgs[name];
    const res = await cli(target, toolArgv(name, args));
    const text = (res.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('');
    if (error) {
      assert.equal(res.isError, true, `${name}: expected an error result, got ${JSON.stringify(res)}`);
      assert.match(text, error, `${name}: error text`);
    } else {
      assert.equal(res.isError ?? false, false, `${name}: ${JSON.stringify(res)}`);
    }
  }
  return names;
}

describe('the MCP Inspector CLI drives every tool', () => {
  test('over stdio', T, async (t) => {
    const root = freshRoot(t);
    const names = await driveEveryTool([hutchBin(), 'mcp', '--tier', 'local', '--root', root, '--mode', 'auto']);
    assert.ok(names.includes('shell') && names.includes('read_file'), names.join(', '));
    assert.equal(fs.readFileSync(path.join(root, 'new.txt'), 'utf8'), 'written\n');
  });

  test('over --http', T, async (t) => {
    const root = freshRoot(t);
    const { base } = tempRoot(t);
    const tokenFile = path.join(base, 'token');
    const proc = spawn(hutchBin(), ['mcp', '--http', '127.0.0.1:0', '--http-token-file', tokenFile, '--tier', 'local', '--root', root, '--mode', 'auto'], { stdio: ['ignore', 'ignore', 'pipe'] });
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
    const token = fs.readFileSync(tokenFile, 'utf8').trim();
    const names = await driveEveryTool([url, '--transport', 'http', '--header', `Authorization: Bearer ${token}`]);
    assert.ok(names.includes('shell'), names.join(', '));
  });
});
