// End-to-end tests of `hutch mcp` with the official TypeScript MCP client
// (@modelcontextprotocol/sdk) over stdio. Run:
//
//   HUTCH_BIN=/path/to/hutch node --test e2e/
//
// Without HUTCH_BIN the tests build hutch from this checkout. Nothing is
// ever skipped. Each test serves a fresh temporary root.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';

import { accept, connect, hutch, hutchOK, show, tempRoot, text } from './helpers.mjs';

const T = { timeout: 60_000 };

const names = (list) => list.tools.map((t) => t.name).sort();
// The tool families as hutch offers them.
const readTools = ['read_file', 'glob', 'grep', 'list'];
const writeTools = ['write_file', 'edit_file', 'apply_patch', 'move', 'delete', 'mkdir'];
const shellTools = ['shell', 'process_output', 'process_input', 'process_kill', 'process_list'];
const family = (...parts) => parts.flat().sort();

// call runs tools/call and returns the result (a protocol error throws).
async function call(client, name, args) {
  return client.callTool({ name, arguments: args });
}

// ok asserts a successful result and returns it.
function ok(res, what) {
  assert.equal(res.isError ?? false, false, `${what}: expected success, got ${show(res)}`);
  return res;
}

// failed asserts an isError result whose text matches every pattern.
function failed(res, what, ...patterns) {
  assert.equal(res.isError, true, `${what}: expected isError, got ${show(res)}`);
  const msg = text(res);
  for (const p of patterns) assert.match(msg, p, `${what}: error text ${JSON.stringify(msg)}`);
  return msg;
}

// structured asserts structuredContent equals want and that the text
// content is the same JSON (for clients that ignore structured content).
function structured(res, want, what) {
  ok(res, what);
  assert.deepEqual(res.structuredContent, want, `${what}: structuredContent`);
  assert.deepEqual(JSON.parse(text(res)), want, `${what}: text content is the JSON of the result`);
}

