// Parallel calls to one `hutch mcp` over stdio, as clients send them: four
// globs at once over a tree of 20000 files, and read_file round trips while
// a glob runs, against one glob alone and reads alone.
//
// Usage: HUTCH_BIN=/path/to/hutch node bench/mcp-parallel.mjs [ROUNDS]
//        (default 5 rounds; medians are printed)
// Needs: npm ci in e2e/ (for the SDK).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const sdk = path.join(here, '..', 'e2e', 'node_modules', '@modelcontextprotocol', 'sdk', 'dist', 'esm');
const { Client } = await import(path.join(sdk, 'client', 'index.js'));
const { StdioClientTransport, getDefaultEnvironment } = await import(path.join(sdk, 'client', 'stdio.js'));

const ROUNDS = Number(process.argv[2] ?? 5);
const bin = process.env.HUTCH_BIN;
if (!bin) {
  console.error('set HUTCH_BIN to the hutch binary');
  process.exit(2);
}
const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'hutch-par-')));
for (let d = 0; d < 200; d++) {
  const sub = path.join(dir, `d${d}`);
  fs.mkdirSync(sub);
  for (let f = 0; f < 100; f++) fs.writeFileSync(path.join(sub, `f${f}.txt`), 'x\n');
}
fs.writeFileSync(path.join(dir, 'small.txt'), 'hello\n');

const client = new Client({ name: 'hutch-bench', version: '1.0.0' });
await client.connect(new StdioClientTransport({ command: bin, args: ['mcp', '--tier', 'local', '--root', dir], env: getDefaultEnvironment(), stderr: 'ignore' }));
const glob = () => client.callTool({ name: 'glob', arguments: { pattern: '**/*.txt' } });
const read = () => client.callTool({ name: 'read_file', arguments: { path: 'small.txt' } });
const ms = async (f) => {
  const t0 = process.hrtime.bigint();
  await f();
  return Number(process.hrtime.bigint() - t0) / 1e6;
};
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const one = [], four = [], readAlone = [], readDuring = [];
try {
  await glob();
  for (let r = 0; r < ROUNDS; r++) {
    one.push(await ms(glob));
    four.push(await ms(() => Promise.all([glob(), glob(), glob(), glob()])));
    for (let i = 0; i < 20; i++) readAlone.push(await ms(read));
    const g = glob();
    await new Promise((res) => setTimeout(res, 5));
    for (let i = 0; i < 5; i++) readDuring.push(await ms(read));
    await g;
  }
} finally {
  await client.close();
  fs.rmSync(dir, { recursive: true, force: true });
}
console.log(`GOMAXPROCS env: ${process.env.GOMAXPROCS ?? '(unset)'}; ${os.cpus().length} CPUs; medians of ${ROUNDS} rounds`);
console.log(`one glob of 20000 files   ${median(one).toFixed(1)} ms`);
console.log(`four globs at once        ${median(four).toFixed(1)} ms`);
console.log(`read_file alone           ${median(readAlone).toFixed(2)} ms`);
console.log(`read_file during a glob   ${median(readDuring).toFixed(2)} ms`);
