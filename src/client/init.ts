import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import path from 'node:path';
import { Option, type Command } from 'commander';
import { CONFIG_FILE_NAMES, CONFIG_SCHEMA_FILE, PROFILES, type ProfileName } from '../config/names';
import { UserError } from '../shared/errors';
import type { Found } from './repo-detection';
import { FORGE_KINDS, type ForgeKind } from '../shared/forge';
import type * as JsonSchemaModule from '../config/json-schema';
import type * as ConfigTemplateModule from './config-template';
import type * as GitOutputModule from './git-output';
import type * as RepoDetectionModule from './repo-detection';

/* eslint-disable @typescript-eslint/no-require-imports -- loaded when a command runs (see cli.ts) */
const jsonSchema = () => require('../config/json-schema') as typeof JsonSchemaModule;
const configTemplate = () => require('./config-template') as typeof ConfigTemplateModule;
const gitOutput = () => require('./git-output') as typeof GitOutputModule;
const repoDetection = () => require('./repo-detection') as typeof RepoDetectionModule;
/* eslint-enable @typescript-eslint/no-require-imports */

/** The file `warden init` writes: the first name the loader looks for. */
export const INIT_CONFIG_FILE = CONFIG_FILE_NAMES[0];

/** The .gitignore line that keeps Warden's state (its databases, logs, tools) out of git. */
export const STATE_IGNORE_LINE = '.warden/';

/** Lines that already ignore Warden's state folder at the top of a repository. */
const STATE_IGNORES = new Set(['.warden', '.warden/', '/.warden', '/.warden/', '.warden/*', '/.warden/*']);

/** Where the package holds the schema once installed in a repository's node_modules (`npm run build` makes it). */
export const INSTALLED_SCHEMA = ['node_modules', 'warden', 'dist', CONFIG_SCHEMA_FILE] as const;

/** Where `warden init` writes a copy of the schema when Warden is not installed in the repository. */
export const STATE_SCHEMA = ['.warden', CONFIG_SCHEMA_FILE] as const;

export interface InitOptions {
  readonly force?: boolean;
  readonly profile?: ProfileName;
  /** Merge through pull requests on this kind of forge (`--forge`). */
  readonly forge?: ForgeKind;
}

/** What `warden init` did. */
export interface InitReport {
  readonly repo: string;
  readonly configFile: string;
  /** An existing config file was replaced (--force). */
  readonly replaced: boolean;
  /** The config's `$schema`, relative to it. */
  readonly schemaRef: string;
  /** The copy of the schema written for it, when Warden is not installed in the repository. */
  readonly schemaFile?: string;
  readonly gitignore: 'created' | 'added' | 'present';
  readonly testCommand?: Found;
  readonly baseBranch?: Found;
  /** The forge origin is on, and whether the config merges through its pull requests. */
  readonly forge?: { readonly kind?: ForgeKind; readonly because: string; readonly use: boolean };
  /** Other config files that the new one now comes before (warden.config.ts). */
  readonly shadowed: readonly string[];
}

/**
 * Sets Warden up in the git repository that holds `dir`: writes warden.config.json at its top
 * (with the test command and base branch found there), points its `$schema` at the config's
 * JSON Schema, and ignores Warden's state folder in .gitignore. Refuses a folder outside git,
 * and an existing config unless `force`; nothing is written before every check has passed.
 */
export function initRepository(dir: string, options: InitOptions = {}): InitReport {
  if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new UserError(`folder not found: ${dir}`);
  const repo = gitOutput().gitOut(dir, ['rev-parse', '--show-toplevel']);
  if (!repo) throw new UserError(`not a git repository: ${dir} (warden init sets Warden up in one: run git init first)`);
  const configFile = path.join(repo, INIT_CONFIG_FILE);
  const existing = CONFIG_FILE_NAMES.map((name) => path.join(repo, name)).filter((file) => existsSync(file));
  if (existing.length > 0 && !options.force) {
    throw new UserError(`${existing.join(' and ')} already exists: warden init leaves it as it is (--force replaces it with a new ${INIT_CONFIG_FILE})`);
  }
  const installed = path.join(repo, ...INSTALLED_SCHEMA);
  const schemaFile = existsSync(installed) ? undefined : path.join(repo, ...STATE_SCHEMA);
  const schemaRef = `./${(schemaFile ? STATE_SCHEMA : INSTALLED_SCHEMA).join('/')}`;
  const testCommand = repoDetection().findTestCommand(repo);
  const baseBranch = repoDetection().findBaseBranch(repo);
  const found = repoDetection().findForge(repo);
  if (options.forge && !found) throw new UserError(`--forge ${options.forge}: ${repo} has no remote origin to push pull requests to (git remote add origin URL first)`);
  const forge = options.forge ? { kind: options.forge, because: found!.because, use: true } : found ? { ...(found.kind ? { kind: found.kind } : {}), because: found.because, use: false } : undefined;
  const text = configTemplate().newConfigText({ schemaRef, profile: options.profile ?? 'default', testCommand, baseBranch, approver: process.env.USER || userInfo().username, ...(forge ? { forge } : {}) });
  writeFileSync(configFile, text, { flag: options.force ? 'w' : 'wx' });
  if (schemaFile) {
    mkdirSync(path.dirname(schemaFile), { recursive: true });
    writeFileSync(schemaFile, jsonSchema().configJsonSchemaText());
  }
  return {
    repo,
    configFile,
    replaced: existing.includes(configFile),
    schemaRef,
    ...(schemaFile ? { schemaFile } : {}),
    gitignore: ignoreState(repo),
    ...(testCommand ? { testCommand } : {}),
    ...(baseBranch ? { baseBranch } : {}),
    ...(forge ? { forge } : {}),
    shadowed: existing.filter((file) => file !== configFile),
  };
}

