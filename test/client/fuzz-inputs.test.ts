import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { main } from '../../src/client/cli';
import { intentFromFlags } from '../../src/client/intent-input';
import { resolveConfig } from '../../src/config/load';
import { UserError } from '../../src/shared/errors';
import { IntentSchema } from '../../src/shared/intent';
import { secretShapesIn } from '../../src/shared/redact';
import { textProblem } from '../../src/shared/control-characters';
import { globProblem } from '../../src/shared/glob';
import { makeSampleRepo } from '../helpers/env';
import { PLANTED } from '../helpers/planted-secrets';

/**
 * Property-based: config files, intent texts and `warden run` arguments of any shape get a clear,
 * one-line error or a valid result, never a crash, and nothing starts.
 */

const RUNS = Number(process.env.WARDEN_FUZZ_RUNS ?? 1000);
const text = fc.oneof(
  fc.string({ maxLength: 60 }),
  fc.string({ unit: 'binary', maxLength: 300 }),
  fc.constantFrom('', ' ', '..', '/', '-', '--', '$(rm -rf /)', 'a'.repeat(10_000)),
  fc.constantFrom(...PLANTED.map(([, secret]) => secret)).chain((secret) => fc.string({ maxLength: 20 }).map((prefix) => `${prefix} ${secret}`)),
  // Terminal escapes, bytes that were not UTF-8, and globs that are not the repository's.
  fc.constantFrom('\x1b[31mred', 'title\x1b]0;pwned\x07', '\u009b2J', 'a\rb', 'caf\ufffd', '\ud800', 'rtl \u202e', '[', '{a,b', '/etc/**', '../**', 'src/../..', '!/abs'),
  fc.tuple(fc.string({ maxLength: 10 }), fc.integer({ min: 0, max: 0x9f }), fc.string({ maxLength: 10 })).map(([a, code, b]) => `${a}${String.fromCharCode(code)}${b}`),
);

/** One line, said plainly: no stack trace, no "[object Object]". */
function isPlainMessage(message: string): boolean {
  return message.length > 0 && !message.includes('\n    at ') && !message.includes('[object Object]');
}

test(`${RUNS} config files of any shape: a config or one UserError naming the problem`, () => {
  const configLike = fc.oneof(
    fc.jsonValue(),
    fc.record(
      {
        profile: fc.oneof(fc.constantFrom('default', 'conservative', 'aggressive', 'production'), fc.jsonValue()),
        mode: fc.oneof(fc.constantFrom('development', 'production'), fc.jsonValue()),
        limits: fc.oneof(fc.record({ budgetUsd: fc.oneof(text, fc.jsonValue()), attempts: fc.jsonValue(), gateTimeout: fc.oneof(text, fc.jsonValue()) }, { requiredKeys: [] }), fc.jsonValue()),
        gates: fc.oneof(fc.dictionary(text, fc.jsonValue()), fc.jsonValue()),
        approvers: fc.oneof(fc.dictionary(text, fc.record({ publicKey: fc.oneof(text, fc.jsonValue()) })), fc.jsonValue()),
        unsignedDecisions: fc.jsonValue(),
        confinement: fc.oneof(fc.record({ allowUnconfinedCode: fc.jsonValue(), testNetwork: fc.oneof(fc.constantFrom('none', 'host'), fc.jsonValue()) }, { requiredKeys: [] }), fc.jsonValue()),
        agents: fc.oneof(fc.dictionary(text, fc.jsonValue()), fc.jsonValue()),
        worker: fc.jsonValue(),
      },
      { requiredKeys: [] },
    ),
  );
  fc.assert(
    fc.property(configLike, (config) => {
      try {
        resolveConfig(config as Parameters<typeof resolveConfig>[0]);
      } catch (error) {
        if (!(error instanceof UserError)) throw error;
        if (!isPlainMessage(error.message)) throw new Error(`unclear message: ${error.message}`);
      }
    }),
    { numRuns: RUNS },
  );
});

