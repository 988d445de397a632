import { z } from 'zod';
import { PositiveDurationSchema } from './schema-primitives';

/**
 * Where an intent's work lives when Warden's workers are several hosts with no shared disk (the
 * config's `placement`). Every worker then works from its own clone of the repository's remote,
 * never from the path `warden run` was given; the host that made an intent's worktree runs its
 * stages (on that host's own task queue) and pushes the intent's commits to the remote after each
 * step; if that host is gone for `moveAfter`, the next step starts on another host from the
 * pushed commit. Without it an intent's stages still run on the host that holds its worktree,
 * and wait for that host however long it is gone.
 */
export const PlacementSettingsSchema = z
  .object({
    /** The git remote of the repository that every host clones and pushes the intent's work to. */
    remote: z.string().trim().min(1).max(100).default('origin'),
    /** How long the host that holds an intent's worktree may be gone before another host takes the intent over. */
    moveAfter: PositiveDurationSchema.default('5m'),
  })
  .strict();
export type PlacementSettings = z.infer<typeof PlacementSettingsSchema>;

/** What an intent carries: the remote's address as `warden run` read it, so no host needs the starting path. */
export const IntentPlacementSchema = z
  .object({
    /** The remote's name, which every host's clone gives it too (a pull request pushes to it by name). */
    remote: z.string().trim().min(1).max(100),
    /** The remote's URL (a path, file://, ssh or https address), the same for every host. */
    remoteUrl: z.string().trim().min(1).max(2000),
    moveAfter: PositiveDurationSchema,
  })
  .strict();
export type IntentPlacement = z.infer<typeof IntentPlacementSchema>;
