import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { readReviewAssessment, readTriageAssessment } from '../../shared/assessment-parsing';
import { FailureType } from '../../shared/errors';
import type { HttpAgentProfile } from '../../shared/intent';
import { pathAllowed } from '../../shared/glob';
import { git } from '../git';
import { artifactName, writeLineageFile } from '../lineage';
import { notReplayable, type Agent, type AgentRequest, type AgentResult } from './agent';
import { applyEdits, parseEdits } from './edit-blocks';
import { callModel, isLocalEndpoint, type ModelCallOptions } from './model-http';
import type { ModelGateway } from '../../gateway/gateway';
import type { Lease } from '../../gateway/lease';
import type { SpendMeter } from '../../gateway/spend-meter';
import { upstreamOf } from '../../gateway/upstream';
import { agentIdOf } from '../../shared/agent-routing';

export interface HttpAgentDeps {
  /** `development` refuses paid cloud endpoints; local ones are allowed. */
  readonly mode: 'development' | 'production';
  readonly env: NodeJS.ProcessEnv;
  readonly fetch?: typeof fetch;
  readonly maxRetryAfterMs?: number;
  /**
   * The worker's model gateway: every call then goes through it, metered, limited and screened
   * there with the attempt's own key. Without one (a unit test) calls go straight to the
   * endpoint and are metered here.
   */
  readonly gateway?: ModelGateway;
}

/** The variable the gateway key is handed to the model client in. */
const GATEWAY_KEY_VARIABLE = 'WARDEN_GATEWAY_KEY';

/** What impl with an HTTP model is told about answering with edits. */
const EDIT_FORMAT = [
  '## How to answer',
  'You cannot run commands. Answer with edit blocks that Warden applies; only the declared paths may change.',
  'A whole file (new or replaced):',
  '```file:path/to/file.js',
  '…the complete new content…',
  '```',
  'A change inside a file (the SEARCH text must appear exactly once):',
  'path/to/file.js',
  '<<<<<<< SEARCH',
  '…existing lines…',
  '=======',
  '…new lines…',
  '>>>>>>> REPLACE',
].join('\n');

/** How much of the declared files impl is shown (finished files carried forward). */
const MAX_CONTEXT_FILES = 20;
const MAX_CONTEXT_BYTES = 120_000;

/**
 * An agent backed by an HTTP model (Anthropic or OpenAI-compatible). Text stages answer in
 * text; triage and review must end with their JSON block, and an answer that does not validate
 * gets one repair attempt with the validation error, then the stage fails (the raw answer kept
 * as an artifact). Impl answers with edit blocks that are checked, then applied here.
 */
