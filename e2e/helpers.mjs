// Shared helpers for the end-to-end tests of `hutch mcp`: find (or build)
// the hutch binary, start a server over stdio with the official TypeScript
// MCP client, make fresh sandbox roots, run the approvals CLI.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

let cachedBin;

// hutchBin is $HUTCH_BIN, or a binary built from this checkout once per
// test process when HUTCH_BIN is unset. It never skips: no binary is a
// failure.
export function hutchBin() {
  if (cachedBin) return cachedBin;
  if (process.env.HUTCH_BIN) {
    const bin = path.resolve(process.env.HUTCH_BIN);
    fs.accessSync(bin, fs.constants.X_OK);
    cachedBin = bin;
    return bin;
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hutch-e2e-bin-'));
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  const bin = path.join(dir, 'hutch');
  const r = spawnSync('go', ['build', '-o', bin, './cmd/hutch'], {
    cwd: repoRoot,
    env: { ...process.env, CGO_ENABLED: '0' },
    encoding: 'utf8',
  });
  if (r.status !== 0) {
    throw new Error(`HUTCH_BIN is unset and "go build ./cmd/hutch" failed:\n${r.error ?? ''}${r.stderr}`);
  }
  cachedBin = bin;
  return bin;
}

// tempRoot makes <tmp>/hutch-e2e-XXXX/root (a fresh sandbox root) and
// returns both the root and its parent (a place outside the root), with
// symbolic links resolved, removed after the test.
export function tempRoot(t) {
  const base = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'hutch-e2e-')));
  const root = path.join(base, 'root');
  fs.mkdirSync(root);
  t.after(() => fs.rmSync(base, { recursive: true, force: true }));
  return { base, root };
}

// connect starts `hutch mcp ARGS...` and connects an SDK client to it.
//
//   elicit: undefined — the client does not declare elicitation;
//           a function(params) returning {action, content?} — it does, and
//           answers every elicitation/create request with it.
//
// Returns { client, transport, elicitations, stderr() }. The client is
// closed (and the server stopped) after the test.
export async function connect(t, args, { elicit } = {}) {
  const capabilities = elicit ? { elicitation: { form: {} } } : {};
  const client = new Client({ name: 'hutch-e2e', version: '1.0.0' }, { capabilities });
  const elicitations = [];
  if (elicit) {
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      elicitations.push(req.params);
      return elicit(req.params);
    });
  }
  const transport = new StdioClientTransport({
    command: hutchBin(),
    args: ['mcp', ...args],
    env: getDefaultEnvironment(),
    stderr: 'pipe',
  });
  let stderrText = '';
  transport.stderr?.on('data', (chunk) => {
    stderrText += chunk;
  });
  try {
    await client.connect(transport);
  } catch (err) {
    await client.close().catch(() => {});
    throw new Error(`connecting to hutch mcp ${args.join(' ')} failed: ${err.message}\nserver stderr:\n${stderrText}`);
  }
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await client.close();
  };
  t.after(close);
  return { client, transport, elicitations, close, stderr: () => stderrText };
}

// accept answers an elicitation with "accept" and content that satisfies
// the requested schema (defaults, else true / the first enum value / a
// string / the minimum), so a server validating the form content is
// satisfied.
export function accept(params) {
  const content = {};
  const props = params.requestedSchema?.properties ?? {};
  for (const [name, p] of Object.entries(props)) {
    if ('default' in p) content[name] = p.default;
    else if (Array.isArray(p.enum) && p.enum.length) content[name] = p.enum[0];
    else if (Array.isArray(p.oneOf) && p.oneOf.length) content[name] = p.oneOf[0].const;
    else if (p.type === 'boolean') content[name] = true;
    else if (p.type === 'number' || p.type === 'integer') content[name] = p.minimum ?? 1;
    else content[name] = 'yes';
  }
  return { action: 'accept', content };
}

// text joins a result's text content.
export function text(result) {
  return (result.content ?? [])
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('');
}

// describe gives a result or error in a form fit for an assertion message.
export function show(x) {
  return JSON.stringify(x, null, 1);
}

// hutch runs the hutch CLI and returns { status, stdout, stderr }.
export function hutch(...args) {
  const r = spawnSync(hutchBin(), args, { encoding: 'utf8', timeout: 30_000 });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

// hutchOK runs the hutch CLI and fails unless it exits 0.
export function hutchOK(...args) {
  return execFileSync(hutchBin(), args, { encoding: 'utf8', timeout: 30_000 });
}
