import { PROFILE_DEFAULTS } from '../config/profiles';
import { PROFILES, type ProfileName } from '../config/names';
import type { Found } from './repo-detection';
import type { ForgeKind } from '../shared/forge';

/** What a new config file is written from. */
export interface NewConfig {
  /** Where the file's `$schema` points, relative to the file. */
  readonly schemaRef: string;
  readonly profile: ProfileName;
  readonly testCommand?: Found;
  readonly baseBranch?: Found;
  /** The name the approvers example uses. */
  readonly approver: string;
  /** The forge origin is on, when it has one; `use` writes the pull-request merge out rather than commented. */
  readonly forge?: { readonly kind?: ForgeKind; readonly because: string; readonly use: boolean };
}

const json = (value: unknown): string => JSON.stringify(value);

/** A flat object on one line, spaced as people write it: `{ "timeout": "24h" }`. */
const inline = (value: object): string => `{ ${Object.entries(value).map(([key, v]) => `${json(key)}: ${json(v)}`).join(', ')} }`;

/**
 * The text of a new warden.config.json: the repository's own settings (its test command and base
 * branch), and the profile's budgets, gates and an agent profile as commented-out lines with the
 * profile's values. Written out, a value would stay when the profile changes; commented out, the
 * file shows it and a user uncomments what they mean to change. Every commented-out line is
 * valid once uncommented (trailing commas are allowed), so that is all it takes.
 */
export function newConfigText(settings: NewConfig): string {
  const profile = PROFILE_DEFAULTS[settings.profile];
  const { testCommand, baseBranch } = settings;
  const gates = Object.entries(profile.gates).map(([gate, value]) => `    // ${json(gate)}: ${inline(value)},`);
  const lines = [
    '{',
    "  // Warden's settings for this repository, read by the warden commands run in this folder.",
    '  // JSON with comments. What is not written here comes from the profile; a commented-out',
    "  // line shows the profile's value: uncomment it to change it. `warden config check`",
    '  // validates this file and prints the settings in effect.',
    '',
    '  // The JSON Schema your editor completes and checks this file with (`warden config schema` prints it).',
    `  "$schema": ${json(settings.schemaRef)},`,
    '',
    `  // Where every setting starts from: one of ${PROFILES.join(', ')}.`,
    `  "profile": ${json(settings.profile)},`,
    '',
    '  // What `warden run` takes when its flags do not say.',
    '  "run": {',
    ...(testCommand
      ? ['    // The command that runs the tests: impl tries again until they pass.', `    // Found from ${testCommand.because}.`, `    "testCommand": ${json(testCommand.value)},`]
      : [
          "    // Set the command that runs this repository's tests: none was found (no package.json test",
          '    // script, pytest settings, go.mod, Cargo.toml or Makefile test target). Until it is set,',
          "    // `warden run` needs --test-cmd ('true' runs no tests, and accepts changes none has checked).",
          '    // "testCommand": "make test",',
        ]),
    ...(baseBranch
      ? [`    // The branch intents start from and merge into (found: ${baseBranch.because}).`, `    "baseBranch": ${json(baseBranch.value)},`]
      : [
          '    // The branch intents start from and merge into: none was found (HEAD is detached and',
          '    // origin names no HEAD). Until it is set, `warden run` takes the branch checked out.',
          '    // "baseBranch": "main",',
        ]),
    '    // Globs of the paths agents may change (default: the whole repository).',
    '    // "paths": ["src/**", "test/**"],',
    '  },',
    '',
    '  // Money, as USD in strings; "0" is no limit.',
    '  "limits": {',
    '    // All the stages of one intent.',
    `    // "budgetUsd": ${json(profile.limits.budgetUsd)},`,
    '  },',
    '  "worker": {',
    '    // All intents in a day, and each agent profile in a day.',
    `    // "dayBudgetUsd": ${json(profile.worker.dayBudgetUsd)},`,
    `    // "agentDayBudgetUsd": ${json(profile.worker.agentDayBudgetUsd)},`,
    '  },',
    '',
    `  // Gates: how long each waits for a decision (default: ${profile.limits.gateTimeout}), and who may decide it`,
    '  // (approvers; default: anyone but the agent).',
    '  "gates": {',
    ...gates,
    `    // "merge": { "approvers": [${json(settings.approver)}] },`,
    '  },',
    '',
    ...forgeLines(settings),
    '  // Who does the work: `warden run --agent …` names an agent for one intent; a profile here,',
    '  // routed to every stage, names it for all.',
    ...(profile.mode === 'development'
      ? ['  // This profile runs in development mode, which takes only local models: a paid cloud', '  // model, as here, needs "mode": "production".']
      : ['  // This profile runs in production mode, which takes paid cloud models such as this one.']),
    '  // "agents": {',
    '  //   "claude": { "kind": "command", "cli": "claude", "command": "claude", "upstream": { "kind": "anthropic", "model": "claude-sonnet-4-5", "apiKeyEnv": ["ANTHROPIC_API_KEY"] } },',
    '  // },',
    '  // "routing": { "default": "claude" },',
    '}',
  ];
  return `${lines.join('\n')}\n`;
}

/**
 * The merge through a pull request on the team's forge: written out when asked for (`warden init
 * --forge KIND`), else as commented-out lines when origin is on a forge.
 */
function forgeLines(settings: NewConfig): string[] {
  const { forge, approver } = settings;
  if (!forge) return [];
  const kind = forge.kind ?? 'gitea';
  const prefix = forge.use ? '' : '// ';
  return [
    `  // The merge gate as a pull request on your forge (${forge.because}): its reviewers decide, its`,
    "  // required checks gate the merge. The worker's token is in WARDEN_FORGE_TOKEN; map each",
    "  // reviewer's forge login to a Warden approver. `warden doctor` checks the token (docs/forge.md).",
    `  ${prefix}"merge": {`,
    `  ${prefix}  "via": "pull-request",`,
    `  ${prefix}  "method": "merge",`,
    `  ${prefix}  "forge": { "kind": ${json(kind)}, "reviewers": { ${json(`${approver}-on-the-forge`)}: ${json(approver)} } },`,
    `  ${prefix}},`,
    '',
  ];
}
