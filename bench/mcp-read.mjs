// MCP read latency, side by side in one run: hutch's read_file against the
// reference filesystem server's read_text_file, both over stdio with the
// official TypeScript MCP client, on the same ~4 KiB file.
//
// Usage: HUTCH_BIN=/path/to/hutch node bench/mcp-read.mjs [N] [WARMUP]
//        (N sequential timed calls per server, default 2000; WARMUP default 200)
// Needs: npm ci in e2e/ (for the SDK and @modelcontextprotocol/server-filesystem).
// bench/mcp-read.sh builds hutch, installs both and runs this.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const e2e = path.join(here, '..', 'e2e');
const sdk = path.join(e2e, 'node_modules', '@modelcontextprotocol', 'sdk', 'dist', 'esm');
const refBin = path.join(e2e, 'node_modules', '.bin', 'mcp-server-filesystem');
if (!fs.existsSync(sdk) || !fs.existsSync(refBin)) {
  console.error(`missing ${path.relative(process.cwd(), e2e)}/node_modules: run "npm ci --prefix e2e" first`);
  process.exit(2);
}
const { Client } = await import(path.join(sdk, 'client', 'index.js'));
const { StdioClientTransport, getDefaultEnvironment } = await import(path.join(sdk, 'client', 'stdio.js'));

const N = Number(process.argv[2] ?? 2000);
const WARMUP = Number(process.argv[3] ?? 200);
if (!Number.isInteger(N) || N < 1 || !Number.isInteger(WARMUP) || WARMUP < 0) {
  console.error('usage: node bench/mcp-read.mjs [N>=1] [WARMUP>=0]');
  process.exit(2);
}
const hutchBin = process.env.HUTCH_BIN;
if (!hutchBin) {
  console.error('set HUTCH_BIN to the hutch binary (bench/mcp-read.sh does)');
  process.exit(2);
}

// The same ~4 KiB text file for both servers.
const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'hutch-bench-')));
const file = path.join(dir, 'file.txt');
let content = '';
for (let i = 0; content.length < 4096; i++) {
  content += `line ${String(i).padStart(4, '0')}: the quick brown fox jumps over the lazy dog\n`;
}
content = content.slice(0, 4095) + '\n';
fs.writeFileSync(file, content);

async function start(name, command, args) {
  const client = new Client({ name: 'hutch-bench', version: '1.0.0' });
  const transport = new StdioClientTransport({ command, args, env: getDefaultEnvironment(), stderr: 'pipe' });
  let stderr = '';
  transport.stderr?.on('data', (c) => (stderr += c));
  try {
    await client.connect(transport);
  } catch (err) {
    throw new Error(`${name}: could not connect: ${err.message}\n${stderr}`);
  }
  return { name, client, stderr: () => stderr };
}

const servers = [
  {
    ...(await start('hutch', hutchBin, ['mcp', '--tier', 'local', '--root', dir, '--mode', 'read_only'])),
    request: { name: 'read_file', arguments: { path: 'file.txt' } },
  },
  {
    ...(await start('reference', refBin, [dir])),
    request: { name: 'read_text_file', arguments: { path: file } },
  },
];

// One call; every result is checked so an error never counts as a fast read.
async function once(s) {
  const res = await s.client.callTool(s.request);
  const text = res.content?.[0]?.text;
  if (res.isError || text !== content) {
    throw new Error(`${s.name}: ${s.request.name} did not return the file: ${JSON.stringify(res).slice(0, 500)}\n${s.stderr()}`);
  }
}

try {
  for (const s of servers) {
    for (let i = 0; i < WARMUP; i++) await once(s);
    s.samples = new Float64Array(N);
  }
  // Alternate blocks so drift on the machine hits both servers alike.
  const block = 100;
  for (let done = 0; done < N; done += block) {
    const end = Math.min(N, done + block);
    for (const s of servers) {
      for (let i = done; i < end; i++) {
        const t0 = process.hrtime.bigint();
        await once(s);
        s.samples[i] = Number(process.hrtime.bigint() - t0) / 1e3; // µs
      }
    }
  }
} finally {
  await Promise.allSettled(servers.map((s) => s.client.close()));
  fs.rmSync(dir, { recursive: true, force: true });
}

function stats(samples) {
  const sorted = Float64Array.from(samples).sort();
  const q = (p) => sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)];
  return { p50: q(0.5), p99: q(0.99), mean: sorted.reduce((a, b) => a + b, 0) / sorted.length };
}

const [h, r] = servers.map((s) => ({ name: s.name, tool: s.request.name, ...stats(s.samples) }));
console.log(`MCP read over stdio: ${N} sequential calls each after ${WARMUP} warm-up calls, ${content.length}-byte file, node ${process.version}`);
console.log('server      tool             p50 µs    p99 µs   mean µs');
for (const s of [h, r]) {
  console.log(`${s.name.padEnd(11)} ${s.tool.padEnd(14)} ${s.p50.toFixed(1).padStart(9)} ${s.p99.toFixed(1).padStart(9)} ${s.mean.toFixed(1).padStart(9)}`);
}
console.log(`ratio reference/hutch: p50 ${(r.p50 / h.p50).toFixed(2)}x  p99 ${(r.p99 / h.p99).toFixed(2)}x  mean ${(r.mean / h.mean).toFixed(2)}x  (>1: hutch is faster)`);
