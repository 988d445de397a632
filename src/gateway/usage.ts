/** Token usage reported by an agent call. */
export interface Usage {
  readonly inputTokens: number;
  readonly outputTokens: number;
}
