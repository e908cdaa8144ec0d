// Long tool calls through the official TypeScript client over stdio: the
// SDK's default request timeout is 60 s, so a longer command completes
// only when the client resets it on progress (resetTimeoutOnProgress with
// onprogress, which makes it send a progressToken); hutch sends progress
// at least every 10 s. Without the reset a call longer than its timeout
// is cut off, and the session goes on.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { connect, show, tempRoot, text } from './helpers.mjs';

describe('long calls and progress', () => {
  test('a 75 s command completes with resetTimeoutOnProgress and the default timeout', { timeout: 150_000 }, async (t) => {
    const { root } = tempRoot(t);
    const { client } = await connect(t, ['--tier', 'local', '--root', root, '--mode', 'auto']);
    const progress = [];
    const res = await client.callTool(
      { name: 'shell', arguments: { command: 'sleep 75; echo done', timeout: 120 } },
      undefined,
      { onprogress: (p) => progress.push(p), resetTimeoutOnProgress: true },
    );
    assert.equal(res.isError ?? false, false, show(res));
    assert.match(text(res), /done/);
    assert.ok(progress.length >= 7, `${progress.length} progress notifications in 75 s: ${show(progress)}`);
    for (let i = 1; i < progress.length; i++) assert.ok(progress[i].progress > progress[i - 1].progress, show(progress));
    assert.ok(progress.every((p) => typeof p.message === 'string' && p.message.length > 0), show(progress));
  });

  test('without resetTimeoutOnProgress a call longer than its timeout is cut off', { timeout: 60_000 }, async (t) => {
    const { root } = tempRoot(t);
    const { client } = await connect(t, ['--tier', 'local', '--root', root, '--mode', 'auto']);
    const started = Date.now();
    await assert.rejects(
      client.callTool({ name: 'shell', arguments: { command: 'sleep 15; echo done' } }, undefined, { timeout: 5000, onprogress: () => {} }),
      (err) => err.code === -32001 && /timed out/i.test(err.message),
    );
    const took = Date.now() - started;
    assert.ok(took >= 4500 && took < 12_000, `cut off after ${took} ms, want about 5000`);
    // The cancelled call gets no response; the session goes on.
    const res = await client.callTool({ name: 'shell', arguments: { command: 'echo still here' } });
    assert.match(text(res), /still here/);
  });
});
