import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { answeringDesignStages } from '../../src/client/sample-repo';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import type { IntentState } from '../../src/shared/state';
import { demoStages, git, startSampleIntent, useTestWorld, waitFor } from '../helpers/env';
import { FAKE_AWS_KEY_ID, FAKE_PRIVATE_KEY_BLOCK } from '../helpers/fake-credentials';

/**
 * A command agent that writes an AWS access key id and a private key block into lib/strings.js:
 * the change is held back before it is committed, impl is sent back told the file, line and
 * rule, the ledger has a SECRET_IN_CHANGE row for each, and the merge gate's review package
 * shows them. An agent that keeps doing it ends at the impl cap with nothing merged; a path a
 * person allowed is recorded (SECRET_ALLOWED) and merges.
 */

const world = useTestWorld('secret-in-change');

const b64 = (text: string): string => Buffer.from(text).toString('base64');
/** The right lib/strings.js of the demo (its second impl attempt). */
const right = String((demoStages().impl![1]!.edits as Array<{ content: string }>)[0]!.content);
/** The same, with a key id on its last line but one and a private key block after it. */
const withSecrets = `${right.trimEnd()}\nconst awsKeyId = '${FAKE_AWS_KEY_ID}';\nconst pem = \`\n${FAKE_PRIVATE_KEY_BLOCK}\`;\n`;
const keyIdLine = right.trimEnd().split('\n').length + 1;

/** An impl that writes `first`, and `again` once its prompt says the secret scan sent it back. */
function implAgent(first: string, again: string, extra = ''): string {
  const write = (content: string) => `printf %s ${b64(content)} | base64 -d > lib/strings.js`;
  return answeringDesignStages(`p=$(cat); case "$p" in "# Warden: impl"*) ${extra} case "$p" in *"secret scan found"*) ${write(again)} ;; *) ${write(first)} ;; esac; echo done ;; *) echo done ;; esac`);
}

/** The rows of `type`, their metadata without the place in the history the workflow stamps on every row it writes. */
async function rows(id: string, type: string): Promise<Array<{ reason: string; metadata: Record<string, unknown> }>> {
  const { rows: found } = await world().pool.query(`SELECT reason, metadata FROM safety_events WHERE intent_id = $1 AND event_type = $2 ORDER BY seq`, [id, type]);
  return (found as Array<{ reason: string; metadata: Record<string, unknown> }>).map(({ reason, metadata }) => {
    const content = Object.fromEntries(Object.entries(metadata).filter(([key]) => key !== 'runId' && key !== 'historyLength'));
    return { reason, metadata: content };
  });
}

async function atMergeGate(handle: WorkflowHandle): Promise<IntentState> {
  return waitFor(async () => {
    const state = await handle.query(stateQuery);
    // The package is attached once built, just after the gate opens.
    return state.pendingGate?.gate === 'merge' && state.pendingGate.package ? state : undefined;
  }, 180_000, 'the merge gate and its review package');
}

/** Every commit of every ref of the repository, with its patch. */
const everyRef = (repo: string): string => execFileSync('git', ['log', '-p', '--all'], { cwd: repo, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });

test('a key id and a private key written by the agent send impl back with file:line, are ledger rows and on the review package, and never reach main', async () => {
  const { handle, repo, id } = await startSampleIntent(world(), 'held', { agent: { kind: 'command', command: implAgent(withSecrets, right) } });
  const state = await atMergeGate(handle);
  expect(state.attempts.impl).toBe(2);

  const held = await rows(id, 'SECRET_IN_CHANGE');
  expect(held.map((r) => r.metadata)).toEqual([
    { path: 'lib/strings.js', line: keyIdLine, rule: 'aws/AWSAccessKeyID', by: 'the agent' },
    { path: 'lib/strings.js', line: keyIdLine + 2, rule: 'privatekey/PrivateKey', by: 'the agent' },
  ]);
  expect(held[0]!.reason).toContain(`impl attempt 1: the agent wrote a secret at lib/strings.js:${keyIdLine} (aws/AWSAccessKeyID)`);
  // The second attempt was told where, and by which rule.
  const prompt = readFileSync(path.join(state.worktreePath!, 'docs/lineage/active', id, '04-impl-attempt-2.prompt.md'), 'utf8');
  expect(prompt).toContain(`lib/strings.js:${keyIdLine} (aws/AWSAccessKeyID)`);
  expect(prompt).toContain(`lib/strings.js:${keyIdLine + 2} (privatekey/PrivateKey)`);
  // The merge gate's review package names them.
  expect(state.pendingGate?.package?.secrets?.held).toEqual([expect.stringContaining(`lib/strings.js:${keyIdLine} (aws/AWSAccessKeyID)`), expect.stringContaining(`lib/strings.js:${keyIdLine + 2} (privatekey/PrivateKey)`)]);

  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
  expect((await handle.result()).status).toBe('merged');
  expect(git(repo, 'show', 'main:lib/strings.js')).toBe(right.trimEnd());
  const history = everyRef(repo);
  expect(history).not.toContain(FAKE_AWS_KEY_ID);
  expect(history).not.toContain('PRIVATE KEY-----');
});

