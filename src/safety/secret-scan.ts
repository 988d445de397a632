/**
 * The secret scan of what an agent (or its tests) wrote: cloud access keys, private key blocks
 * and the common token formats, by secretlint's recommended rule set (a maintained one, updated
 * with the package, rather than a list of our own). A finding names the file, the line and the
 * rule, never the value: it goes into prompts, the ledger and the review package.
 *
 * What a person allowed (the config's `secrets.allow`, carried by the intent) is told apart, not
 * hidden: each use is a row of its own.
 *
 * Not workflow code (the rules run in the activity); what it returns is in secret-findings.ts.
 */
import { lintSource } from '@secretlint/core';
import { secretLintProfiler } from '@secretlint/profiler';
import { rules as recommendedRules } from '@secretlint/secretlint-rule-preset-recommend';
import type { SecretLintCoreConfig } from '@secretlint/types';
import { matchGlob } from '../shared/glob';
import type { SecretAllowance } from '../shared/intent';
import type { AllowedSecret, SecretFinding, SecretScan } from '../shared/secret-findings';

// secretlint's profiler keeps a performance mark of every rule run for ever, and measures each one
// by name among all of them: a worker would scan slower with every change, and grow. Off.
secretLintProfiler.mark = () => undefined;

/** Files larger than this are not scanned (a data set, a build); docs/trust.md says so. */
export const MAX_SECRET_SCAN_BYTES = 16 * 1024 * 1024;

const RULE_PREFIX = '@secretlint/secretlint-rule-';

/**
 * The recommended rules, each on its own, with two changes: AWS access key ids are looked for too
 * (off by default there, as an id alone grants nothing; here an id beside its secret in a change
 * is what leaks), and the comment filter is left out, so a `secretlint-disable` comment the agent
 * wrote hides nothing (a preset's `disabled` does not reach it).
 */
const RULE_OPTIONS: Readonly<Record<string, object>> = { [`${RULE_PREFIX}aws`]: { enableIDScanRule: true } };
const LEFT_OUT = new Set([`${RULE_PREFIX}filter-comments`]);
const CONFIG: SecretLintCoreConfig = {
  rules: recommendedRules
    .filter((rule) => !LEFT_OUT.has(rule.meta.id))
    .map((rule) => ({ id: rule.meta.id, rule, ...(RULE_OPTIONS[rule.meta.id] ? { options: RULE_OPTIONS[rule.meta.id] } : {}) })),
};

/**
 * The secrets in one file's text, one finding per line and rule. Binary content is scanned as
 * text too: a NUL byte in front of a key must not hide it.
 */
export async function scanTextForSecrets(filePath: string, content: string): Promise<SecretFinding[]> {
  const result = await lintSource({
    source: { filePath, content, ext: extensionOf(filePath), contentType: 'text' },
    options: { config: CONFIG, maskSecrets: true, noPhysicFilePath: true },
  });
  const seen = new Set<string>();
  const findings: SecretFinding[] = [];
  for (const message of result.messages) {
    if (message.type !== 'message') continue;
    const finding = { path: filePath, line: message.loc.start.line, rule: `${message.ruleId.replace(RULE_PREFIX, '')}/${message.messageId}` };
    const key = `${finding.line}:${finding.rule}`;
    if (seen.has(key)) continue;
    seen.add(key);
    findings.push(finding);
  }
  return findings.sort((a, b) => a.line - b.line || (a.rule < b.rule ? -1 : 1));
}

/** Splits findings into those held back and those a person allowed (the first allowance whose glob matches the path). */
export function applyAllowances(findings: readonly SecretFinding[], allowances: readonly SecretAllowance[]): SecretScan {
  const held: SecretFinding[] = [];
  const allowed: AllowedSecret[] = [];
  for (const finding of findings) {
    const allowance = allowances.find((a) => a.paths.some((glob) => matchGlob(glob, finding.path)));
    if (allowance) allowed.push({ ...finding, reason: allowance.reason });
    else held.push(finding);
  }
  return { held, allowed };
}

function extensionOf(filePath: string): string {
  const base = filePath.slice(filePath.lastIndexOf('/') + 1);
  const dot = base.lastIndexOf('.');
  return dot > 0 ? base.slice(dot) : '';
}
