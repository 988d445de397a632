#!/usr/bin/env node
import path from 'node:path';
import { Command, Option } from 'commander';
import type { WardenConfig } from '../config/schema';
import { loadRuntimeConfig, type RuntimeConfig } from '../runtime/config';
import { createCommandLogger, createLogger, LOG_FORMATS, type LogFormat } from '../runtime/logger';
import { defaultApprover } from '../runtime/default-approver';
import { HOST_NAME } from '../shared/ids';
import { DURATION_PATTERN, parseDuration } from '../shared/duration';
import { MERGE_CONDITION_FORMS } from '../shared/merge-conditions';
import { existsSync, readFileSync } from 'node:fs';
import { GATE_KINDS, isGateName } from '../shared/gates';
import { UserError } from '../shared/errors';
import { forTerminal, forTerminalLine, jsonForTerminal } from '../shared/control-characters';
import { INTENT_STATUSES } from '../shared/state';
import { approverKeysDir } from '../shared/approver-keys-dir';
import { exitOnInterrupt, untilInterrupted } from './interrupts';
import { addLadderCommands } from './ladder-commands';
import { addLedgerCommands } from './ledger-commands';
import { addLedgerChainCommands } from './ledger-chain-commands';
import { addRecordingCommand } from './recording-commands';
import { addLabelCommand } from './label-commands';
import { addEvalCommand } from './eval-commands';
import { addReplayCommand } from './replay-commands';
import { addStopCommands } from './stop-commands';
import { addWorkerVersionCommands } from './worker-version-commands';
import { addCheckStubsCommand } from './check-stubs';
import { addResumeCommand, resumeFromCli } from './resume';
import type { RunFlags } from './intent-input';
import { addInitCommand } from './init';
import { addConfigCommands } from './config-commands';
import type * as ApprovalOutlook from './approval-outlook';
import type * as ApproverKeys from './approver-keys';
import type * as AgentCliInstall from './agent-cli-install';
import type * as CascadeDetector from '../safety/cascade-detector';
import type * as CascadeModelCache from '../workers/cascade-model-cache';
import type * as ConfigLoad from '../config/load';
import type * as Decisions from '../shared/decisions';
import type * as Demo from './demo';
import type * as Doctor from './doctor';
import type * as GatePrompt from './gate-prompt';
import type * as IntentInput from './intent-input';
import type * as Intents from './intents';
import type * as IntentStatus from './intent-status';
import type * as ListIntents from './list-intents';
import type * as Messages from '../shared/messages';
import type * as Report from './report';
import type * as RevertIntent from './revert-intent';
import type * as RunIntent from './run-intent';
import type * as SandboxReadiness from '../runtime/sandbox-readiness';
import type * as Session from './session';
import type * as WebServe from './web/serve';

/*
 * What a command runs is loaded when it runs: `warden --help`, and an input refused before any
 * work, load none of it (79 modules instead of 666).
 */
/* eslint-disable @typescript-eslint/no-require-imports -- see above */
const approvalOutlook = () => require('./approval-outlook') as typeof ApprovalOutlook;
const approverKeys = () => require('./approver-keys') as typeof ApproverKeys;
const agentCliInstall = () => require('./agent-cli-install') as typeof AgentCliInstall;
const cascadeDetector = () => require('../safety/cascade-detector') as typeof CascadeDetector;
const cascadeModelCache = () => require('../workers/cascade-model-cache') as typeof CascadeModelCache;
const configLoad = () => require('../config/load') as typeof ConfigLoad;
const decisions = () => require('../shared/decisions') as typeof Decisions;
const demo = () => require('./demo') as typeof Demo;
const doctor = () => require('./doctor') as typeof Doctor;
const gatePrompt = () => require('./gate-prompt') as typeof GatePrompt;
const intentInput = () => require('./intent-input') as typeof IntentInput;
const intents = () => require('./intents') as typeof Intents;
const intentStatus = () => require('./intent-status') as typeof IntentStatus;
const listIntents = () => require('./list-intents') as typeof ListIntents;
const messages = () => require('../shared/messages') as typeof Messages;
const report = () => require('./report') as typeof Report;
const revertIntent = () => require('./revert-intent') as typeof RevertIntent;
const runIntentModule = () => require('./run-intent') as typeof RunIntent;
const sandboxReadiness = () => require('../runtime/sandbox-readiness') as typeof SandboxReadiness;
const session = () => require('./session') as typeof Session;
const webServe = () => require('./web/serve') as typeof WebServe;
/* eslint-enable @typescript-eslint/no-require-imports */