describe('hutch mcp', () => {
  test('--help describes the command and its flags', T, () => {
    const out = hutchOK('mcp', '--help');
    for (const flag of ['--tier', '--root', '--mode', '--allow', '--store', '--audit', '--http']) {
      assert.ok(out.includes(flag), `hutch mcp --help lacks ${flag}:\n${out}`);
    }
  });

  test('initialize: server info and instructions naming the host machine and the root', T, async (t) => {
    const { root } = tempRoot(t);
    const { client } = await connect(t, ['--tier', 'local', '--root', root, '--mode', 'read_only']);
    const info = client.getServerVersion();
    assert.equal(typeof info?.name, 'string');
    assert.ok(info.name.length > 0, `server name: ${show(info)}`);
    assert.ok(client.getServerCapabilities()?.tools, `server capabilities lack tools: ${show(client.getServerCapabilities())}`);
    const instr = client.getInstructions();
    assert.equal(typeof instr, 'string', 'the server sends instructions');
    assert.ok(instr.includes('host machine'), `instructions do not mention the host machine: ${instr}`);
    assert.ok(instr.includes(root), `instructions do not name the root ${root}: ${instr}`);
  });

  test('stdio: the server exits by itself when the client closes stdin', T, async (t) => {
    const { root } = tempRoot(t);
    const s = await connect(t, ['--tier', 'local', '--root', root, '--mode', 'auto']);
    ok(await call(s.client, 'glob', { pattern: '*' }), 'glob');
    const pid = s.transport.pid;
    const started = Date.now();
    await s.close(); // ends stdin; the SDK sends SIGTERM only after 2 s
    assert.ok(Date.now() - started < 1500, `the server took ${Date.now() - started} ms to exit on EOF`);
    assert.throws(() => process.kill(pid, 0), { code: 'ESRCH' });
  });

  test('stdio: a malformed line gets an error reply, and the session and a running call go on', T, async (t) => {
    const { root } = tempRoot(t);
    const s = await connect(t, ['--tier', 'local', '--root', root, '--mode', 'auto']);
    const errors = [];
    s.client.onerror = (err) => errors.push(err);
    const running = call(s.client, 'shell', { command: 'sleep 1; echo done' });
    // The official client never sends a broken line: write one past it.
    s.transport._process.stdin.write('{"jsonrpc":"2.0","id":99,"method":\n');
    await s.client.ping();
    assert.match(text(ok(await running, 'shell')), /done/);
    assert.ok(s.transport.pid && process.kill(s.transport.pid, 0), 'the server is still running');
    // JSON-RPC 2.0 answers a line it cannot parse with "id": null; this
    // client's schema wants a string or number id, so it reports the reply
    // to onerror, once, and goes on.
    assert.equal(errors.length, 1, `client errors: ${errors.map(String).join('; ')}`);
    assert.doesNotMatch(s.stderr(), /unmarshaling|hutch: /, `server stderr: ${s.stderr()}`);
  });

  test('tools/list: read_only offers only the reading tools', T, async (t) => {
    const { root } = tempRoot(t);
    const { client } = await connect(t, ['--tier', 'local', '--root', root, '--mode', 'read_only']);
    const list = await client.listTools();
    assert.deepEqual(names(list), family(readTools));
    const read = list.tools.find((x) => x.name === 'read_file');
    assert.equal(read.inputSchema.type, 'object');
    assert.deepEqual(read.inputSchema.required, []);
    assert.deepEqual(Object.keys(read.inputSchema.properties).sort(), ['limit', 'line_numbers', 'offset', 'path', 'paths']);
    assert.ok(read.description.length > 20, 'read_file has a description');
  });

  test('tools/list: auto on the local tier offers the file tools and shell, not fetch or web_search', T, async (t) => {
    const { root } = tempRoot(t);
    const { client } = await connect(t, ['--tier', 'local', '--root', root, '--mode', 'auto']);
    const list = await client.listTools();
    assert.deepEqual(names(list), family(readTools, writeTools, shellTools));
    const shell = list.tools.find((x) => x.name === 'shell');
    assert.deepEqual(shell.inputSchema.required, ['command']);
    const edit = list.tools.find((x) => x.name === 'edit_file');
    assert.deepEqual(edit.inputSchema.required, ['path']);
    assert.deepEqual(Object.keys(edit.inputSchema.properties).sort(), ['dry_run', 'edits', 'new_string', 'old_string', 'path', 'replace_all']);
    assert.deepEqual([...edit.inputSchema.properties.edits.items.required].sort(), ['new_string', 'old_string']);
  });

  test('tools/list: the virtual tier has no shell, even in auto mode', T, async (t) => {
    const { root } = tempRoot(t);
    const { client } = await connect(t, ['--tier', 'virtual', '--mode', 'auto']);
    assert.deepEqual(names(await client.listTools()), family(readTools, writeTools));
    structured(await call(client, 'write_file', { path: 'v.txt', content: 'in memory' }), { ok: true, path: 'v.txt', bytes: 9 }, 'virtual write_file');
    assert.equal(text(ok(await call(client, 'read_file', { path: 'v.txt' }), 'virtual read_file')), 'in memory');
    assert.equal(fs.existsSync(path.join(root, 'v.txt')), false, 'the virtual tier never touches the host');
    assert.ok(!fs.existsSync(path.join(process.cwd(), 'v.txt')), 'the virtual tier never touches the host');
  });

  test('read_only: write_file is refused and nothing is written', T, async (t) => {
    const { root } = tempRoot(t);
    const { client } = await connect(t, ['--tier', 'local', '--root', root, '--mode', 'read_only']);
    let res;
    try {
      res = await call(client, 'write_file', { path: 'a.txt', content: 'x' });
    } catch (err) {
      res = { isError: true, content: [{ type: 'text', text: String(err.message) }] };
    }
    failed(res, 'write_file in read_only', /write_file|unknown tool|denied/i);
    assert.equal(fs.existsSync(path.join(root, 'a.txt')), false);
  });

  test('auto: write_file, read_file, edit_file, glob and shell round trip', T, async (t) => {
    const { root } = tempRoot(t);
    fs.writeFileSync(path.join(root, 'notes.md'), '# notes\n');
    fs.mkdirSync(path.join(root, 'dir', 'deep'), { recursive: true });
    fs.writeFileSync(path.join(root, 'dir', 'deep', 'c.txt'), 'c\n');
    const { client } = await connect(t, ['--tier', 'local', '--root', root, '--mode', 'auto']);

    // write_file creates missing directories.
    structured(await call(client, 'write_file', { path: 'dir/a.txt', content: 'hello\nworld\n' }),
      { ok: true, path: 'dir/a.txt', bytes: 12 }, 'write_file');
    assert.equal(fs.readFileSync(path.join(root, 'dir', 'a.txt'), 'utf8'), 'hello\nworld\n');
    structured(await call(client, 'write_file', { path: 'new/sub/b.txt', content: 'héllo' }),
      { ok: true, path: 'new/sub/b.txt', bytes: 6 }, 'write_file (new directories, UTF-8 byte count)');
    assert.equal(fs.readFileSync(path.join(root, 'new', 'sub', 'b.txt'), 'utf8'), 'héllo');

    // read_file: whole file, and a line window.
    const whole = ok(await call(client, 'read_file', { path: 'dir/a.txt' }), 'read_file');
    assert.equal(text(whole), 'hello\nworld\n');
    const second = ok(await call(client, 'read_file', { path: 'dir/a.txt', offset: 2, limit: 1 }), 'read_file window');
    assert.equal(text(second), 'world\n');
    const first = ok(await call(client, 'read_file', { path: 'dir/a.txt', offset: 1, limit: 1 }), 'read_file window 1');
    assert.match(text(first), /^hello\n/);
    assert.match(text(first), /lines 1-1 of 2; use offset 2/);
    // An absolute path inside the root is fine.
    assert.equal(text(ok(await call(client, 'read_file', { path: path.join(root, 'dir', 'a.txt') }), 'read_file absolute')), 'hello\nworld\n');

    // edit_file: exactly one replacement, then replace_all.
    const diff = (p, ...lines) => `--- a/${p}\n+++ b/${p}\n${lines.join('\n')}\n`;
    structured(await call(client, 'edit_file', { path: 'dir/a.txt', old_string: 'world', new_string: 'there', dry_run: true }),
      { ok: true, path: 'dir/a.txt', replacements: 1, dry_run: true, diff: diff('dir/a.txt', '@@ -1,2 +1,2 @@', ' hello', '-world', '+there'), lines_added: 1, lines_deleted: 1 },
      'edit_file dry_run');
    assert.equal(fs.readFileSync(path.join(root, 'dir', 'a.txt'), 'utf8'), 'hello\nworld\n', 'a dry run writes nothing');
    structured(await call(client, 'edit_file', { path: 'dir/a.txt', old_string: 'world', new_string: 'there' }),
      { ok: true, path: 'dir/a.txt', replacements: 1, diff: diff('dir/a.txt', '@@ -1,2 +1,2 @@', ' hello', '-world', '+there'), lines_added: 1, lines_deleted: 1 },
      'edit_file');
    assert.equal(fs.readFileSync(path.join(root, 'dir', 'a.txt'), 'utf8'), 'hello\nthere\n');
    failed(await call(client, 'edit_file', { path: 'dir/a.txt', old_string: 'nowhere', new_string: 'x' }),
      'edit_file with a missing old_string', /old_string not found/);
    structured(await call(client, 'write_file', { path: 'dir/a.txt', content: 'aXbXc' }),
      { ok: true, path: 'dir/a.txt', bytes: 5 }, 'write_file after writing (the session knows the file)');
    failed(await call(client, 'edit_file', { path: 'dir/a.txt', old_string: 'X', new_string: '-' }),
      'edit_file with an ambiguous old_string', /appears 2 times/, /replace_all/);
    structured(await call(client, 'edit_file', { path: 'dir/a.txt', old_string: 'X', new_string: '-', replace_all: true }),
      { ok: true, path: 'dir/a.txt', replacements: 2, diff: diff('dir/a.txt', '@@ -1 +1 @@', '-aXbXc', '\\ No newline at end of file', '+a-b-c', '\\ No newline at end of file'), lines_added: 1, lines_deleted: 1 },
      'edit_file replace_all');
    // edits: in order, all or none; the failing one is named.
    failed(await call(client, 'edit_file', { path: 'dir/a.txt', edits: [{ old_string: 'a-', new_string: 'A' }, { old_string: 'zz', new_string: 'y' }] }),
      'edit_file with a failing second edit', /edit 2: old_string not found/);
    assert.equal(fs.readFileSync(path.join(root, 'dir', 'a.txt'), 'utf8'), 'a-b-c', 'a failed edit list changes nothing');
    structured(await call(client, 'edit_file', { path: 'dir/a.txt', edits: [{ old_string: 'a-', new_string: 'A' }, { old_string: 'Ab', new_string: 'B' }] }),
      { ok: true, path: 'dir/a.txt', replacements: 2, diff: diff('dir/a.txt', '@@ -1 +1 @@', '-a-b-c', '\\ No newline at end of file', '+B-c', '\\ No newline at end of file'), lines_added: 1, lines_deleted: 1 },
      'edit_file edits');
    assert.equal(fs.readFileSync(path.join(root, 'dir', 'a.txt'), 'utf8'), 'B-c');

    // glob: files only, sorted, root-relative; a trailing "/" lists directories.
    structured(await call(client, 'glob', { pattern: '**/*.txt' }),
      { files: ['dir/a.txt', 'dir/deep/c.txt', 'new/sub/b.txt'] }, 'glob **/*.txt');
    structured(await call(client, 'glob', { pattern: '*.md' }), { files: ['notes.md'] }, 'glob *.md');
    structured(await call(client, 'glob', { pattern: '**/' }),
      { files: ['dir', 'dir/deep', 'new', 'new/sub'] }, 'glob **/ (directories)');
    structured(await call(client, 'glob', { pattern: '**/*.nothing' }), { files: [] }, 'glob without matches');

    // shell: exit code, both streams, the root as working directory.
    structured(await call(client, 'shell', { command: 'echo out; echo err >&2; exit 3' }),
      { exit_code: 3, stdout: 'out\n', stderr: 'err\n', timed_out: false, blocked: [] }, 'shell');
    structured(await call(client, 'shell', { command: 'pwd; cat dir/a.txt' }),
      { exit_code: 0, stdout: `${root}\nB-c`, stderr: '', timed_out: false, blocked: [] }, 'shell pwd');
    // What the shell writes, the file tools see.
    structured(await call(client, 'shell', { command: 'printf made-by-shell > fromsh.txt' }),
      { exit_code: 0, stdout: '', stderr: '', timed_out: false, blocked: [] }, 'shell writes a file');
    assert.equal(text(ok(await call(client, 'read_file', { path: 'fromsh.txt' }), 'read_file of a shell-made file')), 'made-by-shell');
  });

  test('shell: a timeout stops the command and says so', T, async (t) => {
    const { root } = tempRoot(t);
    const { client } = await connect(t, ['--tier', 'local', '--root', root, '--mode', 'auto']);
    const started = Date.now();
    const res = ok(await call(client, 'shell', { command: 'echo begun; sleep 30', timeout: 0.5 }), 'shell with timeout');
    assert.ok(Date.now() - started < 15_000, 'the timeout cut the command short');
    assert.equal(res.structuredContent.timed_out, true, show(res));
    assert.equal(res.structuredContent.stdout, 'begun\n');
    assert.match(res.structuredContent.stderr, /timed out/);
    assert.notEqual(res.structuredContent.exit_code, 0);
  });

  test('escapes: ../x and absolute paths outside the root are isError with a clear text, and touch nothing', T, async (t) => {
    const { base, root } = tempRoot(t);
    fs.writeFileSync(path.join(base, 'x'), 'SECRET-OUTSIDE');
    fs.symlinkSync(path.join(base, 'x'), path.join(root, 'link'));
    const { client } = await connect(t, ['--tier', 'local', '--root', root, '--mode', 'auto']);

    const read = failed(await call(client, 'read_file', { path: '../x' }), 'read_file ../x',
      /escape|outside/i, /sandbox root/);
    assert.ok(!read.includes('SECRET-OUTSIDE'), 'the outside file is not shown');
    failed(await call(client, 'read_file', { path: path.join(base, 'x') }), 'read_file of an absolute path outside', /escape|outside/i);
    const viaLink = failed(await call(client, 'read_file', { path: 'link' }), 'read_file of a link leading out', /escape|outside/i);
    assert.ok(!viaLink.includes('SECRET-OUTSIDE'));

    failed(await call(client, 'write_file', { path: '../x', content: 'overwritten' }), 'write_file ../x', /escape|outside/i, /sandbox root/);
    failed(await call(client, 'write_file', { path: '../y', content: 'new' }), 'write_file ../y', /escape|outside/i);
    failed(await call(client, 'edit_file', { path: '../x', old_string: 'SECRET', new_string: 'PUBLIC' }), 'edit_file ../x', /escape|outside/i);
    failed(await call(client, 'glob', { pattern: '../*' }), 'glob ../*', /escape|outside|\.\./i);
    assert.equal(fs.readFileSync(path.join(base, 'x'), 'utf8'), 'SECRET-OUTSIDE', 'the outside file is unchanged');
    assert.equal(fs.existsSync(path.join(base, 'y')), false, 'nothing was created outside');

    failed(await call(client, 'read_file', { path: 'missing.txt' }), 'read_file of a missing file', /not (found|exist)|no such/i);
  });

  test('apply_patch: a git diff over several files applies all or nothing, after the files were read', T, async (t) => {
    const { root } = tempRoot(t);
    fs.writeFileSync(path.join(root, 'a.txt'), 'one\ntwo\nthree\n');
    fs.writeFileSync(path.join(root, 'gone.txt'), 'bye\n');
    const { client } = await connect(t, ['--tier', 'local', '--root', root, '--mode', 'auto']);
    const patch = 'diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n' +
      'diff --git a/new/b.txt b/new/b.txt\nnew file mode 100644\n--- /dev/null\n+++ b/new/b.txt\n@@ -0,0 +1 @@\n+bee\n' +
      'diff --git a/gone.txt b/gone.txt\ndeleted file mode 100644\n--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n';
    failed(await call(client, 'apply_patch', { patch }), 'apply_patch before read', /read a\.txt before overwriting it/);
    assert.equal(fs.existsSync(path.join(root, 'new')), false, 'a refused patch writes nothing');
    ok(await call(client, 'read_file', { path: 'a.txt' }), 'read_file a.txt');
    ok(await call(client, 'read_file', { path: 'gone.txt' }), 'read_file gone.txt');
    failed(await call(client, 'apply_patch', { patch: patch.replace('-two', '-TWO') }), 'apply_patch that does not match',
      /a\.txt: hunk 1 \(patch line 4\) does not apply/, /line 1/);
    structured(await call(client, 'apply_patch', { patch }), {
      ok: true,
      files: [
        { path: 'a.txt', op: 'modify', added: 1, removed: 1 },
        { path: 'new/b.txt', op: 'add', added: 1, removed: 0 },
        { path: 'gone.txt', op: 'delete', added: 0, removed: 1 },
      ],
      summary: '3 files (1 modified, 1 added, 1 deleted), +2 -2 lines',
    }, 'apply_patch');
    assert.equal(fs.readFileSync(path.join(root, 'a.txt'), 'utf8'), 'one\n2\nthree\n');
    assert.equal(fs.readFileSync(path.join(root, 'new', 'b.txt'), 'utf8'), 'bee\n');
    assert.equal(fs.existsSync(path.join(root, 'gone.txt')), false);
    const tool = (await client.listTools()).tools.find((x) => x.name === 'apply_patch');
    assert.deepEqual(tool.inputSchema.required, ['patch']);
    assert.equal(tool.annotations?.destructiveHint, true);
  });

  test('read-before-write: overwriting an unread or changed file is refused with a clear text', T, async (t) => {
    const { root } = tempRoot(t);
    const file = path.join(root, 'existing.txt');
    fs.writeFileSync(file, 'original\n');
    const { client } = await connect(t, ['--tier', 'local', '--root', root, '--mode', 'auto']);

    failed(await call(client, 'write_file', { path: 'existing.txt', content: 'clobbered' }),
      'write_file before read', /read existing\.txt before overwriting it/);
    failed(await call(client, 'edit_file', { path: 'existing.txt', old_string: 'original', new_string: 'edited' }),
      'edit_file before read', /read existing\.txt before overwriting it/);
    assert.equal(fs.readFileSync(file, 'utf8'), 'original\n', 'nothing was written');

    ok(await call(client, 'read_file', { path: 'existing.txt' }), 'read_file');
    // Someone else changes the file after the read.
    fs.writeFileSync(file, 'changed behind your back\n');
    failed(await call(client, 'write_file', { path: 'existing.txt', content: 'clobbered' }),
      'write_file of a file changed since the read', /stale/, /read it again/);
    assert.equal(fs.readFileSync(file, 'utf8'), 'changed behind your back\n');

    ok(await call(client, 'read_file', { path: 'existing.txt' }), 'read_file again');
    structured(await call(client, 'write_file', { path: 'existing.txt', content: 'now fine' }),
      { ok: true, path: 'existing.txt', bytes: 8 }, 'write_file after reading');
    assert.equal(fs.readFileSync(file, 'utf8'), 'now fine');
  });

  test('read-before-write memory is per session', T, async (t) => {
    const { root } = tempRoot(t);
    fs.writeFileSync(path.join(root, 'f.txt'), 'one');
    const a = await connect(t, ['--tier', 'local', '--root', root, '--mode', 'auto']);
    ok(await call(a.client, 'read_file', { path: 'f.txt' }), 'read in session A');
    const b = await connect(t, ['--tier', 'local', '--root', root, '--mode', 'auto']);
    failed(await call(b.client, 'write_file', { path: 'f.txt', content: 'two' }), 'write in session B without reading',
      /read f\.txt before overwriting it/);
    ok(await call(a.client, 'write_file', { path: 'f.txt', content: 'two' }), 'write in session A');
    assert.equal(fs.readFileSync(path.join(root, 'f.txt'), 'utf8'), 'two');
  });

  test('ask: an accepted elicitation lets the write happen', T, async (t) => {
    const { root } = tempRoot(t);
    const { client, elicitations } = await connect(t, ['--tier', 'local', '--root', root, '--mode', 'ask'], { elicit: accept });
    assert.ok(names(await client.listTools()).includes('write_file'), 'ask mode offers write_file');

    // Reading is not privileged: no question.
    fs.writeFileSync(path.join(root, 'r.txt'), 'readable');
    assert.equal(text(ok(await call(client, 'read_file', { path: 'r.txt' }), 'read_file in ask mode')), 'readable');
    assert.equal(elicitations.length, 0, `reading asked: ${show(elicitations)}`);

    structured(await call(client, 'write_file', { path: 'asked.txt', content: 'approved content' }),
      { ok: true, path: 'asked.txt', bytes: 16 }, 'write_file accepted');
    assert.equal(fs.readFileSync(path.join(root, 'asked.txt'), 'utf8'), 'approved content');
    assert.equal(elicitations.length, 1, `one question per privileged call: ${show(elicitations)}`);
    const q = elicitations[0];
    assert.ok(q.mode === undefined || q.mode === 'form', `form mode: ${show(q)}`);
    assert.equal(q.requestedSchema?.type, 'object', `requestedSchema: ${show(q)}`);
    assert.match(q.message, /asked\.txt/, 'the question names the path');
    assert.match(q.message, /write/, 'the question names the action');

    // shell also asks, and runs when accepted.
    structured(await call(client, 'shell', { command: 'echo yes' }),
      { exit_code: 0, stdout: 'yes\n', stderr: '', timed_out: false, blocked: [] }, 'shell accepted');
    assert.equal(elicitations.length, 2);
    assert.match(elicitations[1].message, /echo yes/, 'the question shows the command');
  });

  for (const [action, done] of [['decline', 'declined'], ['cancel', 'cancelled']]) {
    test(`ask: a ${done} elicitation denies the call and nothing is written`, T, async (t) => {
      const { root } = tempRoot(t);
      const { client, elicitations } = await connect(t, ['--tier', 'local', '--root', root, '--mode', 'ask'],
        { elicit: () => ({ action }) });
      failed(await call(client, 'write_file', { path: 'no.txt', content: 'should not exist' }),
        `write_file ${done}`, /denied by user/);
      assert.equal(elicitations.length, 1);
      assert.equal(fs.existsSync(path.join(root, 'no.txt')), false, 'the file was not written');
      failed(await call(client, 'shell', { command: 'touch ran.txt' }), `shell ${done}`, /denied by user/);
      assert.equal(fs.existsSync(path.join(root, 'ran.txt')), false, 'the command did not run');
    });
  }

  test('ask: a client without elicitation is denied, and told it cannot ask', T, async (t) => {
    const { root } = tempRoot(t);
    const { client } = await connect(t, ['--tier', 'local', '--root', root, '--mode', 'ask']);
    const msg = failed(await call(client, 'write_file', { path: 'no.txt', content: 'x' }),
      'write_file without elicitation', /denied/i, /elicitation/i);
    assert.match(msg, /cannot ask|can't ask|could not ask|does not support|did not declare/i, msg);
    assert.equal(fs.existsSync(path.join(root, 'no.txt')), false);
    // Reading still works.
    fs.writeFileSync(path.join(root, 'r.txt'), 'r');
    assert.equal(text(ok(await call(client, 'read_file', { path: 'r.txt' }), 'read_file')), 'r');
  });

  test('ask: --allow write lets writes through without asking', T, async (t) => {
    const { root } = tempRoot(t);
    const { client, elicitations } = await connect(t, ['--tier', 'local', '--root', root, '--mode', 'ask', '--allow', 'write'],
      { elicit: () => ({ action: 'decline' }) });
    ok(await call(client, 'write_file', { path: 'w.txt', content: 'w' }), 'allowed write');
    assert.equal(fs.readFileSync(path.join(root, 'w.txt'), 'utf8'), 'w');
    assert.equal(elicitations.length, 0);
    failed(await call(client, 'shell', { command: 'true' }), 'shell still asks', /denied by user/);
    assert.equal(elicitations.length, 1);
  });

  test('approve: pending request, approvals list --json, approve, restart, the identical call succeeds exactly once', T, async (t) => {
    const { base, root } = tempRoot(t);
    const store = path.join(base, 'approvals.db');
    const args = ['--tier', 'local', '--root', root, '--mode', 'approve', '--store', store];
    const writeArgs = { path: 'out/approved.txt', content: 'approved!' };

    // 1. The undecided call is an error naming the request and the command.
    let s = await connect(t, args);
    assert.deepEqual(names(await s.client.listTools()), family(readTools, writeTools, shellTools));
    const msg = failed(await call(s.client, 'write_file', writeArgs), 'write_file undecided', /approval required/i);
    const m = msg.match(/hutch approvals approve (\S+) --store (\S+)/);
    assert.ok(m, `the text names the approve command: ${msg}`);
    const [, id, storeInText] = m;
    assert.equal(storeInText, store, 'the command names this store');
    assert.ok(msg.includes(id));
    assert.equal(fs.existsSync(path.join(root, 'out')), false, 'nothing written while pending');
    // Reading needs no approval.
    fs.writeFileSync(path.join(root, 'r.txt'), 'r');
    ok(await call(s.client, 'read_file', { path: 'r.txt' }), 'read_file in approve mode');

    // Asking again before a decision names the same request.
    const again = failed(await call(s.client, 'write_file', writeArgs), 'write_file still undecided', /approval required/i);
    assert.ok(again.includes(`hutch approvals approve ${id} --store ${store}`), `same request id: ${again}`);

    // 2. hutch approvals list --json shows it.
    const listed = JSON.parse(hutchOK('approvals', 'list', '--store', store, '--json'));
    assert.ok(Array.isArray(listed), `list --json prints an array: ${show(listed)}`);
    assert.equal(listed.length, 1, `one pending request: ${show(listed)}`);
    const a = listed[0];
    for (const k of ['id', 'capability', 'detail', 'tool', 'arguments', 'created_at']) {
      assert.ok(k in a, `list entry lacks ${k}: ${show(a)}`);
    }
    assert.equal(a.id, id);
    assert.equal(a.capability, 'write');
    assert.equal(a.detail, 'out/approved.txt');
    assert.equal(a.tool, 'write_file');
    assert.deepEqual(a.arguments, writeArgs);
    const created = Date.parse(a.created_at);
    assert.ok(Number.isFinite(created), `created_at is a date: ${a.created_at}`);
    assert.ok(Math.abs(Date.now() - created) < 5 * 60_000, `created_at is now: ${a.created_at}`);

    // 3. Stop the server, approve from the CLI, start a new server.
    const oldPid = s.transport.pid;
    await s.close();
    assert.throws(() => process.kill(oldPid, 0), { code: 'ESRCH' }, 'the first server is gone');
    hutchOK('approvals', 'approve', id, '--store', store);
    s = await connect(t, args);
    assert.notEqual(s.transport.pid, oldPid);

    // A call with different arguments is not covered by the approval.
    failed(await call(s.client, 'write_file', { ...writeArgs, content: 'something else' }),
      'write_file with other arguments', /approval required/i);
    assert.equal(fs.existsSync(path.join(root, 'out', 'approved.txt')), false);

    // 4. The identical call (keys in another order) succeeds, once.
    structured(await call(s.client, 'write_file', { content: writeArgs.content, path: writeArgs.path }),
      { ok: true, path: 'out/approved.txt', bytes: 9 }, 'write_file after approval');
    assert.equal(fs.readFileSync(path.join(root, 'out', 'approved.txt'), 'utf8'), 'approved!');

    const next = failed(await call(s.client, 'write_file', writeArgs), 'write_file a second time', /approval required/i);
    const m2 = next.match(/hutch approvals approve (\S+) --store/);
    assert.ok(m2, next);
    assert.notEqual(m2[1], id, 'an approval covers one call: the repeat is a new request');

    // 5. A denied request denies the next identical call, once.
    hutchOK('approvals', 'deny', m2[1], '--store', store);
    const denied = failed(await call(s.client, 'write_file', writeArgs), 'write_file after deny', /not approved|denied/i);
    assert.doesNotMatch(denied, /approval required/i);
    failed(await call(s.client, 'write_file', writeArgs), 'write_file after the denial was used', /approval required/i);

    // Deciding twice, or an unknown id, fails.
    assert.notEqual(hutch('approvals', 'approve', id, '--store', store).status, 0, 'approving a used request fails');
    assert.notEqual(hutch('approvals', 'approve', 'ffffffffffff', '--store', store).status, 0, 'approving an unknown id fails');
  });

  test('approve: shell waits for approval, then runs once', T, async (t) => {
    const { base, root } = tempRoot(t);
    const store = path.join(base, 'store.db');
    const s = await connect(t, ['--tier', 'local', '--root', root, '--mode', 'approve', '--store', store]);
    const command = 'echo run >> log.txt';
    const msg = failed(await call(s.client, 'shell', { command }), 'shell undecided', /approval required/i);
    const id = msg.match(/hutch approvals approve (\S+) --store/)?.[1];
    assert.ok(id, msg);
    const [entry] = JSON.parse(hutchOK('approvals', 'list', '--store', store, '--json'));
    assert.equal(entry.capability, 'shell');
    assert.equal(entry.tool, 'shell');
    assert.equal(entry.detail, command);
    assert.deepEqual(entry.arguments, { command });
    assert.equal(fs.existsSync(path.join(root, 'log.txt')), false);
    // Approved while the server runs: the store is shared with the CLI.
    hutchOK('approvals', 'approve', id, '--store', store);
    structured(await call(s.client, 'shell', { command }), { exit_code: 0, stdout: '', stderr: '', timed_out: false, blocked: [] }, 'approved shell');
    failed(await call(s.client, 'shell', { command }), 'shell again', /approval required/i);
    assert.equal(fs.readFileSync(path.join(root, 'log.txt'), 'utf8'), 'run\n', 'ran exactly once');
  });

  // The container tier on a real Docker engine (scripts/docker-up.sh starts
  // one and builds the busybox image). Without one the test fails under
  // CI=true and skips elsewhere, saying why.
  test('container: the tools act inside a hardened container, the root bound writable', T, async (t) => {
    const image = process.env.HUTCH_TEST_IMAGE ?? 'hutch-test-busybox:latest';
    const probe = spawnSync('docker', ['image', 'inspect', image], { encoding: 'utf8' });
    if (probe.status !== 0) {
      const why = `no Docker engine with ${image} (run scripts/docker-up.sh): ${probe.error ?? probe.stderr}`;
      if (process.env.CI === 'true') assert.fail(why);
      t.skip(why);
      return;
    }
    const { root } = tempRoot(t);
    fs.writeFileSync(path.join(root, 'in.txt'), 'from the host\n');
    const s = await connect(t, ['--tier', 'container', '--image', image, '--root', root, '--mode', 'auto']);
    assert.match(s.client.getInstructions() ?? '', /container/);
    assert.equal(text(ok(await call(s.client, 'read_file', { path: 'in.txt' }), 'read_file')), 'from the host\n');
    ok(await call(s.client, 'write_file', { path: 'out.txt', content: 'from the container\n' }), 'write_file');
    assert.equal(fs.readFileSync(path.join(root, 'out.txt'), 'utf8'), 'from the container\n');
    const sh = ok(await call(s.client, 'shell', { command: 'grep CapEff /proc/self/status; touch /etc/x 2>/dev/null || echo read-only; ls /sys/class/net' }), 'shell');
    assert.deepEqual(sh.structuredContent.stdout.split('\n'), ['CapEff:\t0000000000000000', 'read-only', 'lo', '']);
    failed(await call(s.client, 'read_file', { path: '/etc/passwd' }), 'escape', /outside|escape/i);
  });

  test('approve mode without --store fails to start with a clear message', T, (t) => {
    const { root } = tempRoot(t);
    const r = hutch('mcp', '--tier', 'local', '--root', root, '--mode', 'approve');
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /store/);
  });
});
