import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { startIntent } from '../../src/client/intents';
import { ExchangeStore } from '../../src/ledger/exchange-store';
import { waitFor } from '../helpers/env';
import { intentFor, script, useSafetyWorld, withWorker } from './agent-safety-harness';

// What a replay needs besides the exchanges, kept by a real worker as an intent's first agent attempt starts.
const world = useSafetyWorld('recording-context');

test("an intent's recording keeps its base commit, a hash of its config, Warden's version and its agent profiles, once", async () => {
  await withWorker({}, async (h) => {
    const intent = intentFor(script({ model: 'recorded' }));
    const base = execFileSync('git', ['-C', intent.repoPath, 'rev-parse', 'main'], { encoding: 'utf8' }).trim();
    const handle = await startIntent(world().client, intent, h.queue);
    const store = new ExchangeStore(world().ledger.pool);
    const context = await waitFor(async () => (await store.recordingOf(intent.id)).context, 120_000, 'the recording context');
    await handle.terminate('the test has what it needs');
    const { version } = JSON.parse(readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8')) as { version: string };
    expect(context).toEqual({
      baseCommit: base,
      configHash: expect.stringMatching(/^[0-9a-f]{64}$/),
      wardenVersion: version,
      agents: { default: expect.objectContaining({ kind: 'scripted', scriptPath: intent.agent.kind === 'scripted' ? intent.agent.scriptPath : '' }) },
      cliVersions: {},
    });
  });
});