/** Before a worker starts here: bubblewrap works (installed if missing, where we may), or the operator accepted its absence. */
async function sandboxOrStop(allowUnconfined: boolean): Promise<void> {
  await sandboxReadiness().requireSandbox({ allowUnconfined, install: true, offerUnconfined: true, log: print, warn: (line) => process.stderr.write(`${forTerminal(line)}\n`) });
}

/** `warden check cascade`'s exit code when the text must not pass (0 allows, 2 blocks: the usual hook contract). */
export const CASCADE_BLOCK_EXIT = 2;

/**
 * Every line a command prints goes out here, and every line of an error: what came from an
 * intent, an agent or a repository (goals, answers, failure messages, file names) may hold
 * escape sequences, which are shown, never sent to the terminal.
 */
function print(line: string): void {
  process.stdout.write(`${forTerminal(line)}\n`);
}

function printJson(value: unknown): void {
  process.stdout.write(`${jsonForTerminal(JSON.stringify(value, null, 2))}\n`);
}

function printError(message: string): void {
  process.stderr.write(`warden: ${forTerminal(message)}\n`);
}

/** Builds the `warden` command tree. Exported so tests can run it in-process. */
export function buildProgram(config: RuntimeConfig = loadRuntimeConfig(process.env)): Command {
  const program = new Command('warden')
    .description('Durable, safety-first orchestrator for autonomous coding agents, on Temporal.')
    .option('--config <file>', 'config file (default: $WARDEN_CONFIG, else warden.config.json or .ts here, else the default profile)')
    .addOption(
      new Option('--log-format <format>', `human: the log to a file under the Warden home (${path.join(config.wardenHome, 'logs')}), warnings as one line each on stderr; json: every record as a JSON line on stdout, for collectors`)
        .choices(LOG_FORMATS)
        .default(config.logFormat)
        .env('WARDEN_LOG_FORMAT'),
    )
    // Commander's own errors (unknown option, bad choice, missing argument) are thrown, not
    // printed: `main` reports them as one `warden: …` line like every other error.
    .configureOutput({ outputError: () => undefined })
    .exitOverride();
  // Made once the options are read (a command's action runs after this hook).
  let logger = createLogger('silent');
  program.hook('preAction', () => {
    logger = createCommandLogger({ level: config.logLevel, format: program.opts<{ logFormat: LogFormat }>().logFormat, wardenHome: config.wardenHome }).logger;
  });

  /** The effective config: read when a command needs it, so a bad file stops only those. */
  const settings = (): WardenConfig => configLoad().loadConfig(program.opts<{ config?: string }>().config ?? process.env.WARDEN_CONFIG).config;
  /** Who decides when `--by` is not given: the config's operator, else $WARDEN_USER / $USER. */
  const approver = (): string => defaultApprover(settings().operator);

  program
    .command('dev')
    .description('Run the embedded Temporal server (with its Web UI) and a worker in one process, until Ctrl-C')
    .action(async () => {
      const safety = settings();
      await sandboxOrStop(safety.confinement?.allowUnconfinedCode === true);
      const target = await session().connectTemporal(config, print);
      const worker = await session().startWorker(target, config, safety, logger);
      print(`Temporal: ${target.address} (namespace ${target.namespace})`);
      if (target.uiUrl) print(`Web UI:   ${target.uiUrl}`);
      const app = await webServe().serveAlongside(target.client, config, safety, { operator: approver(), logger, print });
      print('worker running on task queue "warden"; Ctrl-C to stop');
      await stopOnInterrupt(
        {
          async stop() {
            await app?.close();
            await worker.stop();
          },
        },
        target,
      );
    });

  program
    .command('serve')
    .description('Serve the web app until Ctrl-C: the inbox of waiting gates, and a page per gate with its review package where an approver decides (the links in notifications open it)')
    .option('--host <host>', 'address to listen on (default: the config\'s serve.host, 127.0.0.1)')
    .option('--port <port>', "port to listen on (default: the config's serve.port, 7431; 0 takes a free one)")
    .action(async (flags: { host?: string; port?: string }) => {
      const port = flags.port === undefined ? undefined : Number(flags.port);
      if (port !== undefined && !(Number.isInteger(port) && port >= 0 && port <= 65535)) throw new UserError(`--port must be a port number (0-65535), not ${flags.port}`);
      const app = await webServe().serveWebApp(config, settings(), { host: flags.host, port, operator: approver(), logger, print });
      print(`web app: ${app.url}`);
      print(`your inbox (as ${approver()}; this link is your session: keep it to yourself): ${app.operatorUrl}`);
      print('links in notifications open their gate here; Ctrl-C to stop');
      await stopOnInterrupt({ stop: async () => undefined }, app);
    });

  program
    .command('worker')
    .description('Run a worker against TEMPORAL_ADDRESS (or the embedded server), until Ctrl-C')
    .option('--host <name>', "this worker's host: the stages of intents whose worktree it makes run on it (default: $WARDEN_HOST, else the name made once and kept in the Warden home)")
    .action(async (opts: { host?: string }) => {
      const host = opts.host ?? process.env.WARDEN_HOST;
      if (host !== undefined && !HOST_NAME.test(host)) throw new UserError(`--host must be 1-64 letters, digits, dots, dashes or underscores, not ${JSON.stringify(host)}`);
      const safety = settings();
      await sandboxOrStop(safety.confinement?.allowUnconfinedCode === true);
      const target = await session().connectTemporal(config, print);
      const worker = await session().startWorker(target, config, safety, logger, host);
      const version = worker.worker.shared.options.workerDeploymentOptions?.version;
      print(`worker running against ${target.address} (namespace ${target.namespace}) as host ${worker.host}${version ? `, version ${version.buildId} of deployment ${version.deploymentName}` : ''}; Ctrl-C to stop`);
      await stopOnInterrupt(worker, target);
    });

  program
    .command('run')
    .description('Start an intent and follow it: triage → lld → spec → impl → review → merge gate → merge')
    .option('--repo <path>', 'target git repository (required)')
    .option('--goal <text>', 'what the agent should achieve (required)')
    .option('--id <id>', 'intent id (default: from the goal)')
    .addOption(new Option('--agent <kind>', 'agent: scripted, command (your --cmd), or a CLI Warden drives itself: aider, codex, claude').choices(['scripted', 'command', 'aider', 'codex', 'claude']))
    .option('--model <name>', 'with --agent aider|codex|claude: the model it calls through the gateway (required)')
    .addOption(new Option('--provider <api>', 'with --agent aider: the API of --model (codex: openai; claude: anthropic)').choices(['openai', 'anthropic']))
    .option('--model-url <url>', "with --agent aider|codex|claude: the model's base URL as its provider's SDK takes it: openai with /v1 (e.g. https://api.openai.com/v1), anthropic without (e.g. https://api.anthropic.com); the other form is corrected (default: the provider's own)")
    .option('--script <file>', 'script file for the scripted agent')
    .option('--cmd <command>', "command for the command agent, e.g. 'claude -p'; with --agent aider|codex|claude, the program to run (default: on PATH or under <Warden home>/tools)")
    .addOption(new Option('--prompt-via <how>', 'how the command agent gets the prompt').choices(['stdin', 'arg']))
    .addOption(
      new Option('--sandbox <level>', 'where the command agent runs: bubblewrap when available (auto), bubblewrap, process limits, or none (these two, and auto without bubblewrap, need --allow-unconfined-code)')
        .choices(['auto', 'bubblewrap', 'process', 'none'])
        .default('auto'),
    )
    .addOption(
      new Option('--network <mode>', "what the command agent may reach: none, or host (the worker's whole network: recorded, and the merge gate needs a person); profiles with an upstream model use the gateway")
        .choices(['none', 'host', 'gateway']),
    )
    .option('--allow-unconfined-code', "let agent-written code (the agent's commands, the repo's tests) run outside bubblewrap where it is missing or not asked for: it can then reach everything your user can; recorded, and the merge gate needs a person")
    .addOption(new Option('--test-network <mode>', "what the repo's tests may reach: none (default), or host (the worker's whole network: recorded, and the merge gate needs a person)").choices(['none', 'host']))
    .option('--paths <glob...>', "paths the agent may change (default: the config's run.paths, else everything)")
    .option('--base <branch>', "base branch (default: the config's run.baseBranch, else the repo's current branch)")
    .option('--test-cmd <command>', "command that runs the repo's tests (default: the config's run.testCommand, else npm test if package.json has one; required otherwise, true to run none)")
    .option('--budget <usd>', "this intent's budget in USD (default: the config's limits.budgetUsd, $5 in the default profile; 0 = no limit)")
    .addOption(new Option('--merge-via <how>', "how the approved change reaches the base: local (merged in the repository) or pull-request (pushed to the config's merge.forge, merged there after its reviews and checks) (default: the config's merge.via, else local; where the config merges through pull requests, local is refused)").choices(['local', 'pull-request']))
    .option('--impl-attempts <n>', "edit → test attempts before impl fails (default: the config's limits.attempts.impl, 5 in the default profile)")
    .option('--gate-timeout <duration>', "how long a gate without a timeout of its own waits before its timeout policy (default: the config's limits.gateTimeout, 24h in the default profile; per gate: gates.<gate>.timeout)")
    .option('--env <environment>', 'environment the change is for; production adds a human-only gate before merge')
    .option('--agent-name <name>', "the agent profile's name: its automation-ladder scope (default: its kind)")
    .option('--agent-profile <name>', "a profile from the config's agents for every stage (default: the config's routing, if any)")
    .option('--notify <channel...>', "also notify here of this intent's gates, escalations, budget warnings and ending: a webhook URL, or [slack:|webhook:]$VAR naming the worker's environment variable that holds the URL (config: notify)")
    .option('--resume-from <stage>', 'with --id: run an existing intent again from this stage (same as warden resume --from)')
    .option('--detach', 'start and return at once')
    .option('--approve', 'approve the merge gate without asking (any other gate is asked at a TTY, or waited on)')
    .option('--by <name>', 'who approves (default: the config\'s operator, else $USER)')
    .option('--json', 'print the outcome as JSON')
    .action(async (flags: RunFlags & { detach?: boolean; approve?: boolean; by?: string; json?: boolean; resumeFrom?: string }) => {
      if (flags.resumeFrom !== undefined) {
        if (!flags.id) throw new UserError('--resume-from needs --id ID of the intent to resume');
        return print(await resumeFromCli(config, flags.id, { from: flags.resumeFrom, by: flags.by ?? approver() }));
      }
      const inputs: typeof IntentInput = intentInput();
      inputs.refuseUnusableText(flags);
      const safety = settings();
      await agentCliInstall().installAgentCliOnFirstUse(flags, path.join(config.wardenHome, 'tools'), print);
      const input = inputs.intentFromFlags(flags, process.cwd(), { ...safety, toolsDir: path.join(config.wardenHome, 'tools'), embeddedServer: config.temporalAddress === undefined });
      // The worker this command runs must be able to confine the intent's code (a detached run starts none).
      if (!flags.detach) await sandboxOrStop(input.confinement?.allowUnconfinedCode === true);
      const result = await runIntentModule().runIntent(input, {
        config,
        safety,
        logger,
        detach: Boolean(flags.detach),
        approve: Boolean(flags.approve),
        interactive: Boolean(process.stdin.isTTY) && !flags.json,
        by: flags.by ?? approver(),
        print: flags.json ? () => undefined : print,
      });
      const json = flags.json ? printJson : undefined;
      process.exitCode = report().reportResult(result, json, print);
    });

  program
    .command('revert <id>')
    .description("Undo a merged intent on its base branch: a revert commit on a branch of its own, the tests, then the merge gate (a person's) and the ledger, like any change; refused if later commits conflict")
    .option('--reason <text>', 'why (goes into the revert intent\'s goal)')
    .option('--test-cmd <command>', "command that runs the repo's tests (default: the config's run.testCommand, else npm test if package.json has one)")
    .option('--detach', 'start and return at once')
    .option('--by <name>', 'who approves at the TTY (default: the config\'s operator, else $USER)')
    .option('--json', 'print the outcome as JSON')
    .action(async (id: string, flags: { reason?: string; testCmd?: string; detach?: boolean; by?: string; json?: boolean }) => {
      const safety = settings();
      const input = await revertIntent().revertIntentInput(config, safety, id, { reason: flags.reason, testCmd: flags.testCmd, embeddedServer: config.temporalAddress === undefined });
      const result = await runIntentModule().runIntent(input, {
        config,
        safety,
        logger,
        detach: Boolean(flags.detach),
        approve: false,
        interactive: Boolean(process.stdin.isTTY) && !flags.json,
        by: flags.by ?? approver(),
        print: flags.json ? () => undefined : print,
      });
      process.exitCode = report().reportResult(result, flags.json ? printJson : undefined, print);
    });

  program
    .command('status <id>')
    .description("Show an intent's status and stage, attempts, spend, gate, decisions and tests; once it has ended, how (merged commit, lineage, or why it failed)")
    .option('--json', 'print JSON')
    .action(async (id: string, flags: { json?: boolean }) => {
      const report = await intentStatus().readIntentStatus(config, id);
      if (flags.json) return printJson(report);
      for (const line of intentStatus().renderIntentStatus(report)) print(line);
    });

  program
    .command('list')
    .description('List intents, newest first')
    .addOption(new Option('--status <status>', 'only intents with this status').choices([...INTENT_STATUSES]))
    .option('--limit <n>', 'at most this many', '50')
    .option('--json', 'print JSON')
    .action(async (flags: { status?: string; limit: string; json?: boolean }) => {
      const limit = Number(flags.limit);
      if (!/^\d{1,6}$/.test(flags.limit) || limit < 1) throw new UserError(`--limit must be a whole number from 1, not ${JSON.stringify(flags.limit)}`);
      const target = await session().connectTemporal(config, () => undefined);
      try {
        const rows = await listIntents().listIntents(target.client, { status: flags.status, limit });
        if (flags.json) return printJson(rows);
        if (rows.length === 0) return print('no intents');
        // One line per intent: a goal's newlines must not make rows of their own.
        for (const r of rows) print(`${r.intentId.padEnd(36)} ${String(r.status).padEnd(10)} ${String(r.stage ?? '').padEnd(8)} ${forTerminalLine(r.goal ?? '')}`);
      } finally {
        await target.close();
      }
    });

  program
    .command('approve <id>')
    .description('Approve the gate an intent waits at (with --conditions: approve with conditions for the next stage)')
    .option('--gate <gate>', 'gate to approve (default: the one the intent waits at)')
    .option('--by <name>', 'who approves (default: the config\'s operator, else $USER)')
    .option('--reason <text>', 'why')
    .option('--conditions <text...>', `conditions the next stage must respect (added to its prompt); at the security, production and merge gates, checks run before the merge: ${MERGE_CONDITION_FORMS}`)
    .option('--edited <file>', 'at the lld or spec gate: approve your edit of the document instead (the next stage reads it; the ledger keeps both)')
    .action(async (id: string, flags: { gate?: string; by?: string; reason?: string; conditions?: string[]; edited?: string }) => {
      const withConditions = Boolean(flags.conditions?.length);
      if (withConditions && flags.edited) throw new UserError('give --conditions or --edited, not both');
      const document = flags.edited === undefined ? undefined : readEditedDocument(flags.edited);
      const gate = await decide(config, id, {
        gate: flags.gate,
        decision: document !== undefined ? 'approve-with-edits' : withConditions ? 'approve-with-conditions' : 'approve',
        by: flags.by ?? approver(),
        reason: flags.reason,
        conditions: flags.conditions,
        ...(document !== undefined ? { document } : {}),
      });
      print(`approved the ${gate} gate of ${id}${withConditions ? ` with ${flags.conditions!.length} condition(s)` : document !== undefined ? ` with your edit of its document (${flags.edited})` : ''}`);
      // Approving records the decision; a paused intent or a stopped Warden still goes nowhere.
      for (const line of approvalOutlook().approvalOutlook(id, gate, await approvalOutlook().readApprovalFacts(config, id))) print(line);
    });

  const approverCommand = program.command('approver').description("Approvers' signing keys: decisions signed with them are the only ones that count where unsigned ones are not trusted");
  approverCommand
    .command('init <name>')
    .description("Create NAME's key pair: the private key in your config folder (mode 600), the public key printed for the config's approvers")
    .option('--force', 'replace an existing key')
    .action((name: string, flags: { force?: boolean }) => {
      const { keyPath, publicKey } = approverKeys().initApproverKey(approverKeysDir(), name, { force: flags.force });
      print(`created ${name}'s signing key: ${keyPath} (mode 600: keep it to yourself; Warden's sandboxes never see it)`);
      print(`public key: ${publicKey}`);
      print('add it to the config (warden.config.json), so intents started from now on accept decisions signed with it:');
      print(`  "approvers": { ${JSON.stringify(name)}: { "publicKey": "${publicKey}" } }`);
    });
  approverCommand
    .command('show <name>')
    .description("Print NAME's public key (from the private key in your config folder)")
    .action((name: string) => {
      const key = approverKeys().readApproverKey(approverKeysDir(), name);
      if (!key) throw new UserError(`${name} has no key in ${approverKeysDir()}: create one with warden approver init ${name}`);
      print(approverKeys().publicKeyOf(key));
    });

  program
    .command('reject <id>')
    .description('Reject the gate an intent waits at; nothing is merged')
    .option('--gate <gate>', 'gate to reject (default: the one the intent waits at)')
    .requiredOption('--reason <text>', 'why (required)')
    .option('--by <name>', 'who rejects (default: the config\'s operator, else $USER)')
    .action(async (id: string, flags: { gate?: string; by?: string; reason: string }) => {
      const gate = await decide(config, id, { gate: flags.gate, decision: 'reject', by: flags.by ?? approver(), reason: flags.reason });
      print(`rejected the ${gate} gate of ${id}`);
    });

  program
    .command('request-changes <id>')
    .description('Send the intent back from its gate: the stage before it (lld or spec; impl and review before merge) runs again with your comments, within its attempts')
    .option('--gate <gate>', 'gate to answer (default: the one the intent waits at)')
    .requiredOption('--reason <text>', 'the changes to make (required)')
    .option('--by <name>', 'who asks (default: the config\'s operator, else $USER)')
    .action(async (id: string, flags: { gate?: string; by?: string; reason: string }) => {
      const gate = await decide(config, id, { gate: flags.gate, decision: 'request-changes', by: flags.by ?? approver(), reason: flags.reason });
      print(`asked for changes at the ${gate} gate of ${id}: the stage runs again with your comments`);
    });

  program
    .command('defer <id>')
    .description("Give the gate more time (once): its timeout moves by the gate's defer period")
    .option('--gate <gate>', 'gate to defer (default: the one the intent waits at)')
    .option('--by <name>', 'who defers (default: the config\'s operator, else $USER)')
    .option('--reason <text>', 'why')
    .action(async (id: string, flags: { gate?: string; by?: string; reason?: string }) => {
      const gate = await decide(config, id, { gate: flags.gate, decision: 'defer', by: flags.by ?? approver(), reason: flags.reason });
      print(`deferred the ${gate} gate of ${id}`);
    });

  program
    .command('gates [id]')
    .description('Every gate waiting for a decision, across intents, with its age and timeout; with an ID, that gate in full (its review package too)')
    .option('--json', 'print JSON')
    .action(async (id: string | undefined, flags: { json?: boolean }) => {
      const target = await session().connectTemporal(config, () => undefined);
      try {
        if (id !== undefined) {
          const pending = (await intents().queryState(target.client, id)).pendingGate;
          if (flags.json) return printJson(pending ?? null);
          if (!pending) return print(`intent ${id} is not waiting at a gate`);
          return print(gatePrompt().renderPendingGate(id, pending));
        }
        const rows = await listIntents().waitingGates(target.client);
        if (flags.json) return printJson(rows);
        if (rows.length === 0) return print('no gate is waiting');
        for (const r of rows) print(`${r.intentId.padEnd(36)} ${r.gate.padEnd(13)} waiting ${r.ageMinutes} min, times out ${r.timeoutAt}  ${forTerminalLine(r.prompt)}`);
      } finally {
        await target.close();
      }
    });

  addLadderCommands(program, config, settings, approver, { print, printJson });
  addLedgerCommands(program, config, { print, printJson }, settings);
  addLedgerChainCommands(program, config, { print, printJson });
  addRecordingCommand(program, config, { print, printJson });
  addLabelCommand(program, config, settings, approver, { print, printJson });
  addEvalCommand(program, config, settings, () => logger, { print, printJson });
  addReplayCommand(program, config, { print, printJson, settings, logger: () => logger });
  addStopCommands(program, config, { print, printJson, defaultUser: approver });
  addWorkerVersionCommands(program, config, { print, printJson }, settings);
  addResumeCommand(program, config, { print, defaultUser: approver });
  addInitCommand(program, print);
  addConfigCommands(program, { print, printJson }, () => program.opts<{ config?: string }>().config ?? process.env.WARDEN_CONFIG);

  const check = program.command('check').description('Run a safety check by hand');
  addCheckStubsCommand(check, print, printJson);
  check
    .command('cascade')
    .option('--goal <text>', "the intent's goal: work the answer reaches for beyond it counts against it")
    .option('--paths <paths...>', "the intent's declared paths (space- or comma-separated): changes reported outside them count against it")
    .option('--json', 'print JSON')
    .description('Score an agent answer on stdin for cascade risk (offers or starts of unasked work, changes outside the intent); exits 2 (block) at HIGH or CRITICAL, else 0 (allow), as a hook')
    .action(async (flags: { json?: boolean; goal?: string; paths?: string[] }) => {
      const paths = (flags.paths ?? []).flatMap((p) => p.split(',')).map((p) => p.trim()).filter(Boolean);
      if (flags.goal !== undefined && !flags.goal.trim()) throw new UserError('--goal is empty: give the intent\'s goal, or leave the option out');
      const text = await readStdin();
      // The model a worker kept, if there is one: training it again would cost seconds per check.
      await cascadeModelCache().readyCascadeModel(logger);
      const verdict = cascadeDetector().detectCascade(text, { ...(flags.goal ? { goal: flags.goal } : {}), ...(paths.length > 0 ? { paths } : {}) });
      // As a hook: 0 allows, 2 blocks. HIGH and CRITICAL are the levels that stop an intent.
      process.exitCode = cascadeDetector().cascadeAtLeast(verdict.level, 'HIGH') ? CASCADE_BLOCK_EXIT : 0;
      if (flags.json) return printJson(verdict);
      print(`${verdict.level} (score ${verdict.score.toFixed(2)})${process.exitCode ? ': blocks' : ''}`);
      for (const m of verdict.matches) print(`  ${m.category}/${m.pattern} (${m.strength}): "${m.excerpt}"`);
    });

  program
    .command('pause <id>')
    .description('Hold an intent before its next stage (the running one finishes)')
    .option('--by <name>', 'who pauses (default: $USER)')
    .option('--reason <text>', 'why')
    .option('--timeout <duration>', "how long the pause may hold it before the config's limits.onPauseTimeout applies (default: limits.pauseTimeout, 24h)")
    .action(async (id: string, flags: { by?: string; reason?: string; timeout?: string }) => {
      if (flags.timeout !== undefined && !(DURATION_PATTERN.test(flags.timeout) && parseDuration(flags.timeout) > 0)) throw new UserError(`--timeout must be a duration such as 30m, 2h or 1d, not ${flags.timeout}`);
      await signalRunning(config, id, (handle) => handle.signal(messages().pauseSignal, { by: flags.by ?? approver(), reason: flags.reason, ...(flags.timeout ? { timeout: flags.timeout } : {}) }));
      print(`paused ${id}: it stops before its next stage (warden resume-run ${id} lets it go on)`);
    });

  program
    .command('resume-run <id>')
    .description('Let a paused intent go on')
    .option('--by <name>', 'who resumes (default: $USER)')
    .action(async (id: string, flags: { by?: string }) => {
      await signalRunning(config, id, (handle) => handle.signal(messages().resumeSignal, { by: flags.by ?? approver() }));
      print(`resumed ${id}`);
    });

  program
    .command('demo')
    .description("The whole pipeline on a sample repository it creates under the Warden home, with a scripted agent (no account or key): triage to a merge, the merge gate approved for you")
    .action(async () => {
      process.exitCode = await demo().runDemo(config, logger, print);
    });

  program
    .command('doctor')
    .description('Check what this machine has and lacks for running an intent (Node, git, the sandbox, Temporal, PostgreSQL, disk, agent CLIs, provider keys, the web app), each with its fix; exits 0 only when an intent can run')
    .option('--fix', 'install what can be installed here: bubblewrap (as root, with apt-get), the Temporal CLI and the embedded PostgreSQL')
    .option('--json', 'print JSON')
    .action(async (flags: { fix?: boolean; json?: boolean }) => {
      const report = await doctor().runDoctor({ config, configFile: program.opts<{ config?: string }>().config ?? process.env.WARDEN_CONFIG, fix: Boolean(flags.fix), log: flags.json ? () => undefined : print });
      if (flags.json) printJson(report);
      else for (const line of doctor().renderDoctor(report)) print(line);
      process.exitCode = report.ok ? 0 : 1;
    });

  return program;
}