test(`${RUNS} intent texts of any shape: a valid intent or one UserError, and no secret passes`, () => {
  const repo = makeSampleRepo();
  const config = resolveConfig({});
  fc.assert(
    fc.property(text, fc.option(text, { nil: undefined }), fc.array(text, { maxLength: 5 }), fc.option(text, { nil: undefined }), (goal, id, paths, testCmd) => {
      let input;
      try {
        input = intentFromFlags({ repo, goal, id, paths, testCmd, agent: 'command', cmd: 'true' }, process.cwd(), config);
      } catch (error) {
        if (!(error instanceof UserError)) throw error;
        if (!isPlainMessage(error.message)) throw new Error(`unclear message: ${error.message}`);
        return;
      }
      expect(secretShapesIn(goal)).toEqual([]); // a goal holding a secret never passes
      // nor one that is not plain text, nor a glob that is not valid or leaves the repository
      expect(textProblem(goal)).toBeUndefined();
      for (const glob of input.paths ?? []) expect(textProblem(glob) ?? globProblem(glob)).toBeUndefined();
      // What passed the CLI's checks is what the workflow's own check accepts, or a schema error said plainly.
      const parsed = IntentSchema.safeParse(input);
      if (!parsed.success) expect(parsed.error.issues.length).toBeGreaterThan(0);
      else expect(parsed.data.goal.length).toBeLessThanOrEqual(4000);
    }),
    { numRuns: RUNS },
  );
});

describe('warden run with arguments of any shape', () => {
  const saved = { cwd: process.cwd(), address: process.env.TEMPORAL_ADDRESS, exitCode: process.exitCode };
  beforeAll(() => {
    // Nowhere to start anything: no repository here, and a Temporal address nothing listens on.
    process.chdir(mkdtempSync(path.join(os.tmpdir(), 'warden-fuzz-cwd-')));
    process.env.TEMPORAL_ADDRESS = '127.0.0.1:1';
  });
  afterAll(() => {
    process.chdir(saved.cwd);
    if (saved.address === undefined) delete process.env.TEMPORAL_ADDRESS;
    else process.env.TEMPORAL_ADDRESS = saved.address;
    process.exitCode = saved.exitCode;
  });

  test(`${RUNS} argument lists: exit 2 and one "warden: …" line (or help), never a crash`, async () => {
    const flags = ['--repo', '--goal', '--id', '--agent', '--model', '--provider', '--cmd', '--sandbox', '--network', '--paths', '--base', '--test-cmd', '--impl-attempts', '--gate-timeout', '--budget', '--notify', '--env', '--test-network', '--allow-unconfined-code', '--by', '--json', '--detach', '--resume-from', '--prompt-via', '--bogus'];
    const argument = fc.oneof(fc.constantFrom(...flags), text, fc.constantFrom('aider', 'codex', 'claude', 'scripted', 'command', 'none', 'host', 'bubblewrap', '0', '-1', '1e9', '24h', 'forever', 'slack:$HOOK', 'https://hooks.slack.com/services/x', 'http://127.0.0.1:1/h', '12.50'));
    // Most lists carry what run requires (a folder that exists, a goal), so the checks past the parser are reached too.
    const required = fc.oneof(fc.constant([] as string[]), fc.tuple(fc.constantFrom('.', os.tmpdir(), '/'), text).map(([repo, goal]) => ['--repo', repo, '--goal', goal]));
    const stderr: string[] = [];
    const write = jest.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      stderr.push(String(chunk));
      return true;
    });
    const out = jest.spyOn(process.stdout, 'write').mockImplementation(() => true);
    try {
      await fc.assert(
        fc.asyncProperty(required, fc.array(argument, { maxLength: 8 }), async (base, rest) => {
          const args = [...base, ...rest];
          stderr.length = 0;
          const listeners = { int: process.listeners('SIGINT'), term: process.listeners('SIGTERM') };
          const code = await main(['node', 'warden', 'run', ...args.filter((a) => a !== '--help' && a !== '-h')]);
          for (const l of process.listeners('SIGINT')) if (!listeners.int.includes(l)) process.off('SIGINT', l);
          for (const l of process.listeners('SIGTERM')) if (!listeners.term.includes(l)) process.off('SIGTERM', l);
          const said = stderr.join('');
          if (code !== 2) throw new Error(`exit ${code} for ${JSON.stringify(args)}: ${said}`);
          const lines = said.trimEnd().split('\n');
          if (lines.length !== 1 || !lines[0]!.startsWith('warden: ') || !isPlainMessage(lines[0]!)) throw new Error(`not one plain line for ${JSON.stringify(args)}: ${said}`);
        }),
        { numRuns: RUNS },
      );
    } finally {
      write.mockRestore();
      out.mockRestore();
    }
  });
});
