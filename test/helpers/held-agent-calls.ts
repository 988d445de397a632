import { Context } from '@temporalio/activity';
import type { WardenActivities } from '../../src/activities';
import type { StageInput } from '../../src/activities/stage-activities';

type Hold = { readonly matches: (input: StageInput) => boolean; readonly released: Promise<void> };

/**
 * Agent calls a test can hold open. `holdNext(matches)` holds the next agent call whose input
 * matches, once its agent has answered: the activity goes on heartbeating and returns only when
 * the test calls the `release` it was given. The stage is then certainly still running when the
 * test sends a pause or sets a stop, however slow the machine: no delay has to be long enough.
 * `wrap` goes to the worker (TestWorld's `wrap` option).
 */
export class HeldAgentCalls {
  private readonly holds: Hold[] = [];

  holdNext(matches: (input: StageInput) => boolean): () => void {
    let release!: () => void;
    this.holds.push({ matches, released: new Promise<void>((resolve) => (release = resolve)) });
    return () => release();
  }

  readonly wrap = (activities: WardenActivities): WardenActivities => ({
    ...activities,
    runAgentStage: async (input) => {
      const result = await activities.runAgentStage(input);
      const index = this.holds.findIndex((hold) => hold.matches(input));
      if (index >= 0) {
        const [hold] = this.holds.splice(index, 1);
        const context = Context.current();
        const beat = setInterval(() => context.heartbeat(), 1000);
        // A cancelled activity (the test failed, the worker shuts down) is not held any longer.
        const cancelled = new Promise<void>((resolve) => context.cancellationSignal.addEventListener('abort', () => resolve(), { once: true }));
        try {
          await Promise.race([hold!.released, cancelled]);
        } finally {
          clearInterval(beat);
        }
      }
      return result;
    },
  });
}
