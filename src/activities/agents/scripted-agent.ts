import { readFileSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { FailureType } from '../../shared/errors';
import { describeIssues } from '../../shared/intent';
import { AgentScriptSchema, type AgentScript, type ScriptAttempt } from '../../shared/script';
import type { Agent, AgentRequest, AgentResult } from './agent';
import { usdFromNumber } from '../../gateway/spend-meter';
import { addChildTime } from '../process-tally';

/** Reads and validates a script file; a bad file is a non-retryable `INVALID_SCRIPT` failure. */
export function loadAgentScript(scriptPath: string): AgentScript {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(scriptPath, 'utf8'));
  } catch (error) {
    throw ApplicationFailure.create({
      type: FailureType.InvalidScript,
      message: `cannot read agent script ${scriptPath}: ${(error as Error).message}`,
      nonRetryable: true,
    });
  }
  const parsed = AgentScriptSchema.safeParse(raw);
  if (!parsed.success) {
    throw ApplicationFailure.create({
      type: FailureType.InvalidScript,
      message: `agent script ${scriptPath} is invalid: ${describeIssues(parsed.error)}`,
      nonRetryable: true,
    });
  }
  return parsed.data;
}

/** Resolves `relative` inside `root`, refusing anything that would land outside it. */
export function resolveInside(root: string, relative: string): string {
  const target = path.resolve(root, relative);
  const rel = path.relative(root, target);
  if (rel === '' || rel.startsWith('..') || path.isAbsolute(rel) || rel.split(path.sep)[0] === '.git') {
    throw ApplicationFailure.create({
      type: FailureType.PathOutsideWorktree,
      message: `refusing to write ${relative}: it is outside the worktree or inside .git`,
      nonRetryable: true,
    });
  }
  return target;
}

/**
 * Replays a script (see docs/agents.md, "The scripted agent"): attempt N of a stage (or of a design
 * review, from `designReview`) plays entry N-1, or the
 * last entry once the list is used up. Deterministic, so a retried activity does the same thing.
 *
 * Each attempt is one paid call of the meter. A script stands in for an agent whose cost is known
 * only afterwards: the declared per-call cap is reserved, then the attempt is counted at its
 * `costUsd`, or at its usage priced by the script's model.
 */
export function createScriptedAgent(scriptPath: string): Agent {
  return {
    async run(request: AgentRequest): Promise<AgentResult> {
      const script = loadAgentScript(scriptPath);
      await request.recordPrompt?.(request.prompt);
      const attempts = request.designReview ? script.designReview?.[request.stage as 'lld' | 'spec'] : script.stages[request.stage];
      const step: ScriptAttempt = attempts
        ? attempts[Math.min(request.attempt, attempts.length) - 1]!
        : { output: 'ok', edits: [], usage: { inputTokens: 0, outputTokens: 0 }, costUsd: 0, delayMs: 0 };
      const pricedByModel = step.costUsd === undefined && (step.usage.inputTokens > 0 || step.usage.outputTokens > 0);
      await request.meter.call(script.model, { kind: 'declared', pricedByModel }, async () => {
        await waitWhileHeartbeating(step.delayMs, request);
        const report = { kind: 'paid', usage: step.usage, ...(step.costUsd !== undefined && { costUsd: usdFromNumber(step.costUsd) }) } as const;
        // A failing step still "billed" what it declares, as a real agent would have.
        return { value: undefined, report };
      });
      if (step.fail !== undefined) {
        throw ApplicationFailure.create({ type: FailureType.AgentFailed, message: step.fail, nonRetryable: true });
      }
      for (const edit of step.edits) {
        const target = resolveInside(request.worktreePath, edit.path);
        if ('delete' in edit) {
          await rm(target, { force: true });
        } else {
          await mkdir(path.dirname(target), { recursive: true });
          await writeFile(target, edit.content);
        }
      }
      return { output: step.output, usage: step.usage, model: script.model };
    },
  };
}

/** The script's delay stands for the agent's own work: the process tally counts it as the agent's time. */
async function waitWhileHeartbeating(ms: number, request: AgentRequest): Promise<void> {
  if (ms <= 0) return;
  const started = performance.now();
  try {
    await waitFor(ms, request);
  } finally {
    addChildTime('agent', performance.now() - started);
  }
}

async function waitFor(ms: number, request: AgentRequest): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const beat = setInterval(request.heartbeat, 1000);
    const done = setTimeout(() => {
      stopWaiting();
      resolve();
    }, ms);
    // Cancellation must reject, not end the wait as if the work were done: the stage would then
    // complete with the agent's edits after the workflow asked it to stop.
    const onAbort = (): void => {
      stopWaiting();
      reject(new CancelledFailure('agent cancelled'));
    };
    function stopWaiting(): void {
      clearInterval(beat);
      clearTimeout(done);
      request.signal.removeEventListener('abort', onAbort);
    }
    if (request.signal.aborted) return onAbort();
    request.signal.addEventListener('abort', onAbort);
  });
}
