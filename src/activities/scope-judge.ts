import { CancelledFailure } from '@temporalio/common';
import type { RecordEvent } from '../gateway/attempt-scope';
import type { ReplaySource } from '../gateway/lease';
import { FailureType } from '../shared/errors';
import type { SpendMeter } from '../gateway/spend-meter';
import { upstreamOf } from '../gateway/upstream';
import { judgePrompt, readVerdict, type ScopeVerdict } from '../safety/scope-judge';
import { agentIdOf } from '../shared/agent-routing';
import { JUDGE_STAGE_SUFFIX, type IntentJudge } from '../shared/scope-judge';
import { modelRoute, type HttpAgentDeps } from './agents/http-agent';
import { callModel, isLocalEndpoint } from './agents/model-http';

export interface JudgeRequest {
  readonly judge: IntentJudge;
  readonly intentId: string;
  readonly stage: string;
  readonly attempt: number;
  readonly goal: string;
  readonly paths: readonly string[];
  /** The stage's answer, redacted. */
  readonly answer: string;
  /** The model that wrote it (never the judge). */
  readonly writtenBy: string | undefined;
  /** The attempt's meter: the judge's call is paid for, and budgeted, as part of the stage. */
  readonly meter: SpendMeter;
  readonly event?: RecordEvent;
  readonly signal: AbortSignal;
  readonly heartbeat: () => void;
  /** Set in a replay: the judge's answer comes from the original's recording, as the agent's do. */
  readonly replayOf?: ReplaySource;
}

/**
 * Asks the intent's scope judge whether a stage's answer goes beyond the goal: one call through
 * the worker's gateway (so it is limited, metered against the attempt's budgets and recorded
 * like every model call), with the stage's model forbidden to answer. It never fails the stage:
 * a judge that cannot be asked or does not answer gives the verdict `unavailable`, which sends
 * the stage to a person like a "beyond" does. A budget or kill switch that halts the call halts
 * the attempt, as it would an agent's call.
 */
export async function askScopeJudge(request: JudgeRequest, deps: Pick<HttpAgentDeps, 'mode' | 'env' | 'fetch' | 'maxRetryAfterMs' | 'gateway'>): Promise<ScopeVerdict> {
  const profile = request.judge.agent;
  const unavailable = (reason: string): ScopeVerdict => ({ verdict: 'unavailable', reason, model: profile.model });
  if (request.writtenBy === profile.model) return unavailable(`${profile.model} wrote the answer, and a model never judges its own answer`);
  if (deps.mode === 'development' && !isLocalEndpoint(profile)) {
    return unavailable(`development mode refuses paid cloud endpoints (${profile.kind} model ${profile.model})`);
  }
  // Its calls are named apart from the stage's own (`impl-judge`): a recording keys each
  // exchange by stage, attempt and order, and a replay must tell the judge's from the agent's.
  const lease = deps.gateway?.issue({
    intentId: request.intentId,
    stage: `${request.stage}${JUDGE_STAGE_SUFFIX}`,
    attempt: request.attempt,
    agentId: agentIdOf(profile),
    upstream: upstreamOf(profile),
    meter: request.meter,
    event: request.event,
    forbiddenModels: request.writtenBy ? [request.writtenBy] : [],
    replayOf: request.replayOf,
  });
  if (request.replayOf && !lease) return unavailable('a replay asks no model outside the gateway');
  try {
    const { target, call } = modelRoute(profile, lease, deps, request);
    const answer = await callModel(target, judgePrompt(request), call);
    return { ...readVerdict(answer.text), model: profile.model };
  } catch (error) {
    // A replay whose original had no judge's answer here (a judge added since): no verdict, which
    // the replay reports as the gate it would open.
    if (lease?.halt?.failure.type === FailureType.ReplayDiverged) return unavailable(lease.halt.message);
    if (lease?.halt) throw lease.halt.failure;
    if (error instanceof CancelledFailure || request.signal.aborted) throw error;
    return unavailable(error instanceof Error ? error.message.slice(0, 300) : String(error));
  } finally {
    await lease?.end();
  }
}
