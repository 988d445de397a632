import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { WorkflowFailedError } from '@temporalio/client';
import { artifactName } from '../../src/activities/lineage';
import { lineageRefFor } from '../../src/shared/ids';
import { stateQuery } from '../../src/shared/messages';
import { AGENT_STAGES } from '../../src/shared/stages';
import { STAGE_DOCUMENTS } from '../helpers/cli-scripts';
import { demoStages, startSampleIntent, useTestWorld, waitFor } from '../helpers/env';

/**
 * The lineage keeps the prompt an agent received, not the one Warden built before the agent added
 * to it: a command agent that answers in a file is told where, and that is part of its prompt.
 */

const world = useTestWorld('recorded-prompt');

test("every attempt's prompt in the lineage is byte for byte what the command agent received, where its answer goes included", async () => {
  // Outside the worktree (the agent runs unconfined to reach it): one copy of stdin per attempt.
  const received = mkdtempSync(path.join(tmpdir(), 'warden-received-'));
  const b64 = (text: string): string => Buffer.from(text).toString('base64');
  const answer = (text: string): string => `printf %s ${b64(text)} | base64 -d > WARDEN-ANSWER.md`;
  const good = String((demoStages().impl![1]!.edits as Array<{ content: string }>)[0]!.content);
  const command = [
    `copy=${received}/$(printf %s "$WARDEN_AGENT_SESSION" | tr / _)`,
    'cat > "$copy"',
    'case "$(head -n 1 "$copy")" in',
    `  "# Warden: triage"*) ${answer(STAGE_DOCUMENTS.triage)} ;;`,
    `  "# Warden: lld"*) ${answer(STAGE_DOCUMENTS.lld)} ;;`,
    `  "# Warden: spec"*) ${answer(STAGE_DOCUMENTS.spec)} ;;`,
    `  "# Warden: review"*) ${answer(STAGE_DOCUMENTS.review)} ;;`,
    `  "# Warden: impl"*) printf %s ${b64(good)} | base64 -d > lib/strings.js; echo done ;;`,
    'esac',
  ].join('\n');
  const { handle, repo, id } = await startSampleIntent(world(), 'prompt', {
    agent: { kind: 'command', command, answer: 'file', sandbox: 'none' },
    confinement: { allowUnconfinedCode: true },
  });
  const waiting = await waitFor(async () => (await handle.query(stateQuery)).pendingGate, 90_000, 'a gate');
  expect(waiting.gate).toBe('merge');
  // The lineage of an intent that did not merge goes to its lineage ref too.
  await handle.cancel();
  await expect(handle.result()).rejects.toBeInstanceOf(WorkflowFailedError);

  // One attempt of each stage (impl's passes), each prompt compared with what that attempt received.
  expect(readdirSync(received).sort()).toEqual(AGENT_STAGES.map((stage) => `${id}_${stage}_1`).sort());
  for (const stage of AGENT_STAGES) {
    const recorded = execFileSync('git', ['show', `${lineageRefFor(id)}:${artifactName(stage, 1, '.prompt.md')}`], { cwd: repo });
    const got = readFileSync(path.join(received, `${id}_${stage}_1`));
    expect({ stage, recorded: recorded.toString('utf8') }).toEqual({ stage, recorded: got.toString('utf8') });
    expect(recorded.equals(got)).toBe(true);
  }
  // The document stages were told where their answer goes; impl, whose answer is its change, was not.
  expect(readFileSync(path.join(received, `${id}_lld_1`), 'utf8')).toContain('## Where your answer goes\nWrite your whole answer');
  expect(readFileSync(path.join(received, `${id}_impl_1`), 'utf8')).not.toContain('## Where your answer goes');
});
