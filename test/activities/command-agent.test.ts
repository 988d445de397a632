import { SpendMeter } from '../../src/gateway/spend-meter';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { createCommandAgent } from '../../src/activities/agents/command-agent';
import { shellQuote } from '../../src/activities/agents/cli-invocations';
import type { AgentRequest } from '../../src/activities/agents/agent';
import { parseDuration } from '../../src/shared/duration';
import { FailureType } from '../../src/shared/errors';
import { CommandAgentProfileSchema, LimitsSchema, type CommandAgentProfile } from '../../src/shared/intent';

let worktree: string;
beforeEach(() => {
  worktree = mkdtempSync(path.join(os.tmpdir(), 'warden-agent-worktree-'));
});
afterEach(() => {
  rmSync(worktree, { recursive: true, force: true });
});

function profile(fields: Partial<CommandAgentProfile> & { command: string }): CommandAgentProfile {
  return CommandAgentProfileSchema.parse({ kind: 'command', ...fields });
}

function request(fields: Partial<AgentRequest> = {}): AgentRequest {
  return {
    intentId: 'intent-1',
    stage: 'impl',
    attempt: 1,
    prompt: 'do the thing',
    worktreePath: worktree,
    signal: new AbortController().signal,
    heartbeat: () => undefined,
    meter: new SpendMeter({ pricing: {}, declaredCapUsd: '0' }),
    ...fields,
  };
}

/** The error a promise rejects with (fails the test if it resolves). */
async function failureOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error('expected the agent to fail');
}

async function applicationFailureOf(promise: Promise<unknown>): Promise<ApplicationFailure> {
  const err = await failureOf(promise);
  expect(err).toBeInstanceOf(ApplicationFailure);
  return err as ApplicationFailure;
}

const TRICKY_PROMPT = `Fix it's "bug" in $HOME and \`id\`; $(touch pwned) \\ \nsecond line {prompt} {promptFile} 'end'`;

