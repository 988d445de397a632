/** The commands that decide a waiting gate from a terminal, as Warden tells people to run them. */
export function decideCommands(intentId: string, gate: string): { readonly approve: string; readonly reject: string } {
  return { approve: `warden approve ${intentId} --gate ${gate}`, reject: `warden reject ${intentId} --gate ${gate} --reason "…"` };
}
