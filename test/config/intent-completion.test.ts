import { intentFromFlags } from '../../src/client/intent-input';
import { completeIntent, type IntentRules } from '../../src/config/intent-completion';
import { resolveConfig } from '../../src/config/load';
import { IntentSchema } from '../../src/shared/intent';
import { DEMO_SCRIPT, makeSampleRepo } from '../helpers/env';

/** The worker completes every start from its config: what is left out is filled, what is looser is refused. */

const key = `ed25519:${'ab'.repeat(32)}`;
/** A config with something of its own in every field the worker completes intents from. */
const config = resolveConfig({
  limits: { budgetUsd: '3', attempts: { impl: 4 }, stageBudgetUsd: { impl: '2' } },
  gates: { merge: { approvers: ['alice', 'bob'], escalateTo: 'lead' }, lld: { enabled: true, minRisk: 'MEDIUM' } },
  review: { requireDifferentFamily: true, forbiddenReviewers: ['gpt-4o-mini'] },
  secrets: { allow: [{ paths: ['fixtures/**'], reason: 'scanner fixtures' }] },
  approvers: { alice: { publicKey: key } },
  unsignedDecisions: { accept: 'always', gates: ['merge'] },
  notify: [{ kind: 'slack', urlEnv: 'TEAM_HOOK' }],
  customGates: [{ id: 'api-change', after: 'review', prompt: 'The API changed.', when: { paths: ['src/api/**'] } }],
  run: { testCommand: 'npm test' },
});
const rules: IntentRules = { config, embeddedServer: false };
const repo = makeSampleRepo();

test('a warden run intent passes the worker unchanged', () => {
  for (const flags of [{}, { budget: '1', implAttempts: '2' }, { allowUnconfinedCode: true, testNetwork: 'host' }]) {
    const started = IntentSchema.parse(intentFromFlags({ repo, goal: 'Add slugify', script: DEMO_SCRIPT, ...flags }, process.cwd(), { ...config, embeddedServer: false }));
    const completion = completeIntent(started, rules);
    expect(completion.problems).toEqual([]);
    expect(IntentSchema.parse(completion.input)).toEqual(started);
  }
});

test('what a raw start leaves out comes from the config', () => {
  const completion = completeIntent({ id: 'raw-1', goal: 'Add slugify', repoPath: repo, agent: { kind: 'scripted', scriptPath: DEMO_SCRIPT } }, rules);
  expect(completion.problems).toEqual([]);
  const intent = IntentSchema.parse(completion.input);
  expect(intent.limits).toEqual(config.limits);
  expect(intent.gates).toEqual(config.gates);
  // The config leaves review.design out: off, as the intent says it.
  expect(intent.reviewPolicy).toEqual({ ...config.review, design: false });
  expect(intent.secrets).toEqual(config.secrets);
  expect(intent.approvals).toEqual({ keys: { alice: key }, unsignedGates: ['merge'] });
  expect(intent.notify).toEqual(config.notify);
  expect(intent.customGates).toEqual(config.customGates);
  expect(intent.testCommand).toBe('npm test');
  // A start's own limits sit on the config's, not on the default profile's.
  expect(IntentSchema.parse(completeIntent({ ...intent, limits: { budgetUsd: '2' } }, rules).input).limits).toEqual({ ...config.limits, budgetUsd: '2' });
});

test('the agents come from the routing when the start names none', () => {
  const local = { kind: 'openai', model: 'llama-3.1-8b', baseUrl: 'http://127.0.0.1:8080/v1' };
  const routed = resolveConfig({ agents: { planner: local, coder: { ...local, model: 'qwen' } }, routing: { default: 'planner', impl: 'coder' } });
  const intent = IntentSchema.parse(completeIntent({ id: 'raw-2', goal: 'x', repoPath: repo }, { config: routed, embeddedServer: true }).input);
  expect(intent.agent).toMatchObject({ name: 'planner' });
  expect(intent.stageAgents).toEqual({ impl: expect.objectContaining({ name: 'coder', model: 'qwen' }) });
});

