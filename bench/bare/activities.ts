import { Context } from '@temporalio/activity';

/** Does nothing: the bare baseline measures Temporal's own cost per stage. */
export async function noop(stage: string): Promise<string> {
  return stage;
}

/** Heartbeats every 200 ms until cancelled (then throws the cancellation, as activities do). */
export async function hang(): Promise<void> {
  for (;;) {
    Context.current().heartbeat();
    await Context.current().sleep(200);
  }
}
