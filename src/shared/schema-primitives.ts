import { z } from 'zod';
import { textProblem } from './control-characters';
import { DURATION_PATTERN, parseDuration } from './duration';
import { globProblem } from './glob';
import { GATE_KINDS } from './gates';
import { RISK_CLASSES } from './risk';

/*
 * The zod schemas of Warden's shared vocabulary, for the client, the config file and the
 * activities. Workflow code uses the plain modules they are built from (risk.ts, duration.ts,
 * gates.ts) and never zod: every workflow the worker caches evaluates its own copy of the modules
 * it imports, and zod with the intent schemas costs over 1 MB a workflow.
 */

export const RiskClassSchema = z.enum(RISK_CLASSES);

/** A duration string as intents and config files write it: `90s`, `30m`, `24h`, `2d`. */
export const DurationSchema = z.string().regex(DURATION_PATTERN, 'a duration such as 30s, 15m, 24h or 2d');

/** A duration that must be longer than zero: a timeout of 0 s fails everything at once. */
export const PositiveDurationSchema = DurationSchema.refine((d) => !DurationSchema.safeParse(d).success || parseDuration(d) > 0, 'must be longer than 0');

/** A USD amount as an exact decimal string. `"0"` for a budget means unlimited — only when written. */
export const UsdSchema = z.string().regex(/^\d{1,8}(\.\d{1,6})?$/, 'a USD amount such as "5" or "12.50"');

export const GateKindSchema = z.enum(GATE_KINDS);

/**
 * A glob of repository paths (`src/**`, `!docs/**`): relative to the repository root, inside it,
 * and valid glob syntax. Every paths list an intent or the config holds is made of these, so the
 * client refuses a bad one before anything starts and the worker's own check agrees.
 */
export const PathGlobSchema = z
  .string()
  .min(1)
  .max(500)
  .superRefine((glob, ctx) => {
    const problem = textProblem(glob) ?? globProblem(glob);
    if (problem) ctx.addIssue({ code: 'custom', message: `${JSON.stringify(glob)} ${problem}` });
  });

/** Text a person gave (a goal): valid UTF-8, no control characters but newline and tab. */
export const PlainTextSchema = z.string().superRefine((text, ctx) => {
  const problem = textProblem(text);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
});

/** Turns zod issues into one readable line: `field: problem; field: problem`. */
export function describeIssues(error: z.ZodError): string {
  return error.issues
    .map((issue) => (issue.path.length ? `${issue.path.join('.')}: ${issue.message}` : issue.message))
    .join('; ');
}
