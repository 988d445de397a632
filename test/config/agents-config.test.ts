import { approvalsFrom, intentFromFlags } from '../../src/client/intent-input';
import { IntentSchema } from '../../src/shared/intent';
import { HEAP_MB_PER_CACHED_WORKFLOW, resolveConfig } from '../../src/config/load';
import { DEMO_SCRIPT, makeSampleRepo } from '../helpers/env';

/** Agent profiles in the config: named, routed per stage, keys only by environment variable name. */

const local = { kind: 'openai', model: 'llama-3.1-8b', baseUrl: 'http://127.0.0.1:8080/v1' };
const cloud = { kind: 'anthropic', model: 'claude-sonnet-4-5', apiKeyEnv: ['ANTHROPIC_API_KEY'] };
/** The local model's price (it has none in the default table), so that intents may route to it. */
const worker = { pricing: { 'llama-3.1-8b': { inputUsdPerMillion: '0', outputUsdPerMillion: '0' } } };

test('profiles take their names from their keys; routing names them per stage', () => {
  const config = resolveConfig({ agents: { planner: cloud, local }, routing: { default: 'planner', impl: 'local' }, review: { requireDifferentFamily: true } });
  expect(config.agents.planner).toMatchObject({ kind: 'anthropic', name: 'planner', maxTokens: 8192, timeout: '5m' });
  expect(config.routing).toEqual({ default: 'planner', impl: 'local' });
  expect(config.review).toEqual({ requireDifferentFamily: true, forbiddenReviewers: [] });
});

test('a key written into a profile is refused, as is routing to a profile that does not exist', () => {
  expect(() => resolveConfig({ agents: { planner: { ...cloud, apiKey: 'sk-live-123' } } })).toThrow(/agents\.planner: Unrecognized key: "apiKey"/);
  expect(() => resolveConfig({ agents: { local }, routing: { default: 'planner' } })).toThrow(/routing\.default: names agent "planner", which is not in agents/);
});

test('review.design: a design reviewer routed to the model that writes the LLD or spec is refused at load; another one passes', () => {
  expect(() => resolveConfig({ agents: { planner: cloud, local }, routing: { default: 'planner', impl: 'local' }, review: { design: true } })).toThrow(
    /review\.design: the design review of lld would run on claude-sonnet-4-5, the model that writes it \(route review to another model\), or turn review\.design off/,
  );
  expect(() => resolveConfig({ agents: { planner: cloud, local }, routing: { default: 'local', lld: 'planner', review: 'local' }, review: { design: true } })).toThrow(/the design review of spec would run on llama-3\.1-8b/);
  const config = resolveConfig({ agents: { planner: cloud, local }, routing: { default: 'planner', review: 'local' }, review: { design: true }, worker });
  expect(config.review).toEqual({ requireDifferentFamily: false, forbiddenReviewers: [], design: true });
});