/**
 * Decides the gate `id` waits at (or `raw.gate`, checked against it); returns the gate. Run
 * inside an agent's process (WARDEN_AGENT_SESSION set), the decision says so and is refused.
 */
/** Keeps a worker running until Ctrl-C, then stops it and its Temporal target (`warden dev`, `warden worker`). */
async function stopOnInterrupt(worker: { stop(): Promise<void> }, target: { close(): Promise<void> }): Promise<void> {
  const interrupted = await untilInterrupted(print);
  try {
    await worker.stop();
    await target.close();
  } finally {
    interrupted.dispose();
  }
}

/** The edited document for `warden approve --edited FILE`: it must exist and fit in a decision. */
function readEditedDocument(file: string): string {
  if (!existsSync(file)) throw new UserError(`--edited ${file}: no such file`);
  const text = readFileSync(file, 'utf8');
  if (!text.trim()) throw new UserError(`--edited ${file}: the file is empty`);
  const { MAX_DOCUMENT_LENGTH } = decisions();
  if (text.length > MAX_DOCUMENT_LENGTH) throw new UserError(`--edited ${file}: longer than ${MAX_DOCUMENT_LENGTH} characters`);
  return text;
}

async function decide(config: RuntimeConfig, id: string, raw: Record<string, unknown> & { gate?: string }): Promise<string> {
  if (raw.gate !== undefined && !isGateName(raw.gate)) {
    throw new UserError(`unknown gate "${raw.gate}": the gates are ${GATE_KINDS.join(', ')}, and custom gates' ids (2-40 lower-case letters, digits or dashes)`);
  }
  const agentSession = process.env[decisions().AGENT_SESSION_VARIABLE];
  const target = await session().connectTemporal(config, () => undefined);
  try {
    const gate = raw.gate ?? (await intents().pendingGateOf(target.client, id));
    const parsed = decisions().parseDecision({ ...raw, gate, ...(agentSession ? { agentSession } : {}) });
    if (!parsed.ok) throw new UserError(parsed.problems);
    await intents().sendDecision(target.client, id, parsed.decision);
    return gate;
  } finally {
    await target.close();
  }
}

