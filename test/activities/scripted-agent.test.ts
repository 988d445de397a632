import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CancelledFailure } from '@temporalio/common';
import { createScriptedAgent } from '../../src/activities/agents/scripted-agent';
import { SpendMeter } from '../../src/gateway/spend-meter';

test('a scripted agent cancelled during its delay rejects as cancelled and makes none of its edits', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'warden-scripted-'));
  const scriptPath = path.join(dir, 'script.json');
  writeFileSync(scriptPath, JSON.stringify({ model: 'anything', stages: { impl: [{ output: 'done', costUsd: 0, delayMs: 60_000, edits: [{ path: 'made.txt', content: 'x' }] }] } }));
  const abort = new AbortController();
  const running = createScriptedAgent(scriptPath).run({
    intentId: 'cancel-1',
    stage: 'impl',
    attempt: 1,
    prompt: 'build it',
    worktreePath: dir,
    signal: abort.signal,
    heartbeat: () => undefined,
    meter: new SpendMeter({ pricing: {}, declaredCapUsd: '0.50' }),
  });
  setImmediate(() => abort.abort());
  await expect(running).rejects.toBeInstanceOf(CancelledFailure);
  expect(existsSync(path.join(dir, 'made.txt'))).toBe(false);
});