describe('warden run picks the agents', () => {
  const repo = makeSampleRepo();
  const flags = { repo, goal: 'Add slugify' };

  test('review.design left unset: the design is reviewed where routing sends review to a model that writes neither document, and not where it cannot be', () => {
    const other = resolveConfig({ mode: 'production', agents: { planner: cloud, local }, routing: { default: 'planner', review: 'local' }, worker });
    expect(IntentSchema.parse(intentFromFlags(flags, process.cwd(), other)).reviewPolicy).toEqual({ requireDifferentFamily: false, forbiddenReviewers: [], design: true });
    const same = resolveConfig({ mode: 'production', agents: { planner: cloud, local }, routing: { default: 'planner', impl: 'local' }, worker });
    expect(IntentSchema.parse(intentFromFlags(flags, process.cwd(), same)).reviewPolicy.design).toBe(false);
    const forbidden = resolveConfig({ mode: 'production', agents: { planner: cloud, local }, routing: { default: 'planner', review: 'local' }, review: { forbiddenReviewers: ['llama-3.1-8b'] }, worker });
    expect(IntentSchema.parse(intentFromFlags(flags, process.cwd(), forbidden)).reviewPolicy.design).toBe(false);
    const off = resolveConfig({ mode: 'production', agents: { planner: cloud, local }, routing: { default: 'planner', review: 'local' }, review: { design: false }, worker });
    expect(IntentSchema.parse(intentFromFlags(flags, process.cwd(), off)).reviewPolicy.design).toBe(false);
    // The scripted demo agent has no model to review with.
    expect(IntentSchema.parse(intentFromFlags({ ...flags, agent: 'scripted', script: DEMO_SCRIPT }, process.cwd(), resolveConfig({}))).reviewPolicy.design).toBe(false);
  });

  test("the config's routing when no agent flag is given; --agent-profile for every stage", () => {
    const config = resolveConfig({ mode: 'production', agents: { planner: cloud, local }, routing: { default: 'planner', impl: 'local' }, worker });
    const routed = intentFromFlags(flags, process.cwd(), config);
    expect(routed.agent).toMatchObject({ kind: 'anthropic', name: 'planner' });
    expect(routed.stageAgents).toEqual({ impl: expect.objectContaining({ kind: 'openai', name: 'local' }) });
    const one = intentFromFlags({ ...flags, agentProfile: 'local' }, process.cwd(), config);
    expect(one).toMatchObject({ agent: { name: 'local' } });
    expect(one.stageAgents).toBeUndefined();
    expect(() => intentFromFlags({ ...flags, agentProfile: 'nope' }, process.cwd(), config)).toThrow(/--agent-profile names agent "nope", which the config does not define \(it has: planner, local\)/);
  });

  test('development mode refuses a paid cloud endpoint before anything starts; a local one is fine', () => {
    const config = resolveConfig({ mode: 'development', agents: { planner: cloud, local }, routing: { default: 'local', review: 'planner' }, worker });
    expect(() => intentFromFlags(flags, process.cwd(), config)).toThrow(/development mode refuses paid cloud endpoints: anthropic model claude-sonnet-4-5/);
    expect(intentFromFlags({ ...flags, agentProfile: 'local' }, process.cwd(), config).agent).toMatchObject({ kind: 'openai' });
  });
});

test("a workflow heap too small for the worker's cache is refused, with what would do", () => {
  expect(() => resolveConfig({ worker: { maxCachedWorkflows: 1000, workflowHeapMb: 256 } })).toThrow(
    /worker\.workflowHeapMb: 256 MB is too small for worker\.maxCachedWorkflows \(1000\).*Raise workflowHeapMb to 500 or more/,
  );
  expect(resolveConfig({ worker: { maxCachedWorkflows: 500, workflowHeapMb: 256 } }).worker.maxCachedWorkflows).toBe(500);
  // The defaults hold the rule themselves.
  const { worker } = resolveConfig({});
  expect(worker.workflowHeapMb).toBeGreaterThanOrEqual(worker.maxCachedWorkflows! * HEAP_MB_PER_CACHED_WORKFLOW);
});

describe('confinement', () => {
  const repo = makeSampleRepo();
  const flags = { repo, goal: 'Add slugify', agent: 'command', cmd: 'true' };

  test('agent-written code stays confined unless the config or the flag says otherwise; the flag wins for one intent', () => {
    expect(intentFromFlags(flags, process.cwd(), resolveConfig({})).confinement).toEqual({});
    const config = resolveConfig({ confinement: { testNetwork: 'host' } });
    expect(config.confinement).toEqual({ allowUnconfinedCode: false, testNetwork: 'host' });
    expect(intentFromFlags(flags, process.cwd(), config).confinement).toEqual({ allowUnconfinedCode: false, testNetwork: 'host' });
    expect(intentFromFlags({ ...flags, allowUnconfinedCode: true, testNetwork: 'none' }, process.cwd(), config).confinement).toEqual({ allowUnconfinedCode: true, testNetwork: 'none' });
  });

  test('a bad value is one clear line', () => {
    expect(() => resolveConfig({ confinement: { allowUnconfinedCode: 'yes' } })).toThrow(/confinement\.allowUnconfinedCode/);
    expect(() => resolveConfig({ confinement: { sandbox: 'none' } })).toThrow(/confinement: Unrecognized key: "sandbox"/);
    expect(() => intentFromFlags({ ...flags, testNetwork: 'gateway' }, process.cwd(), resolveConfig({}))).toThrow('--test-network must be none or host, not gateway');
  });
});

