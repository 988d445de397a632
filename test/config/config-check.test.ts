import { resolveConfig } from '../../src/config/load';
import { PROFILE_DEFAULTS } from '../../src/config/profiles';
import { UserError } from '../../src/shared/errors';
import { LimitsSchema } from '../../src/shared/intent';

/** The message `resolveConfig` refuses `file` with. */
function refusal(file: unknown): string {
  try {
    resolveConfig(file, 'test.json');
  } catch (error) {
    expect(error).toBeInstanceOf(UserError);
    return (error as Error).message;
  }
  throw new Error('accepted');
}

describe('config check refuses values that are each well-formed but make no sense', () => {
  it('names every problem of a file in one message', () => {
    const message = refusal({
      limits: { totalTimeout: '0s', stageTimeout: '0s', gateTimeout: '0s', testTimeout: '0ms', maxCallUsd: '0' },
      worker: { errorRate: { warning: 0.5, critical: 0.2 }, circuitBreaker: { halfOpenAfter: '0s', window: '0s' } },
    });
    for (const field of ['limits.totalTimeout', 'limits.stageTimeout', 'limits.gateTimeout', 'limits.testTimeout', 'worker.circuitBreaker.halfOpenAfter', 'worker.circuitBreaker.window']) {
      expect(message).toContain(`${field}: must be longer than 0`);
    }
    expect(message).toMatch(/limits\.maxCallUsd: must be more than 0/);
    expect(message).toMatch(/worker\.errorRate\.warning: the warning rate \(0\.5\) must be below the critical rate \(0\.2\)/);
  });

  it('checks a warning rate against the profile critical rate it is merged with, and the window is at least 1 s', () => {
    expect(refusal({ worker: { errorRate: { warning: 0.25 } } })).toMatch(/warning rate \(0\.25\) must be below the critical rate \(0\.25\)/);
    expect(refusal({ worker: { circuitBreaker: { window: '500ms' } } })).toMatch(/window must be at least 1s/);
    expect(resolveConfig({ worker: { errorRate: { warning: 0.2 } } }).worker.errorRate).toMatchObject({ warning: 0.2, critical: 0.25 });
    // A cooldown of 0 stays allowed: it is the aggressive profile's.
    expect(resolveConfig({ limits: { cooldown: '0s' } }).limits.cooldown).toBe('0s');
  });

  it('reads "0" as unlimited for a stage budget, as for every other budget, and only when written', () => {
    const config = resolveConfig({ limits: { budgetUsd: '0', stageBudgetUsd: { impl: '0', lld: '1.50' } } });
    expect(config.limits.budgetUsd).toBe('0');
    expect(config.limits.stageBudgetUsd).toEqual({ lld: '1.50' });
    // Intents built from limits go through the same merge.
    expect(LimitsSchema.parse({ stageBudgetUsd: { review: '0.00', spec: '2' } }).stageBudgetUsd).toEqual({ spec: '2' });
    expect(resolveConfig({}).limits.budgetUsd).toBe('5');
  });

  it('accepts a partial rate-limit override and keeps the rest of the profile', () => {
    const config = resolveConfig({ worker: { rateLimits: { perAgent: { requestsPerMinute: 30 } } } });
    expect(config.worker.rateLimits.perAgent).toEqual({ requestsPerMinute: 30, tokensPerMinute: 400_000 });
    expect(config.worker.rateLimits.perModel).toEqual(PROFILE_DEFAULTS.default.worker.rateLimits.perModel);
    expect(refusal({ worker: { rateLimits: { perAgent: { requestsPerMinute: 30, rpm: 1 } } } })).toMatch(/perAgent: Unrecognized key: "rpm"/);
  });
});

describe('profiles follow the gate design (seed 004 §13), scaled to Warden per-intent defaults', () => {
  const p = PROFILE_DEFAULTS;
  it('every profile is valid as it stands', () => {
    for (const name of ['conservative', 'default', 'aggressive', 'production'] as const) {
      expect(resolveConfig({ profile: name })).toEqual(p[name]);
    }
  });

  it('conservative and aggressive: the seed run budgets and iteration caps at a tenth, day budgets as written', () => {
    expect(p.conservative.limits).toMatchObject({ budgetUsd: '2.50', attempts: { triage: 2, lld: 2, spec: 2, impl: 3 } });
    expect(p.conservative.worker.dayBudgetUsd).toBe('100');
    expect(p.conservative.automation).toEqual({ level: 1, allowLevelUp: false });
    expect(p.aggressive.limits).toMatchObject({ budgetUsd: '10', attempts: { impl: 10 } });
    expect(p.aggressive.worker.dayBudgetUsd).toBe('500');
    expect(p.aggressive.automation).toEqual({ level: 3, allowLevelUp: true });
  });

  it('production: L2 without level-up, a 30-minute deploy gate and a large-change gate above 500 lines waiting 4 h', () => {
    expect(p.production.automation).toEqual({ level: 2, allowLevelUp: false });
    expect(p.production.mode).toBe('production');
    expect(p.production.gates.production?.timeout).toBe('30m');
    expect(p.production.limits.blastRadius.maxLines).toBe(500);
    expect(p.production.gates['blast-radius']?.timeout).toBe('4h');
  });

  it('the gate design per-gate timeouts are every profile defaults', () => {
    expect(p.default.gates).toMatchObject({ architecture: { timeout: '24h' }, security: { timeout: '12h' }, production: { timeout: '1h' }, 'cost-overrun': { timeout: '2h' } });
  });
});