describe('createCommandAgent', () => {
  it('pipes the prompt to stdin and returns stdout; the run is counted at its declared cap, marked unmetered', async () => {
    const meter = new SpendMeter({ pricing: {}, declaredCapUsd: '0.25' });
    const result = await createCommandAgent(profile({ command: 'cat' })).run(request({ prompt: TRICKY_PROMPT, meter }));
    expect(result).toEqual({ output: TRICKY_PROMPT, usage: { inputTokens: 0, outputTokens: 0 } });
    expect(meter.calls).toEqual([expect.objectContaining({ model: 'command', costUsd: '0.250000', unmetered: true, estimated: true, overrun: false })]);
    expect(meter.totalUsd()).toBe('0.250000');
    expect(existsSync(path.join(worktree, 'pwned'))).toBe(false);
  });

  it("reads a document stage's answer from the file the prompt names, keeps stdout as the log, and leaves no answer file behind", async () => {
    const agent = createCommandAgent(profile({ command: 'grep -q "WARDEN-ANSWER.md" && echo "# The design" > WARDEN-ANSWER.md && echo "working... done"', answer: 'file', promptVia: 'stdin' }));
    // The answer file is named in the prompt on stdin.
    const result = await agent.run(request({ stage: 'lld', prompt: 'design it' }));
    expect(result.output).toBe('# The design\n');
    expect(result.log).toBe('working... done\n');
    expect(existsSync(path.join(worktree, 'WARDEN-ANSWER.md'))).toBe(false);
    // An agent that writes no answer fails the attempt (retryable), naming the file.
    const silent = await applicationFailureOf(createCommandAgent(profile({ command: 'cat >/dev/null; echo chatter', answer: 'file' })).run(request({ stage: 'spec' })));
    expect(silent.type).toBe(FailureType.AgentFailed);
    expect(silent.nonRetryable).toBe(false);
    expect(silent.message).toContain('WARDEN-ANSWER.md');
    // impl's result is what it leaves in the worktree: stdout stays its output.
    expect((await agent.run(request({ stage: 'impl', prompt: 'no file named here' })).then(() => 'ran', (e: Error) => e.message))).toContain('exited with code 1');
  });

  it('replaces {prompt} with the shell-quoted prompt', async () => {
    const agent = createCommandAgent(profile({ command: "printf '%s' {prompt}", promptVia: 'arg' }));
    const result = await agent.run(request({ prompt: TRICKY_PROMPT }));
    expect(result.output).toBe(TRICKY_PROMPT);
    expect(existsSync(path.join(worktree, 'pwned'))).toBe(false);
  });

  it('replaces {promptFile} with a temp file outside the worktree and removes it afterwards', async () => {
    const agent = createCommandAgent(
      profile({ command: "cat {promptFile}; printf '\\n%s' {promptFile}", promptVia: 'arg' }),
    );
    const result = await agent.run(request({ prompt: TRICKY_PROMPT }));
    const file = result.output.slice(TRICKY_PROMPT.length + 1);

    expect(result.output.slice(0, TRICKY_PROMPT.length)).toBe(TRICKY_PROMPT);
    expect(path.isAbsolute(file)).toBe(true);
    expect(realpathSync(path.dirname(path.dirname(file)))).toBe(realpathSync(os.tmpdir()));
    expect(file.startsWith(worktree)).toBe(false);
    expect(existsSync(file)).toBe(false);
    expect(existsSync(path.dirname(file))).toBe(false);
    expect(readdirSync(worktree)).toEqual([]);
  });

  it('supports {prompt} and {promptFile} in one command', async () => {
    const agent = createCommandAgent(
      profile({ command: "printf '%s|' {prompt}; cat {promptFile}", promptVia: 'arg' }),
    );
    expect((await agent.run(request({ prompt: 'a b' }))).output).toBe('a b|a b');
  });

  it('removes the prompt file when the agent fails too', async () => {
    const agent = createCommandAgent(profile({ command: 'echo {promptFile} >&2; exit 1', promptVia: 'arg' }));
    const failure = await applicationFailureOf(agent.run(request()));
    const file = /(\/\S+prompt\.md)/.exec(failure.message)?.[1];
    expect(file).toBeDefined();
    expect(existsSync(file!)).toBe(false);
  });

  it('does not hand the prompt on stdin when it goes in the arguments', async () => {
    // Were the prompt's stdin left open, cat would wait for it until the timeout.
    const agent = createCommandAgent(profile({ command: 'cat; echo {prompt}', promptVia: 'arg', timeout: '60s' }));
    expect((await agent.run(request({ prompt: 'p' }))).output).toBe('p\n');
  });

  it('fails with AGENT_FAILED, the exit code and the tail of stderr on a non-zero exit', async () => {
    const agent = createCommandAgent(
      profile({ command: "head -c 3000 /dev/zero | tr '\\0' x >&2; echo THE-END >&2; exit 3" }),
    );
    const failure = await applicationFailureOf(agent.run(request()));
    expect(failure.type).toBe(FailureType.AgentFailed);
    expect(failure.nonRetryable).toBe(false);
    expect(failure.message).toContain('exited with code 3');
    expect(failure.message).toContain('THE-END');
    expect(failure.message).toContain('x'.repeat(400));
    expect(failure.message).not.toContain('x'.repeat(600));
  });

  it('fails with AGENT_TIMED_OUT when the command outlives the profile timeout', async () => {
    // Unkilled, the command would outlast the test's own timeout.
    const agent = createCommandAgent(profile({ command: 'sleep 600', timeout: '300ms' }));
    const failure = await applicationFailureOf(agent.run(request()));
    expect(failure.type).toBe(FailureType.AgentTimedOut);
    expect(failure.nonRetryable).toBe(false);
  });

  it('fails with non-retryable AGENT_OUTPUT_TOO_LARGE when the command floods', async () => {
    const agent = createCommandAgent(profile({ command: 'yes', maxOutputBytes: 1_000 }));
    const failure = await applicationFailureOf(agent.run(request()));
    expect(failure.type).toBe(FailureType.AgentOutputTooLarge);
    expect(failure.nonRetryable).toBe(true);
  });

  it('throws a CancelledFailure when the request is aborted, and stops the command', async () => {
    const controller = new AbortController();
    // Unstopped, the command would outlast the test's own timeout. (How fast a stop is: bench/kill-latency.ts.)
    const pending = createCommandAgent(profile({ command: 'sleep 600' })).run(request({ signal: controller.signal }));
    setTimeout(() => controller.abort(), 200);
    const err = await failureOf(pending);
    expect(err).toBeInstanceOf(CancelledFailure);
  });

  it('does not run at all when the request is already aborted', async () => {
    const controller = new AbortController();
    controller.abort();
    const agent = createCommandAgent(profile({ command: 'touch ran' }));
    expect(await failureOf(agent.run(request({ signal: controller.signal })))).toBeInstanceOf(CancelledFailure);
    expect(existsSync(path.join(worktree, 'ran'))).toBe(false);
  });

  it("hides Warden's Temporal and database credentials from the agent", async () => {
    const planted: Record<string, string> = {
      TEMPORAL_ADDRESS: 'localhost:7233',
      TEMPORAL_NAMESPACE: 'default',
      WARDEN_SECRET: 's',
      DATABASE_URL: 'postgres://warden:pw@db/warden',
      PGPASSWORD: 'pw',
      AGENT_VISIBLE: 'yes',
    };
    const saved = Object.fromEntries(Object.keys(planted).map((name) => [name, process.env[name]]));
    Object.assign(process.env, planted);
    try {
      const { output } = await createCommandAgent(profile({ command: 'env' })).run(request());
      const names = output.split('\n').map((line) => line.split('=')[0]);
      expect(names).toContain('PATH');
      expect(names).toContain('AGENT_VISIBLE');
      for (const hidden of ['TEMPORAL_ADDRESS', 'TEMPORAL_NAMESPACE', 'WARDEN_SECRET', 'DATABASE_URL', 'PGPASSWORD']) {
        expect(names).not.toContain(hidden);
      }
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });

  it('runs in the worktree, where it may edit files', async () => {
    const agent = createCommandAgent(profile({ command: 'pwd; printf "edited by agent" > notes.txt' }));
    const { output } = await agent.run(request());
    expect(realpathSync(output.trim())).toBe(realpathSync(worktree));
    expect(readFileSync(path.join(worktree, 'notes.txt'), 'utf8')).toBe('edited by agent');
  });

  it('heartbeats while the command runs', async () => {
    let beats = 0;
    await createCommandAgent(profile({ command: 'sleep 1.3' })).run(request({ heartbeat: () => beats++ }));
    expect(beats).toBeGreaterThanOrEqual(1);
  });

  it('rejects a profile that cannot deliver the prompt or has a bad timeout', () => {
    for (const bad of [
      profile({ command: 'claude -p', promptVia: 'arg' }),
      { ...profile({ command: 'cat' }), timeout: 'soon' },
    ]) {
      let thrown: unknown;
      try {
        createCommandAgent(bad);
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(ApplicationFailure);
      expect((thrown as ApplicationFailure).type).toBe(FailureType.InvalidIntent);
      expect((thrown as ApplicationFailure).nonRetryable).toBe(true);
    }
  });
});

describe('the prompt an agent says it sent', () => {
  /** A prompt with what quoting and `$(cat …)` get wrong: quotes, expansions, placeholders, trailing newlines. */
  const PROMPT = `${TRICKY_PROMPT}\n\n`;
  let outside: string;
  beforeEach(() => {
    outside = mkdtempSync(path.join(os.tmpdir(), 'warden-agent-received-'));
  });
  afterEach(() => {
    rmSync(outside, { recursive: true, force: true });
  });

  /** A program at `outside/name` that runs `body` (sh), with RECEIVED the file it is to copy what it got to. */
  function program(name: string, body: string): string {
    const file = path.join(outside, name);
    writeFileSync(file, `#!/bin/sh\nRECEIVED=${shellQuote(path.join(outside, 'received'))}\n${body}\n`, { mode: 0o755 });
    return file;
  }

  /** Runs the agent (unconfined, so what it got can be copied outside the worktree); returns what it recorded and what it got. */
  async function sentAndReceived(agentProfile: CommandAgentProfile, stage: AgentRequest['stage']): Promise<{ recorded: string[]; received: string }> {
    const recorded: string[] = [];
    await createCommandAgent(agentProfile).run(request({ stage, prompt: PROMPT, allowUnconfinedCode: true, recordPrompt: async (sent) => void recorded.push(sent) }));
    return { recorded, received: readFileSync(path.join(outside, 'received'), 'utf8') };
  }

  /** A CLI profile (its model never called: the stand-in programs call nothing). */
  const cliProfile = (cli: 'aider' | 'codex' | 'claude', command: string): CommandAgentProfile =>
    CommandAgentProfileSchema.parse({ kind: 'command', cli, command, upstream: { kind: 'anthropic', model: 'claude-sonnet-4-5', apiKeyEnv: ['WARDEN_TEST_UPSTREAM_KEY'] }, network: 'host', sandbox: 'none' });
  const WRITE_ANSWER = 'printf "# answer\\n" > WARDEN-ANSWER.md';
  const copyTo = (): string => shellQuote(path.join(outside, 'received'));

  // [how it is handed on, the profile, the stage, whether the agent adds where its answer goes]
  it.each([
    ['on stdin', () => profile({ command: `cat > ${copyTo()}`, sandbox: 'none' }), 'impl', false],
    ['on stdin, with where the answer goes', () => profile({ command: `cat > ${copyTo()}; ${WRITE_ANSWER}`, answer: 'file', sandbox: 'none' }), 'lld', true],
    ['as an argument', () => profile({ command: `printf %s {prompt} > ${copyTo()}`, promptVia: 'arg', sandbox: 'none' }), 'impl', false],
    ['in a prompt file', () => profile({ command: `cat {promptFile} > ${copyTo()}; ${WRITE_ANSWER}`, promptVia: 'arg', answer: 'file', sandbox: 'none' }), 'spec', true],
    // The CLIs, each a stand-in program that copies what Warden's command line hands it.
    ['to claude -p', () => cliProfile('claude', program('claude', `[ "$1" = -p ] && printf %s "$2" > "$RECEIVED"; ${WRITE_ANSWER}`)), 'lld', true],
    ['to codex exec', () => cliProfile('codex', program('codex', `for arg; do last=$arg; done; printf %s "$last" > "$RECEIVED"; ${WRITE_ANSWER}`)), 'review', true],
    ['to aider --message-file', () => cliProfile('aider', program('aider', `while [ $# -gt 0 ]; do [ "$1" = --message-file ] && cat "$2" > "$RECEIVED"; shift; done; ${WRITE_ANSWER}`)), 'triage', true],
    ['to claude at impl', () => cliProfile('claude', program('claude', '[ "$1" = -p ] && printf %s "$2" > "$RECEIVED"')), 'impl', false],
  ] as const)('is exactly what the command got %s', async (_, agentProfile, stage, toldWhere) => {
    const { recorded, received } = await sentAndReceived(agentProfile(), stage);
    expect(recorded).toEqual([received]);
    expect(received.startsWith(PROMPT)).toBe(true);
    expect(received.includes('## Where your answer goes')).toBe(toldWhere);
  });

  it('is not recorded when nothing was sent', async () => {
    const recorded: string[] = [];
    const failure = await applicationFailureOf(createCommandAgent(profile({ command: 'cat', sandbox: 'none' })).run(request({ recordPrompt: async (sent) => void recorded.push(sent) })));
    expect(failure.type).toBe(FailureType.SandboxUnavailable);
    expect(recorded).toEqual([]);
  });
});

describe("a CLI's tools follow its sandbox", () => {
  let tools: string;
  beforeEach(() => {
    tools = mkdtempSync(path.join(os.tmpdir(), 'warden-agent-cli-'));
  });
  afterEach(() => {
    rmSync(tools, { recursive: true, force: true });
  });

  /**
   * A stand-in `claude` that writes, into the worktree (the one place it may write in every
   * sandbox), the prompt it got (`-p PROMPT`), its uid and its other arguments.
   */
  function standInClaude(): string {
    // In a bin/ folder, as an installed CLI is: the sandbox binds the folder above it in.
    mkdirSync(path.join(tools, 'bin'));
    const file = path.join(tools, 'bin', 'claude');
    writeFileSync(file, '#!/bin/sh\nprintf %s "$2" > seen-prompt.txt; id -u > seen-uid.txt; shift 2; printf "%s " "$@" > seen-args.txt\n', { mode: 0o755 });
    return file;
  }

  const claudeProfile = (fields: Partial<CommandAgentProfile>): CommandAgentProfile =>
    CommandAgentProfileSchema.parse({ kind: 'command', cli: 'claude', command: standInClaude(), upstream: { kind: 'anthropic', model: 'claude-sonnet-4-5', apiKeyEnv: ['WARDEN_TEST_UPSTREAM_KEY'] }, network: 'host', ...fields });

  /** Runs the impl agent with `npm test --silent` as the repository's test command; what the stand-in saw, and the events recorded. */
  async function runImpl(agentProfile: CommandAgentProfile, allowUnconfinedCode = false): Promise<{ args: string; uid: number; prompt: string; events: Array<{ type: string; metadata: unknown }> }> {
    const events: Array<{ type: string; metadata: unknown }> = [];
    const event: NonNullable<AgentRequest['event']> = async (type, _severity, _reason, details) => {
      events.push({ type, metadata: details?.metadata });
      return type;
    };
    await createCommandAgent(agentProfile).run(request({ allowUnconfinedCode, event, testCommand: 'npm test --silent' }));
    const seen = (what: string): string => readFileSync(path.join(worktree, `seen-${what}.txt`), 'utf8');
    return { args: seen('args'), uid: Number(seen('uid')), prompt: seen('prompt'), events: events.filter((e) => e.type !== 'HOST_NETWORK_GRANTED') };
  }

  it('inside bubblewrap: Claude Code gets every tool without asking, runs as a user other than root, and is told how to run the tests', async () => {
    const seen = await runImpl(claudeProfile({ sandbox: 'bubblewrap' }));
    expect(seen.args).toContain('--permission-mode bypassPermissions');
    expect(seen.uid).not.toBe(0);
    expect(seen.prompt).toContain('## The tests');
    expect(seen.prompt).toContain('`npm test --silent`');
    expect(seen.events).toEqual([]);
  });

  it('outside bubblewrap: Claude Code edits only, is not told to run anything, and the ledger says so', async () => {
    const seen = await runImpl(claudeProfile({ sandbox: 'process' }), true);
    expect(seen.args).toContain('--permission-mode acceptEdits');
    expect(seen.prompt).not.toContain('## The tests');
    expect(seen.events).toEqual([{ type: 'CLI_TOOLS_NARROWED', metadata: { agent: 'command', cli: 'claude', mode: 'edits', sandbox: 'process' } }]);
  });

  it("a profile narrows it inside bubblewrap too (cliTools: 'edits')", async () => {
    const seen = await runImpl(claudeProfile({ sandbox: 'bubblewrap', cliTools: 'edits' }));
    expect(seen.args).toContain('--permission-mode acceptEdits');
    expect(seen.prompt).not.toContain('## The tests');
    expect(seen.events.map((e) => e.type)).toEqual(['CLI_TOOLS_NARROWED']);
  });

  it("refuses cliTools: 'edits' for Codex, which has no edits-only mode that works", () => {
    const codex = CommandAgentProfileSchema.parse({ kind: 'command', cli: 'codex', command: 'codex', cliTools: 'edits', upstream: { kind: 'openai', model: 'gpt-5', apiKeyEnv: ['WARDEN_TEST_UPSTREAM_KEY'] } });
    expect(() => createCommandAgent(codex)).toThrow(/cliTools 'edits' cannot be had with codex/);
  });
});

describe('parseDuration', () => {
  it.each([
    ['500ms', 500],
    ['30s', 30_000],
    ['15m', 900_000],
    ['24h', 86_400_000],
    ['2d', 172_800_000],
    ['1.5s', 1_500],
    ['0s', 0],
    ['30 s', 30_000],
    [' 10m ', 600_000],
  ])('parses %j as %d ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(['', '30', 's', '-5s', '5w', '1e3s', '5 sec', '30m extra', 'ms', '1.s', '.5s', '99999999999999d'])(
    'rejects %j',
    (text) => {
      expect(() => parseDuration(text)).toThrow(RangeError);
    },
  );

  it('parses every default the intent schema uses', () => {
    const limits = LimitsSchema.parse({});
    for (const text of [limits.gateTimeout, limits.stageTimeout, limits.testTimeout, profile({ command: 'x' }).timeout]) {
      expect(parseDuration(text)).toBeGreaterThan(0);
    }
  });
});