describe('lineage', () => {
  const repo = makeSampleRepo();
  const flags = { repo, goal: 'Add slugify', agent: 'command', cmd: 'true' };

  test("a merged intent's lineage goes to its ref unless the config keeps it in the tree; a bad value is one clear line", () => {
    expect(IntentSchema.parse(intentFromFlags(flags, process.cwd(), resolveConfig({}))).lineage).toEqual({ location: 'ref', keepForResume: '30d' });
    const config = resolveConfig({ lineage: { location: 'tree' } });
    expect(config.lineage).toEqual({ location: 'tree', keepForResume: '30d' });
    expect(intentFromFlags(flags, process.cwd(), config).lineage).toEqual({ location: 'tree', keepForResume: '30d' });
    expect(() => resolveConfig({ lineage: { location: 'branch' } })).toThrow(/lineage\.location/);
    expect(() => resolveConfig({ lineage: { inTree: true } })).toThrow(/lineage: Unrecognized key: "inTree"/);
  });

  test('how long an ended intent is kept for a resume comes from lineage.keepForResume (30d unless it says)', () => {
    expect(intentFromFlags(flags, process.cwd(), resolveConfig({ lineage: { keepForResume: '2h' } })).lineage).toEqual({ location: 'ref', keepForResume: '2h' });
    expect(() => resolveConfig({ lineage: { keepForResume: 'a month' } })).toThrow(/lineage\.keepForResume/);
  });
});

describe('approvals', () => {
  const key = `ed25519:${'ab'.repeat(32)}`;

  test("unsigned decisions count on the embedded server's gates but production, on a remote server nowhere, unless the config says", () => {
    const all = ['architecture', 'lld', 'spec', 'cost-overrun', 'cascade', 'anomaly', 'blast-radius', 'security', 'merge'];
    const config = resolveConfig({ approvers: { alice: { publicKey: key } } });
    expect(approvalsFrom({ ...config, embeddedServer: true })).toEqual({ keys: { alice: key }, unsignedGates: all });
    expect(approvalsFrom({ ...config, embeddedServer: false })).toEqual({ keys: { alice: key }, unsignedGates: [] });
    expect(approvalsFrom({ ...resolveConfig({ unsignedDecisions: { accept: 'never' } }), embeddedServer: true }).unsignedGates).toEqual([]);
    const always = resolveConfig({ unsignedDecisions: { accept: 'always', gates: ['merge', 'production'] } });
    expect(approvalsFrom({ ...always, embeddedServer: false }).unsignedGates).toEqual(['merge']);
  });

  test('a key that is not one is refused with what one looks like', () => {
    expect(() => resolveConfig({ approvers: { alice: { publicKey: 'ssh-ed25519 AAAA' } } })).toThrow(/approvers\.alice\.publicKey: a public key is ed25519: and 64 hex digits/);
    expect(() => IntentSchema.parse({ id: 'x', goal: 'g', repoPath: '/r', agent: { kind: 'scripted', scriptPath: '/s' }, approvals: { unsignedGates: ['production'] } })).toThrow(/the production gate never takes an unsigned decision/);
  });
});

test('a secret in --cmd, --goal or --test-cmd is refused before anything starts: the history would keep it', () => {
  const repo = makeSampleRepo();
  expect(() => intentFromFlags({ repo, goal: 'x', agent: 'command', cmd: 'my-agent --token ghp_0123456789abcdefghijABCDEFGHIJ012345' }, process.cwd(), resolveConfig({}))).toThrow(
    /^--cmd holds what looks like a secret \(GitHub token\): it would be stored in the intent's workflow history.*refer to it by name/,
  );
  expect(() => intentFromFlags({ repo, goal: 'use key AKIAIOSFODNN7EXAMPLE', agent: 'command', cmd: 'true' }, process.cwd(), resolveConfig({}))).toThrow(/^--goal holds what looks like a secret \(AWS access key id\)/);
  expect(() => intentFromFlags({ repo, goal: 'x', agent: 'command', cmd: 'true', testCmd: 'API_TOKEN=abcdefgh12345678 npm test' }, process.cwd(), resolveConfig({}))).toThrow(/^--test-cmd holds what looks like a secret \(secret variable\)/);
  expect(intentFromFlags({ repo, goal: 'x', agent: 'command', cmd: 'echo --token "$API_TOKEN"' }, process.cwd(), resolveConfig({})).agent).toMatchObject({ command: 'echo --token "$API_TOKEN"' });
});

