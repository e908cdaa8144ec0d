// End-to-end tests of run_code through `hutch mcp` with the official
// TypeScript MCP client over stdio: a model-like script runs code in the
// declared default sandbox, asks for a wider one with a reason, and the
// person's answer (an elicitation) decides that one call.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';

import { accept, connect, show, tempRoot, text } from './helpers.mjs';

const T = { timeout: 120_000 };

// serveCode writes the two policies (project: reads the root and starts
// there; workspace: also changes it) and starts hutch mcp in ask mode with
// project as the default and workspace as the one escalation.
async function serveCode(t, opts) {
  const { base, root } = tempRoot(t);
  fs.writeFileSync(path.join(base, 'project.yaml'), `read: [${JSON.stringify(root)}]\ndir: ${JSON.stringify(root)}\n`);
  fs.writeFileSync(path.join(base, 'workspace.yaml'), `extends: project.yaml\nwrite: [${JSON.stringify(root)}]\n`);
  const s = await connect(t, ['--mode', 'ask',
    '--code-sandbox', path.join(base, 'project.yaml'),
    '--escalate-to', `workspace=${path.join(base, 'workspace.yaml')}`], opts);
  return { ...s, root };
}

const result = (res) => JSON.parse(res.content[0].text);
const edit = `
try:
    open("notes.md", "w").write("edited by the model")
    print("WROTE")
except OSError as e:
    print("REFUSED", e.errno)
`;

describe('run_code over MCP', () => {
  test('the default cannot write; an approved escalation can, once; the next call is back in the default', T, async (t) => {
    const { client, elicitations, root } = await serveCode(t, { elicit: accept });
    const tools = (await client.listTools()).tools;
    const rc = tools.find((x) => x.name === 'run_code');
    assert.ok(rc, `run_code offered: ${show(tools.map((x) => x.name))}`);
    assert.deepEqual(rc.inputSchema.properties.sandbox.enum, ['workspace'], 'sandbox is an enum of the configured names');
    assert.match(rc.description, /python/, 'the description names python');

    let res = await client.callTool({ name: 'run_code', arguments: { language: 'python', code: edit } });
    assert.equal(res.isError ?? false, false, show(res));
    assert.match(result(res).stdout, /REFUSED/, 'the default sandbox cannot change the project');
    assert.equal(elicitations.length, 0, 'the default sandbox runs without asking');

    res = await client.callTool({ name: 'run_code', arguments: { language: 'python', code: edit, sandbox: 'workspace', reason: 'save the notes' } });
    assert.equal(res.isError ?? false, false, show(res));
    assert.equal(elicitations.length, 1, 'the escalation asked once');
    const q = elicitations[0].message;
    assert.match(q, /workspace/, 'the question names the sandbox');
    assert.ok(q.includes(`Can change ${root}`), `the question shows the sandbox's summary: ${q}`);
    assert.match(q, /save the notes/, 'the question shows the reason');
    assert.match(q, /notes\.md/, 'the question shows the code');
    assert.match(result(res).stdout, /WROTE/);
    assert.equal(fs.readFileSync(path.join(root, 'notes.md'), 'utf8'), 'edited by the model');

    fs.rmSync(path.join(root, 'notes.md'));
    res = await client.callTool({ name: 'run_code', arguments: { language: 'python', code: edit } });
    assert.match(result(res).stdout, /REFUSED/, 'the next call without a sandbox cannot write again');
    assert.equal(fs.existsSync(path.join(root, 'notes.md')), false);
  });

  test('a declined escalation runs nothing, and the model is told', T, async (t) => {
    const { client, root } = await serveCode(t, { elicit: () => ({ action: 'decline' }) });
    const res = await client.callTool({ name: 'run_code', arguments: { language: 'python', code: edit, sandbox: 'workspace', reason: 'r' } });
    assert.equal(res.isError, true, show(res));
    assert.match(text(res), /denied/);
    assert.equal(fs.existsSync(path.join(root, 'notes.md')), false);
  });

  test('a plot the code writes comes back as image content', T, async (t) => {
    const { client } = await serveCode(t, {});
    const png = 'import base64, os\n' +
      'data = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")\n' +
      'open(os.environ["RUN_DIR"] + "/plot.png", "wb").write(data)\n';
    const res = await client.callTool({ name: 'run_code', arguments: { language: 'python', code: png } });
    assert.equal(res.isError ?? false, false, show(res));
    const img = res.content.find((c) => c.type === 'image');
    assert.ok(img, `image content: ${show(res.content.map((c) => c.type))}`);
    assert.equal(img.mimeType, 'image/png');
    assert.equal(Buffer.from(img.data, 'base64').subarray(1, 4).toString(), 'PNG');
    assert.deepEqual(result(res).files.map((f) => f.name), ['plot.png']);
  });
});