/** Adds the state folder to the repository's .gitignore, unless a line there already ignores it. */
function ignoreState(repo: string): InitReport['gitignore'] {
  const file = path.join(repo, '.gitignore');
  const entry = ["# Warden's state: its databases, logs and tools (warden init)", STATE_IGNORE_LINE];
  if (!existsSync(file)) {
    writeFileSync(file, `${entry.join('\n')}\n`);
    return 'created';
  }
  const text = readFileSync(file, 'utf8');
  if (text.split(/\r?\n/).some((line) => STATE_IGNORES.has(line.trim()))) return 'present';
  const eol = text.includes('\r\n') ? '\r\n' : '\n';
  writeFileSync(file, `${text}${text === '' || text.endsWith('\n') ? '' : eol}${entry.join(eol)}${eol}`);
  return 'added';
}

/** What `warden init` says it did, and what to run next. */
export function describeInit(report: InitReport, cwd: string): string[] {
  const shown = (file: string): string => path.relative(cwd, file) || '.';
  const lines = [`${report.replaced ? 'replaced' : 'wrote'} ${shown(report.configFile)}`];
  lines.push(
    report.testCommand
      ? `  tests: ${report.testCommand.value} (found from ${report.testCommand.because})`
      : '  tests: no test command found: set run.testCommand in it (or give warden run --test-cmd)',
  );
  lines.push(report.baseBranch ? `  base branch: ${report.baseBranch.value} (${report.baseBranch.because})` : '  base branch: none found: set run.baseBranch in it (else warden run takes the branch checked out)');
  if (report.forge) {
    lines.push(
      report.forge.use
        ? `  merge: through pull requests on ${report.forge.kind} (${report.forge.because}); map the reviewers in merge.forge.reviewers, put the token in WARDEN_FORGE_TOKEN`
        : `  merge: local; ${report.forge.because}: to merge through its pull requests, uncomment merge in the config (or warden init --force --forge ${report.forge.kind ?? 'KIND'})`,
    );
  }
  lines.push(
    report.schemaFile
      ? `  $schema: ${report.schemaRef}, written now: Warden is not installed in this repository's node_modules (warden config schema prints it again)`
      : `  $schema: ${report.schemaRef}, the schema of the Warden installed here`,
  );
  for (const file of report.shadowed) lines.push(`  ${shown(file)} is still there, but ${INIT_CONFIG_FILE} is read first`);
  lines.push(
    {
      created: `created ${shown(path.join(report.repo, '.gitignore'))} with ${STATE_IGNORE_LINE}: Warden's state stays out of git`,
      added: `added ${STATE_IGNORE_LINE} to ${shown(path.join(report.repo, '.gitignore'))}: Warden's state stays out of git`,
      present: `${shown(path.join(report.repo, '.gitignore'))} already ignores ${STATE_IGNORE_LINE}`,
    }[report.gitignore],
  );
  lines.push('next:');
  // Warden reads the config in the folder it runs in.
  if (path.resolve(cwd) !== path.resolve(report.repo)) lines.push(`  cd ${report.repo}`);
  lines.push(`  warden doctor                       check that this machine can run intents${report.forge?.use ? ", and the forge's token" : ''}`);
  lines.push('  warden run --repo . --goal "..."    start an intent in this repository');
  return lines;
}

/** `warden init`. */
export function addInitCommand(program: Command, print: (line: string) => void): void {
  program
    .command('init')
    .summary('Set Warden up in a git repository: a commented warden.config.json, its JSON Schema for editors, .warden/ in .gitignore')
    .description(
      "Set Warden up in a git repository: write warden.config.json at its top (JSON with comments: the test command and base branch found there; the profile's budgets and gates, and an agent profile, as lines to uncomment), " +
        "point its $schema at the config's JSON Schema for editors (the one of Warden installed in the repository's node_modules, else a copy written under .warden/), and add .warden/ (Warden's state) to .gitignore. " +
        'Refuses a folder outside git, and an existing config without --force',
    )
    .option('--repo <path>', 'the repository (default: the one this folder is in)')
    .addOption(new Option('--profile <name>', 'the profile the config starts from').choices([...PROFILES]).default('default'))
    .option('--force', 'replace an existing config file (without it, warden init refuses one: exit 2)')
    .addOption(new Option('--forge <kind>', "merge through pull requests on origin's forge of this kind (without it, the merge section is written commented out when origin is on a forge)").choices([...FORGE_KINDS]))
    .action((flags: { repo?: string; profile: ProfileName; force?: boolean; forge?: ForgeKind }) => {
      const report = initRepository(path.resolve(flags.repo ?? '.'), { force: flags.force, profile: flags.profile, ...(flags.forge ? { forge: flags.forge } : {}) });
      for (const line of describeInit(report, process.cwd())) print(line);
    });
}
