import { DEFAULT_INTENT_LIMITS } from '../shared/limit-settings';
import type { ProfileName } from './names';
import type { WardenConfig } from './schema';

/**
 * The four profiles (docs/design.md says why each default is what it is). The default intent
 * limits live in src/shared/limit-settings.ts, so that workflow code can read them.
 * - default: $5 per intent, warning at 80%; impl 5 attempts, the document stages, review and the
 *   completeness gate 3; a 60 s cooldown between runs of the same stage's agent; circuit breakers
 *   at 50% errors over 20 calls or 5 in a row, with 3 probes 5 s apart; error-rate warning 10%,
 *   critical 25%; $200 a day, $100 per agent a day; per-gate timeouts: architecture 24 h,
 *   security 12 h, production 1 h, cost-overrun 2 h, the other gates `limits.gateTimeout` (24 h).
 * - conservative: half the money and fewer tries — $2.50 an intent, $100 a day, planning 2 and
 *   impl 3 attempts, a 120 s cooldown; L1 with no level-up, so a person decides every gate.
 * - aggressive: $10 an intent, $500 a day, impl 10 attempts, no cooldown, 8 h in all; starts at
 *   L3 and may climb.
 * - production: the default's limits, in production mode; L2 with no level-up; the production
 *   gate waits 30 min, changes over 500 lines stop at the blast-radius gate (4 h), and every gate
 *   without its own timeout waits 4 h.
 * Tests run once per impl attempt, so impl's cap also bounds the test runs.
 */
const DEFAULT: WardenConfig = {
  profile: 'default',
  mode: 'development',
  limits: DEFAULT_INTENT_LIMITS,
  worker: {
    circuitBreaker: { failureRate: 0.5, minimumCalls: 20, consecutiveFailures: 5, window: '5m', halfOpenAfter: '30s', probes: 3, probeInterval: '5s' },
    errorRate: { window: '5m', warning: 0.1, critical: 0.25, minimumCalls: 20 },
    rateLimits: {
      globalActivitiesPerSecond: 50,
      perAgent: { requestsPerMinute: 60, tokensPerMinute: 400_000 },
      perModel: { requestsPerMinute: 120, tokensPerMinute: 800_000 },
    },
    dayBudgetUsd: '200',
    agentDayBudgetUsd: '100',
    // Intents wait at gates for hours: a bounded cache and workflow heap bound the memory of a
    // worker with a thousand of them parked (`npm run bench:parked`: 366–548 MB after a minute at rest); a woken one
    // replays in milliseconds. A hundred running intents stay cached, so a stop reaches them at once.
    maxCachedWorkflows: 100,
    workflowHeapMb: 256,
    // The providers' list prices (uncached input) of the models the docs name, and a few
    // neighbours; cached input is counted at the input price, never below the bill. Any other
    // model needs a row in the config's worker.pricing, which also overrides these.
    pricing: {
      scripted: { inputUsdPerMillion: '0', outputUsdPerMillion: '0' },
      'claude-sonnet-4-5': { inputUsdPerMillion: '3', outputUsdPerMillion: '15' },
      'claude-opus-4-1': { inputUsdPerMillion: '15', outputUsdPerMillion: '75' },
      'gpt-5': { inputUsdPerMillion: '1.25', outputUsdPerMillion: '10' },
      'gpt-5-codex': { inputUsdPerMillion: '1.25', outputUsdPerMillion: '10' },
      'gpt-4.1': { inputUsdPerMillion: '2', outputUsdPerMillion: '8' },
      'gpt-4.1-mini': { inputUsdPerMillion: '0.40', outputUsdPerMillion: '1.60' },
    },
  },
  automation: { level: 0, allowLevelUp: true },
  gates: {
    architecture: { timeout: '24h' },
    security: { timeout: '12h' },
    production: { timeout: '1h' },
    'cost-overrun': { timeout: '2h' },
  },
  agents: {},
  routing: {},
  review: { requireDifferentFamily: false, forbiddenReviewers: [] },
  telemetry: {},
};

export const PROFILE_DEFAULTS: Readonly<Record<ProfileName, WardenConfig>> = {
  default: DEFAULT,
  conservative: {
    ...DEFAULT,
    profile: 'conservative',
    limits: {
      ...DEFAULT.limits,
      attempts: { ...DEFAULT.limits.attempts, triage: 2, lld: 2, spec: 2, impl: 3 },
      totalAttempts: 12,
      budgetUsd: '2.50',
      cooldown: '120s',
      totalTimeout: '2h',
    },
    worker: { ...DEFAULT.worker, dayBudgetUsd: '100', agentDayBudgetUsd: '50' },
    automation: { level: 1, allowLevelUp: false },
  },
  aggressive: {
    ...DEFAULT,
    profile: 'aggressive',
    limits: { ...DEFAULT.limits, attempts: { ...DEFAULT.limits.attempts, impl: 10 }, totalAttempts: 40, budgetUsd: '10', cooldown: '0s', totalTimeout: '8h' },
    worker: { ...DEFAULT.worker, dayBudgetUsd: '500', agentDayBudgetUsd: '250' },
    automation: { level: 3, allowLevelUp: true },
  },
  production: {
    ...DEFAULT,
    profile: 'production',
    mode: 'production',
    limits: { ...DEFAULT.limits, gateTimeout: '4h', blastRadius: { ...DEFAULT.limits.blastRadius, maxLines: 500 } },
    gates: { ...DEFAULT.gates, production: { timeout: '30m' }, 'blast-radius': { timeout: '4h' } },
    automation: { level: 2, allowLevelUp: false },
  },
};