test('an agent that keeps writing the secret ends at the impl cap, and main never holds it', async () => {
  const { handle, repo, id, before } = await startSampleIntent(world(), 'again', {
    agent: { kind: 'command', command: implAgent(withSecrets, withSecrets) },
    limits: { attempts: { impl: 2 } },
  });
  const error = await handle.result().catch((e: unknown) => e);
  expect(error).toBeInstanceOf(WorkflowFailedError);
  expect(String((error as WorkflowFailedError).cause?.message)).toMatch(/MAX_ITERATIONS_EXCEEDED: stage impl/);
  expect((await rows(id, 'SECRET_IN_CHANGE')).length).toBe(4); // two findings in each of the two attempts
  expect(git(repo, 'rev-parse', 'main')).toBe(before);
  const history = everyRef(repo);
  expect(history).not.toContain(FAKE_AWS_KEY_ID);
  expect(history).not.toContain('PRIVATE KEY-----');
});

test('a private key under a path the person allowed is recorded as SECRET_ALLOWED and merges', async () => {
  const pem = `mkdir -p lib/fixtures; printf %s ${b64(FAKE_PRIVATE_KEY_BLOCK)} | base64 -d > lib/fixtures/deploy.pem;`;
  const { handle, repo, id } = await startSampleIntent(world(), 'allowed', {
    agent: { kind: 'command', command: implAgent(right, right, pem) },
    secrets: { allow: [{ paths: ['lib/fixtures/**'], reason: 'fixtures of the key parser' }] },
  });
  const state = await atMergeGate(handle);
  expect(state.attempts.impl).toBe(1);
  expect(await rows(id, 'SECRET_IN_CHANGE')).toEqual([]);
  const allowed = await rows(id, 'SECRET_ALLOWED');
  expect(allowed.map((r) => r.metadata)).toEqual([{ path: 'lib/fixtures/deploy.pem', line: 1, rule: 'privatekey/PrivateKey', reason: 'fixtures of the key parser', by: 'the agent' }]);
  expect(allowed[0]!.reason).not.toContain('MIIEpAIBAAKCAQEA');
  expect(state.pendingGate?.package?.secrets?.allowed).toEqual([expect.stringContaining('lib/fixtures/deploy.pem:1 (privatekey/PrivateKey)')]);
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
  expect((await handle.result()).status).toBe('merged');
  expect(git(repo, 'show', 'main:lib/fixtures/deploy.pem')).toContain('PRIVATE KEY-----');
});

test('a key the tests write sends impl back too, and never reaches main', async () => {
  const marker = '// generates no keys\n';
  const tests = `grep -q 'generates no keys' lib/strings.js || printf %s ${b64(`id=${FAKE_AWS_KEY_ID}\n`)} | base64 -d > lib/generated.txt; npm test --silent`;
  const { handle, repo, id } = await startSampleIntent(world(), 'tests', { agent: { kind: 'command', command: implAgent(right, right + marker) }, testCommand: tests });
  const state = await atMergeGate(handle);
  expect(state.attempts.impl).toBe(2);
  expect((await rows(id, 'SECRET_IN_CHANGE')).map((r) => r.metadata)).toEqual([{ path: 'lib/generated.txt', line: 1, rule: 'aws/AWSAccessKeyID', by: 'the tests' }]);
  const prompt = readFileSync(path.join(state.worktreePath!, 'docs/lineage/active', id, '04-impl-attempt-2.prompt.md'), 'utf8');
  expect(prompt).toContain('what the tests wrote');
  expect(prompt).toContain('lib/generated.txt:1 (aws/AWSAccessKeyID)');
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
  expect((await handle.result()).status).toBe('merged');
  expect(everyRef(repo)).not.toContain(FAKE_AWS_KEY_ID);
  expect(git(repo, 'ls-tree', '-r', '--name-only', 'main')).not.toContain('lib/generated.txt');
});
