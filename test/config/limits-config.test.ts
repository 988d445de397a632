import { PROFILE_DEFAULTS } from '../../src/config/profiles';
import { resolveConfig } from '../../src/config/load';
import { DEFAULT_TIME_LIMITS_MS } from '../../src/safety/limits';
import { parseDuration } from '../../src/shared/duration';
import { IntentSchema } from '../../src/shared/intent';

/** The limits the workflow enforces itself: time per stage and in total, the completeness gate's cap, the blast radius. */

test("the default profile carries seed 004's time breaker and seed 000's files-per-commit cap", () => {
  const { limits } = PROFILE_DEFAULTS.default;
  const stageMs = Object.fromEntries(Object.entries(limits.stageTimeLimits).map(([stage, text]) => [stage, parseDuration(text)]));
  expect({ ...stageMs, total: parseDuration(limits.totalTimeout) }).toEqual(DEFAULT_TIME_LIMITS_MS);
  expect(DEFAULT_TIME_LIMITS_MS).toMatchObject({ impl: 60 * 60_000, review: 30 * 60_000, total: 120 * 60_000 });
  expect(limits.attempts.completeness).toBe(3);
  expect(limits.blastRadius).toEqual({ factor: 1.5, maxFiles: 10, maxLines: 2000 });
});

test('a config file sets the completeness cap and any stage time limit, keeping the others', () => {
  const config = resolveConfig({ limits: { attempts: { completeness: 2 }, stageTimeLimits: { impl: '90m' } } });
  expect(config.limits.attempts).toMatchObject({ completeness: 2, impl: 5 });
  expect(config.limits.stageTimeLimits).toEqual({ triage: '30m', lld: '30m', spec: '30m', impl: '90m', review: '30m' });
});

test('bad values and unknown stages are named', () => {
  expect(() => resolveConfig({ limits: { attempts: { completeness: 0 } } })).toThrow(/limits\.attempts\.completeness/);
  expect(() => resolveConfig({ limits: { stageTimeLimits: { impl: 'an hour' } } })).toThrow(/limits\.stageTimeLimits\.impl: a duration/);
  expect(() => resolveConfig({ limits: { stageTimeLimits: { merge: '1m' } } })).toThrow(/limits\.stageTimeLimits: Unrecognized key: "merge"/);
});

test('an intent carries them, defaults filled in', () => {
  const intent = IntentSchema.parse({ id: 'x', goal: 'g', repoPath: '/r', agent: { kind: 'scripted', scriptPath: '/s.json' }, limits: { stageTimeLimits: { lld: '5m' }, attempts: { completeness: 4 } } });
  expect(intent.limits.stageTimeLimits).toMatchObject({ lld: '5m', impl: '60m' });
  expect(intent.limits.attempts.completeness).toBe(4);
});
