import { z } from 'zod';
import { FORGE_KINDS, MERGE_METHODS } from './forge';
import { PositiveDurationSchema } from './schema-primitives';

/** An approver's name, as in the config's `approvers` and a decision's `by`. */
const ApproverName = z.string().trim().min(1).max(100);

/**
 * The team's forge, where `merge.via: pull-request` hands the change over. The token is never in
 * the intent: the worker reads it from `tokenEnv`, a WARDEN_* variable, which no agent process or
 * test run inherits (see agentEnvironment).
 */
export const ForgeSettingsSchema = z
  .object({
    kind: z.enum(FORGE_KINDS),
    /** The forge's web address; by default the scheme and host of the remote's URL. */
    url: z.string().url().optional(),
    /** The git remote the branch is pushed to. */
    remote: z.string().trim().min(1).max(100).default('origin'),
    tokenEnv: z
      .string()
      .regex(/^WARDEN_[A-Z0-9_]+$/, 'the token lives in a WARDEN_* variable, which agents and tests never inherit')
      .default('WARDEN_FORGE_TOKEN'),
    /** Forge login → Warden approver: only these people's reviews decide the merge gate. */
    reviewers: z.record(z.string().trim().min(1).max(100), ApproverName).default({}),
    /** A mapped reviewer's comment starting with this sends the work back to impl with the rest of the comment. */
    changesCommand: z.string().trim().min(1).max(60).default('/warden changes'),
    /** How often the pull request is read while Warden waits on it (a webhook wakes it sooner). */
    pollEvery: PositiveDurationSchema.default('30s'),
    /** Labels the pull request carries besides its risk (`risk:LOW` …). */
    labels: z.array(z.string().trim().min(1).max(50)).max(10).default(['warden']),
  })
  .strict();
export type ForgeSettings = z.infer<typeof ForgeSettingsSchema>;

/**
 * How an approved change reaches the base branch: `local`, merged in the repository Warden works
 * in; `pull-request`, pushed to the forge and merged there, after its reviews and checks.
 */
export const MergeSettingsSchema = z
  .object({
    via: z.enum(['local', 'pull-request']).default('local'),
    /** The forge's merge method (pull-request only). */
    method: z.enum(MERGE_METHODS).default('merge'),
    forge: ForgeSettingsSchema.optional(),
  })
  .strict()
  .refine((merge) => merge.via === 'local' || merge.forge !== undefined, { message: 'merge.via pull-request needs merge.forge (at least its kind)', path: ['forge'] });
export type MergeSettings = z.infer<typeof MergeSettingsSchema>;

export const LOCAL_MERGE: MergeSettings = { via: 'local', method: 'merge' };