test('a start looser than the config is refused, naming each field; a stricter one is kept', () => {
  const base = { id: 'raw-3', goal: 'x', repoPath: repo, agent: { kind: 'scripted', scriptPath: DEMO_SCRIPT } };
  const problems = (extra: Record<string, unknown>): readonly string[] => completeIntent({ ...base, ...extra }, rules).problems;
  expect(problems({ limits: { budgetUsd: '50' } })).toEqual(['limits.budgetUsd "50" is above the config\'s "3"']);
  expect(problems({ limits: { budgetUsd: '0' } })).toEqual(['limits.budgetUsd "0" is above the config\'s "3"']);
  expect(problems({ limits: { attempts: { impl: 9 }, stageBudgetUsd: { impl: '0' } } })).toEqual([
    'limits.stageBudgetUsd.impl "0" is above the config\'s "2"',
    'limits.attempts.impl 9 is above the config\'s 4',
  ]);
  expect(problems({ gates: { merge: { approvers: ['mallory'] } } })).toEqual(["gates.merge.approvers [mallory] are not the config's [alice, bob]"]);
  expect(problems({ gates: { merge: { approvers: ['alice'] } } })).toEqual(["gates.merge.approvers [alice] are not the config's [alice, bob]"]);
  expect(problems({ gates: { security: { approvers: ['mallory'] } } })).toEqual(["gates.security.approvers [mallory] are not the config's (anyone but the agent)"]);
  expect(problems({ gates: { lld: { enabled: false }, merge: { escalateTo: 'nobody' } } })).toEqual([
    "gates.merge.escalateTo nobody is not the config's lead",
    'gates.lld.enabled false switches off a gate the config asks',
  ]);
  expect(problems({ gates: { lld: { minRisk: 'HIGH' } } })).toEqual(["gates.lld.minRisk HIGH asks less often than the config's MEDIUM"]);
  expect(problems({ approvals: { keys: { mallory: key } } })).toEqual([
    "approvals.keys.alice is not the config's key for alice",
    "approvals.keys.mallory is not the config's key for mallory (the config names no such approver)",
  ]);
  expect(problems({ approvals: { unsignedGates: ['merge', 'security'] } })).toEqual(['approvals.unsignedGates takes unsigned decisions at security, where the config takes none']);
  expect(problems({ reviewPolicy: { requireDifferentFamily: false, forbiddenReviewers: [] } })).toEqual([
    "reviewPolicy.requireDifferentFamily false drops the config's cross-model review",
    "reviewPolicy.forbiddenReviewers leaves out the config's gpt-4o-mini",
  ]);
  expect(problems({ secrets: { allow: [{ paths: ['**'], reason: 'everything' }] } })).toEqual(['secrets.allow holds what the config does not: {"paths":["**"],"reason":"everything"}']);
  expect(problems({ customGates: [], notify: [] })).toEqual([
    'customGates leaves out the config\'s {"after":"review","id":"api-change","prompt":"The API changed.","when":{"paths":["src/api/**"]}}',
    'notify leaves out the config\'s {"kind":"slack","urlEnv":"TEAM_HOOK"}',
  ]);
  // Stricter than the config: kept as the start asked.
  const strict = completeIntent({ ...base, limits: { budgetUsd: '1' }, secrets: { allow: [] }, gates: { spec: { enabled: true } }, approvals: { unsignedGates: [] }, notify: [{ kind: 'slack', urlEnv: 'TEAM_HOOK' }, { kind: 'webhook', urlEnv: 'MINE' }] }, rules);
  expect(strict.problems).toEqual([]);
  expect(IntentSchema.parse(strict.input)).toMatchObject({ limits: { budgetUsd: '1' }, secrets: { allow: [] }, gates: { spec: { enabled: true } }, approvals: { unsignedGates: [] }, notify: [{ kind: 'slack', urlEnv: 'TEAM_HOOK' }, { kind: 'webhook', urlEnv: 'MINE' }] });
});

test("a config's design review is kept: left out it is on, switched off it is refused", () => {
  const designed: IntentRules = { config: resolveConfig({ review: { design: true } }), embeddedServer: false };
  const base = { id: 'raw-4', goal: 'x', repoPath: repo, agent: { kind: 'scripted', scriptPath: DEMO_SCRIPT } };
  expect(IntentSchema.parse(completeIntent(base, designed).input).reviewPolicy.design).toBe(true);
  // A policy that names other rules only keeps the config's design review.
  const other = completeIntent({ ...base, reviewPolicy: { forbiddenReviewers: ['gpt-4o-mini'] } }, designed);
  expect(other.problems).toEqual([]);
  expect(IntentSchema.parse(other.input).reviewPolicy.design).toBe(true);
  expect(completeIntent({ ...base, reviewPolicy: { design: false } }, designed).problems).toEqual(["reviewPolicy.design false drops the config's review of the lld and spec"]);
});

