/**
 * What the secret scan found in a change, as it travels from the activity to the workflow, the
 * ledger and the review package: where and by which rule, never the value. Pure data and text:
 * the workflow sandbox imports it too (the scan itself is src/safety/secret-scan.ts).
 */

/** One secret found in a file: where and by which rule; its value is never kept. */
export interface SecretFinding {
  /** Worktree-relative, `/`-separated. */
  readonly path: string;
  /** 1-based line where the secret starts. */
  readonly line: number;
  /** The rule and what it found, e.g. `aws/AWSAccessKeyID`, `privatekey/PrivateKey`. */
  readonly rule: string;
}

/** A finding a person allowed (the config's `secrets.allow`), with the reason they gave. */
export interface AllowedSecret extends SecretFinding {
  readonly reason: string;
}

/** The scan of one step's change: findings that held the change back, and those allowed. */
export interface SecretScan {
  readonly held: readonly SecretFinding[];
  readonly allowed: readonly AllowedSecret[];
}

/** `path:line (rule)`: how a finding is shown everywhere, without its value. */
export function describeSecretFinding(f: SecretFinding): string {
  return `${f.path}:${f.line} (${f.rule})`;
}

/** What the next impl attempt is told about secrets held back from what `who` wrote. */
export function secretRepairPrompt(held: readonly SecretFinding[], who: string): string {
  const shown = held.slice(0, 20).map((f) => `- ${describeSecretFinding(f)}`);
  const more = held.length > shown.length ? [`- … and ${held.length - shown.length} more`] : [];
  return [
    `The secret scan found credentials in what ${who} wrote. Those files were put back as they were before, and nothing of them was committed:`,
    ...shown,
    ...more,
    'Make the change again without any credential in a file: read keys and tokens from the environment or a secret store at run time, and use obvious placeholders in examples and tests.',
  ].join('\n');
}