/** Sends something to a running intent, with a clear error when it is not running. */
async function signalRunning(config: RuntimeConfig, id: string, send: (handle: ReturnType<typeof Intents.intentHandle>) => Promise<void>): Promise<void> {
  const target = await session().connectTemporal(config, () => undefined);
  try {
    const handle = intents().intentHandle(target.client, id);
    await intents().describeRunning(handle, id);
    await send(handle);
  } finally {
    await target.close();
  }
}

async function readStdin(): Promise<string> {
  if (process.stdin.isTTY) throw new UserError('pipe the text to check into stdin, e.g. warden check cascade < answer.md');
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * `warden … | head` closes the pipe early: the next write fails with EPIPE, which Node raises as
 * an unhandled 'error' event (a stack trace). The reader has all it wanted: end quietly.
 */
let pipeGuarded = false;
function quietOnClosedPipe(): void {
  if (pipeGuarded) return;
  pipeGuarded = true;
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'EPIPE') process.exit(typeof process.exitCode === 'number' ? process.exitCode : 0);
      throw error;
    });
  }
}

/** Runs the CLI in this process; typed errors become one line on stderr and an exit code. */
export async function main(argv: string[]): Promise<number> {
  quietOnClosedPipe();
  exitOnInterrupt();
  let program: Command | undefined;
  try {
    // Inside the try: bad TEMPORAL_* variables are reported like any other bad input.
    program = buildProgram();
    await program.parseAsync(argv);
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (error) {
    const e = error as { code?: string; exitCode?: number; message?: string };
    if (typeof e.code === 'string' && e.code.startsWith('commander.')) {
      if (e.code === 'commander.helpDisplayed' || e.code === 'commander.version' || e.code === 'commander.help') return 0;
      printError(`${commanderMessage(e.message ?? e.code)} (see ${helpFor(program, argv)})`);
      return 2;
    }
    if (error instanceof UserError) {
      printError(error.message);
      return error.exitCode;
    }
    printError((error as Error).message ?? String(error));
    return 1;
  }
}

/** Commander's message ("error: unknown option '--x'\n(Did you mean --y?)") as one line, without its prefix. */
export function commanderMessage(message: string): string {
  return message
    .replace(/^error:\s*/, '')
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean)
    .join(' ');
}

/** `warden run --help` when the words name a command, else `warden --help`. */
function helpFor(program: Command | undefined, argv: string[]): string {
  const words: string[] = [];
  let commands = program?.commands ?? [];
  for (const arg of argv.slice(2)) {
    const next = commands.find((c) => c.name() === arg || c.aliases().includes(arg));
    if (!next) break;
    words.push(next.name());
    commands = next.commands;
  }
  return ['warden', ...words, '--help'].join(' ');
}

if (require.main === module) {
  main(process.argv).then(
    (code) => process.exit(code),
    () => process.exit(1),
  );
}