describe('custom gates in the config', () => {
  const base = { customGates: [{ id: 'api-change', after: 'review', prompt: 'API changed.', when: { paths: ['src/api/**'] } }] };
  test('a valid one is carried; the problems of bad ones are named', () => {
    expect(resolveConfig(base).customGates).toEqual(base.customGates);
    expect(() => resolveConfig({ customGates: [{ id: 'merge', after: 'review', prompt: 'x' }] })).toThrow(/customGates\.0\.id: that is a built-in gate: configure it under gates instead/);
    expect(() => resolveConfig({ customGates: [{ id: 'Bad Id', after: 'review', prompt: 'x' }] })).toThrow(/a gate id is 2-40 lower-case letters/);
    expect(() => resolveConfig({ customGates: [{ id: 'early', after: 'triage', prompt: 'x', when: { paths: ['a/**'] } }] })).toThrow(/when\.paths needs a change to look at: after impl or review/);
    expect(() => resolveConfig({ customGates: [{ id: 'late', after: 'impl', prompt: 'x', when: { findingCategory: 'api' } }] })).toThrow(/when\.findingCategory needs review findings: after review/);
    expect(() => resolveConfig({ customGates: [base.customGates[0], base.customGates[0]] })).toThrow(/two custom gates are named api-change/);
    expect(() => resolveConfig({ customGates: [{ id: 'x1', after: 'deploy', prompt: 'x' }] })).toThrow(/customGates\.0\.after/);
  });
});

describe('the scope judge', () => {
  const judge = { kind: 'openai', model: 'gpt-4.1-mini', apiKeyEnv: ['OPENAI_API_KEY'] };

  test('names a model over HTTP among the agents, never the model routed to a stage it judges', () => {
    expect(() => resolveConfig({ agents: { local }, judge: { agent: 'judge' } })).toThrow(/judge\.agent: names agent "judge", which is not in agents/);
    expect(() => resolveConfig({ agents: { local, judge: { kind: 'scripted', scriptPath: DEMO_SCRIPT } }, judge: { agent: 'judge' } })).toThrow(/judge\.agent: names agent "judge" of kind scripted: the judge is a model over HTTP/);
    expect(() => resolveConfig({ agents: { planner: cloud, local }, routing: { default: 'planner', impl: 'local' }, judge: { agent: 'local' } })).toThrow(
      /judge\.agent: llama-3\.1-8b is also the model routed to impl, whose answers it would judge/,
    );
    expect(() => resolveConfig({ judge: { agent: 'judge', stages: [] } })).toThrow(/judge\.stages/);
    // Judging only the stages it is not routed to is fine.
    const config = resolveConfig({ agents: { planner: cloud, local }, routing: { default: 'planner', impl: 'local' }, judge: { agent: 'local', stages: ['lld', 'spec'] }, worker });
    expect(config.judge).toEqual({ agent: 'local', stages: ['lld', 'spec'] });
  });

  test('warden run carries the config\'s judge into the intent, with lld, spec and impl judged unless it says', () => {
    const repo = makeSampleRepo();
    const config = resolveConfig({ agents: { judge }, judge: { agent: 'judge' } });
    const intent = IntentSchema.parse(intentFromFlags({ repo, goal: 'Add slugify', script: DEMO_SCRIPT }, process.cwd(), { ...config, embeddedServer: false }));
    expect(intent.judge).toEqual({ agent: expect.objectContaining({ kind: 'openai', name: 'judge', model: 'gpt-4.1-mini' }), stages: ['lld', 'spec', 'impl'] });
    const without = IntentSchema.parse(intentFromFlags({ repo, goal: 'Add slugify', script: DEMO_SCRIPT }, process.cwd(), { ...resolveConfig({}), embeddedServer: false }));
    expect(without.judge).toBeUndefined();
  });
});
