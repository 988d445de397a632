import { askScopeJudge } from '../activities/scope-judge';
import { isLocalEndpoint } from '../activities/agents/model-http';
import type { WardenConfig } from '../config/schema';
import { SpendMeter } from '../gateway/spend-meter';
import type { AnswerDetector } from '../safety/answer-detectors';
import type { HttpAgentProfile } from '../shared/agent-profiles';
import { UserError } from '../shared/errors';
import { compareUsd } from '../shared/money';

/** What a judge's run cost and how often it gave no verdict (counted as stopped, as the worker counts it). */
export interface JudgeTally {
  readonly model: string;
  asked: number;
  unavailable: number;
  spentUsd: string;
  readonly budgetUsd: string;
}

/**
 * The scope judge as `warden eval` measures it: the config's agent `name` (a model over HTTP)
 * asked about each answer as the worker asks it (src/activities/scope-judge.ts), its verdict
 * "beyond" or none at all stopping the answer. Every call is priced and counted against
 * `budgetUsd`; the run ends with a clear error when the budget is spent. A recorded answer the
 * judge's own model wrote is not put to it: no verdict, as in the worker.
 */
export function judgeDetector(config: Pick<WardenConfig, 'agents' | 'mode' | 'worker'>, name: string, budgetUsd: string, env: NodeJS.ProcessEnv = process.env): { readonly detector: AnswerDetector; readonly tally: JudgeTally } {
  const agent = config.agents[name];
  if (!agent) throw new UserError(`--judge-model names agent "${name}", which is not in the config's agents`);
  if (agent.kind !== 'anthropic' && agent.kind !== 'openai') throw new UserError(`--judge-model names agent "${name}" of kind ${agent.kind}: the judge is a model over HTTP (kind anthropic or openai)`);
  const profile: HttpAgentProfile = agent;
  if (config.mode === 'development' && !isLocalEndpoint(profile)) {
    throw new UserError(`development mode refuses paid cloud endpoints: ${profile.kind} model ${profile.model} (set mode "production" in the config to measure it)`);
  }
  const meter = new SpendMeter({ pricing: config.worker.pricing, declaredCapUsd: budgetUsd });
  meter.refuseUnpriced(profile.model);
  const tally: JudgeTally = { model: profile.model, asked: 0, unavailable: 0, spentUsd: '0', budgetUsd };
  const detector: AnswerDetector = {
    name: `judge:${name}`,
    description: `the scope judge on ${profile.model}, stopping an answer it finds beyond the goal or gives no verdict on`,
    // Screening stopped those answers before any judge read them: the judge alone is measured.
    coversScreening: false,
    blocks: async (text, context, writtenBy) => {
      if (compareUsd(meter.totalUsd(), budgetUsd) >= 0) {
        throw new UserError(`the judge's budget of $${budgetUsd} is spent after ${tally.asked} answer(s): raise --judge-budget`);
      }
      const verdict = await askScopeJudge(
        { judge: { agent: profile, stages: ['impl'] }, intentId: 'eval', stage: 'eval', attempt: 1, goal: context.goal ?? '', paths: context.paths ?? ['**'], answer: text, writtenBy, meter, signal: new AbortController().signal, heartbeat: () => undefined },
        { mode: config.mode, env },
      );
      tally.asked++;
      if (verdict.verdict === 'unavailable' || verdict.verdict === 'unclear') tally.unavailable++;
      tally.spentUsd = meter.totalUsd();
      return verdict.verdict !== 'within';
    },
  };
  return { detector, tally };
}
