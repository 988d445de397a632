import type { ProfileName, WardenConfig } from './schema';

/**
 * The four profiles. `default` takes the seeds' defaults: $5 per intent (the pipeline design's
 * hard limit), impl 5 attempts, completeness/review 3, a 60 s self-dispatch cooldown, breakers
 * at 50% errors over 20 calls or 5 in a row with 3 probes 5 s apart, error-rate warning 10% and
 * critical 25%, $200 a day. The others move the knobs the gate design's examples move.
 */
const DEFAULT: WardenConfig = {
  profile: 'default',
  mode: 'development',
  limits: {
    attempts: { triage: 3, lld: 3, spec: 3, impl: 5, review: 3 },
    totalAttempts: 20,
    budgetUsd: '5',
    stageBudgetUsd: {},
    maxCallUsd: '0.50',
    budgetWarnAt: 0.8,
    cooldown: '60s',
    stageTimeout: '30m',
    totalTimeout: '4h',
    gateTimeout: '24h',
    testTimeout: '10m',
    blastRadius: { factor: 1.5, maxFiles: 50, maxLines: 2000 },
  },
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
    // Intents wait at gates for hours: a bounded cache and workflow heap keep a worker with a
    // thousand of them parked under 500 MB (bench:parked: 367 MB); a woken one replays in
    // milliseconds. A hundred running intents stay cached, so a stop reaches them at once.
    maxCachedWorkflows: 100,
    workflowHeapMb: 256,
    pricing: {
      scripted: { inputUsdPerMillion: '0', outputUsdPerMillion: '0' },
      'claude-sonnet-4-5': { inputUsdPerMillion: '3', outputUsdPerMillion: '15' },
      'claude-opus-4-1': { inputUsdPerMillion: '15', outputUsdPerMillion: '75' },
      'gpt-4.1': { inputUsdPerMillion: '2', outputUsdPerMillion: '8' },
      'gpt-4.1-mini': { inputUsdPerMillion: '0.40', outputUsdPerMillion: '1.60' },
    },
  },
  automation: { level: 0, allowLevelUp: true },
  gates: {},
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
    limits: { ...DEFAULT.limits, attempts: { ...DEFAULT.limits.attempts, impl: 3 }, totalAttempts: 12, budgetUsd: '2.50', cooldown: '120s', totalTimeout: '2h' },
    worker: { ...DEFAULT.worker, dayBudgetUsd: '100', agentDayBudgetUsd: '50' },
    automation: { level: 1, allowLevelUp: false },
  },
  aggressive: {
    ...DEFAULT,
    profile: 'aggressive',
    limits: { ...DEFAULT.limits, attempts: { ...DEFAULT.limits.attempts, impl: 10 }, totalAttempts: 40, budgetUsd: '25', cooldown: '0s', totalTimeout: '8h' },
    worker: { ...DEFAULT.worker, dayBudgetUsd: '500', agentDayBudgetUsd: '250' },
    automation: { level: 3, allowLevelUp: true },
  },
  production: {
    ...DEFAULT,
    profile: 'production',
    mode: 'production',
    limits: { ...DEFAULT.limits, gateTimeout: '4h' },
    automation: { level: 2, allowLevelUp: false },
  },
};