export function createHttpAgent(profile: HttpAgentProfile, deps: HttpAgentDeps): Agent {
  return {
    async run(request: AgentRequest): Promise<AgentResult> {
      if (deps.mode === 'development' && !isLocalEndpoint(profile)) {
        throw ApplicationFailure.create({
          type: FailureType.ModeViolation,
          message: `development mode refuses paid cloud endpoints: ${profile.kind} model ${profile.model} at ${profile.baseUrl ?? 'its default endpoint'} (use a local endpoint, a command agent, or mode "production")`,
          nonRetryable: true,
        });
      }
      const lease = deps.gateway?.issue({
        intentId: request.intentId,
        stage: request.stage,
        attempt: request.attempt,
        agentId: agentIdOf(profile),
        upstream: upstreamOf(profile),
        meter: request.meter,
        event: request.event,
        forbiddenModels: request.forbiddenModels,
        screening: { goal: request.goal, paths: request.declaredPaths },
        replayOf: request.replayOf,
      });
      if (request.replayOf && !lease) throw notReplayable(request.stage, `${profile.kind} ${profile.model}`);
      try {
        return await answerWith(lease, request);
      } catch (error) {
        // The gateway halted the attempt (a budget, a forbidden model, a CRITICAL answer): that is why it failed.
        if (lease?.halt) throw lease.halt.failure;
        throw error;
      } finally {
        await lease?.end();
      }
    },
  };

  async function answerWith(lease: Lease | undefined, request: AgentRequest): Promise<AgentResult> {
    // Through the gateway: its address and the attempt's key; it reserves each request's maximum
    // and counts what it cost. Directly: the meter here does (an unpriced model refused before any call).
    const { target, call } = modelRoute(profile, lease, deps, request);
    const prompt = request.stage === 'impl' ? `${request.prompt}\n${await implContext(request)}\n${EDIT_FORMAT}\n` : request.prompt;
    await request.recordPrompt?.(prompt);
    const first = await callModel(target, prompt, call);
    let answer = first;
    let usage = first.usage;

    if (request.stage === 'triage' || request.stage === 'review') {
      const problems = structureProblems(request.stage, first.text);
      if (problems) {
        const repair = `${prompt}\n\n## Your previous answer\n${first.text.slice(0, 20_000)}\n\n## Why it was refused\n${problems}\n\nAnswer again, ending with the JSON object in the shape asked for.\n`;
        answer = await callModel(target, repair, call);
        usage = { inputTokens: usage.inputTokens + answer.usage.inputTokens, outputTokens: usage.outputTokens + answer.usage.outputTokens };
        const still = structureProblems(request.stage, answer.text);
        if (still) {
          const kept = await writeLineageFile(request.worktreePath, request.intentId, artifactName(request.stage, request.attempt, '.invalid.md'), answer.text);
          throw ApplicationFailure.create({
            type: FailureType.InvalidStructuredOutput,
            message: `the ${request.stage} answer did not validate after one repair attempt (${still}); the raw answer is in ${kept}`,
            nonRetryable: true,
          });
        }
      }
    }

    if (request.stage === 'impl') {
      const written = await applyEdits(request.worktreePath, request.declaredPaths ?? ['**'], parseEdits(answer.text));
      return { output: `${answer.text}\n\n(applied to: ${written.join(', ')})\n`, usage, model: profile.model };
    }
    // The answering model was checked against the profile's; price and record it by the profile's name.
    return { output: answer.text, usage, model: profile.model };
  }
}

/**
 * Where a model call goes and how: through the gateway (its address and the lease's key; it
 * reserves and counts each request), or, with no lease, straight to the endpoint with the meter here.
 */
export function modelRoute(
  profile: HttpAgentProfile,
  lease: Lease | undefined,
  deps: Pick<HttpAgentDeps, 'env' | 'fetch' | 'maxRetryAfterMs' | 'gateway'>,
  request: { readonly signal: AbortSignal; readonly heartbeat: () => void; readonly meter: SpendMeter },
): { readonly target: HttpAgentProfile; readonly call: ModelCallOptions } {
  if (lease && deps.gateway) {
    return {
      target: { ...profile, baseUrl: profile.kind === 'openai' ? `${deps.gateway.url}/v1` : deps.gateway.url, apiKeyEnv: [GATEWAY_KEY_VARIABLE] },
      call: { env: { [GATEWAY_KEY_VARIABLE]: lease.key }, signal: request.signal, heartbeat: request.heartbeat, maxRetryAfterMs: deps.maxRetryAfterMs },
    };
  }
  return { target: profile, call: { env: deps.env, signal: request.signal, heartbeat: request.heartbeat, fetch: deps.fetch, maxRetryAfterMs: deps.maxRetryAfterMs, meter: request.meter } };
}

/** Why a triage or review answer is not structured, or undefined when it is. */
function structureProblems(stage: 'triage' | 'review', text: string): string | undefined {
  const read = stage === 'triage' ? readTriageAssessment(text) : readReviewAssessment(text);
  if (read.structured) return undefined;
  return read.problems ?? 'no JSON object found at the end of the answer';
}

/** The declared files as they are now, so impl edits what is there (bounded). */
async function implContext(request: AgentRequest): Promise<string> {
  const listed = (await git(request.worktreePath, ['ls-files'])).split('\n').filter(Boolean);
  const files = listed.filter((f) => pathAllowed(request.declaredPaths ?? ['**'], f) && !f.startsWith('docs/lineage/')).slice(0, MAX_CONTEXT_FILES);
  const parts = ['## Current files'];
  let budget = MAX_CONTEXT_BYTES;
  for (const file of files) {
    const content = await readFile(path.join(request.worktreePath, file), 'utf8').catch(() => undefined);
    if (content === undefined || content.length > budget) continue;
    budget -= content.length;
    parts.push(`### ${file}\n\`\`\`\n${content}\`\`\``);
  }
  return parts.join('\n\n');
}