test('warden run refuses a --budget or --impl-attempts above the config before anything starts', () => {
  const flags = { repo, goal: 'Add slugify', script: DEMO_SCRIPT };
  expect(() => intentFromFlags({ ...flags, budget: '50' }, process.cwd(), config)).toThrow("--budget 50 is above the config's limits.budgetUsd 3: a start may lower the budget, never raise it (raise limits.budgetUsd in the config)");
  expect(() => intentFromFlags({ ...flags, budget: '0' }, process.cwd(), config)).toThrow(/--budget 0 is above the config's limits\.budgetUsd 3/);
  expect(() => intentFromFlags({ ...flags, implAttempts: '5' }, process.cwd(), config)).toThrow("--impl-attempts 5 is above the config's limits.attempts.impl 4: a start may lower it, never raise it");
});

test('merging through pull requests: a raw start gets the config\'s forge; one that would merge locally or name another forge is refused; one that asks for a pull request where the config merges locally is kept', () => {
  const forge = { kind: 'gitea' as const, reviewers: { 'alice-gitea': 'alice' } };
  const viaForge: IntentRules = { config: resolveConfig({ merge: { via: 'pull-request', method: 'squash', forge } }), embeddedServer: false };
  const base = { id: 'raw-pr', goal: 'x', repoPath: repo, agent: { kind: 'scripted', scriptPath: DEMO_SCRIPT } };
  const filled = completeIntent(base, viaForge);
  expect(filled.problems).toEqual([]);
  expect(IntentSchema.parse(filled.input).merge).toMatchObject({ via: 'pull-request', method: 'squash', forge: { kind: 'gitea', reviewers: { 'alice-gitea': 'alice' }, tokenEnv: 'WARDEN_FORGE_TOKEN' } });
  expect(completeIntent({ ...base, merge: { via: 'local' } }, viaForge).problems).toEqual(['merge.via local, where the config merges through pull requests on gitea']);
  expect(completeIntent({ ...base, merge: { via: 'pull-request', forge: { kind: 'gitea', reviewers: { mallory: 'alice' } } } }, viaForge).problems).toEqual([
    "merge.forge other than the config's (its forge, remote, token and reviewers are the config's)",
  ]);
  // The method is the start's to choose; the forge stays the config's.
  const rebase = completeIntent({ ...base, merge: { via: 'pull-request', method: 'rebase', forge } }, viaForge);
  expect(rebase.problems).toEqual([]);
  expect(IntentSchema.parse(rebase.input).merge).toMatchObject({ via: 'pull-request', method: 'rebase' });
  // Asking for a pull request where the config merges locally is stricter: kept.
  const local = completeIntent({ ...base, merge: { via: 'pull-request', method: 'merge', forge } }, rules);
  expect(local.problems).toEqual([]);
  expect(IntentSchema.parse(local.input).merge.via).toBe('pull-request');
});

test("a start may not drop the config's scope judge nor judge fewer stages; a start with none gets it", () => {
  const judged = resolveConfig({ agents: { judge: { kind: 'openai', model: 'gpt-4.1-mini' } }, judge: { agent: 'judge', stages: ['impl'] } });
  const judgedRules: IntentRules = { config: judged, embeddedServer: true };
  const base = { id: 'raw-j', goal: 'x', repoPath: repo, agent: { kind: 'scripted', scriptPath: DEMO_SCRIPT } };
  const filled = IntentSchema.parse(completeIntent(base, judgedRules).input);
  expect(filled.judge).toEqual({ agent: expect.objectContaining({ name: 'judge', model: 'gpt-4.1-mini' }), stages: ['impl'] });
  expect(completeIntent({ ...base, judge: { ...filled.judge, stages: ['lld'] } }, judgedRules).problems).toEqual(["judge.stages leaves out the config's impl"]);
  expect(completeIntent({ ...base, judge: { agent: { kind: 'openai', model: 'gpt-4.1' }, stages: ['impl'] } }, judgedRules).problems).toEqual(["judge.agent other than the config's"]);
  expect(completeIntent({ ...base, judge: { ...filled.judge, stages: ['impl', 'spec'] } }, judgedRules).problems).toEqual([]);
});

test("a replay notifies no one and merges only into its scratch clone, whatever the config says; a real intent may not take a replay's id", () => {
  const forge = resolveConfig({ merge: { via: 'pull-request', forge: { kind: 'github', remote: 'origin', tokenEnv: 'WARDEN_GH_TOKEN' } }, notify: [{ kind: 'slack', urlEnv: 'TEAM_HOOK' }] });
  const start = { goal: 'Add slugify', repoPath: repo, agent: { kind: 'scripted', scriptPath: DEMO_SCRIPT } };
  const replay = completeIntent({ ...start, id: 'replay-1-raw-1', replayOf: { intentId: 'raw-1', repoPath: repo } }, { config: forge, embeddedServer: false });
  expect(replay.problems).toEqual([]);
  expect(IntentSchema.parse(replay.input)).toMatchObject({ notify: [], merge: { via: 'local' }, replayOf: { intentId: 'raw-1' } });
  expect(completeIntent({ ...start, id: 'replay-2-raw-1' }, rules).problems).toEqual(['an id starting with "replay-" (kept for `warden replay`)']);
  expect(completeIntent({ ...start, id: 'raw-2', replayOf: { intentId: 'raw-1', repoPath: repo } }, rules).problems).toEqual(['replayOf on an intent whose id does not start with "replay-"']);
});
