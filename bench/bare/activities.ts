/** Does nothing: the bare baseline measures Temporal's own cost per stage. */
export async function noop(stage: string): Promise<string> {
  return stage;
}
