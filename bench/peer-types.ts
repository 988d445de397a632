/** What bench/peer.ts needs of the peer pipeline (bench/peer/langgraph-pipeline.ts). */
export interface PeerPipeline {
  /** Runs a new pipeline on `threadId` until it stops at the gate before merge. */
  runToGate(threadId: string): Promise<void>;
  /** Answers the gate; resolves when the run ends, with the stages it completed. */
  decide(threadId: string, decision: 'approve' | 'reject'): Promise<string[]>;
  close(): Promise<void>;
}

/**
 * `connection`: pg pool settings of the benchmark's PostgreSQL. `durability`: LangGraph's own
 * setting — `async` (its default) writes each step's checkpoint while the next step runs, `sync`
 * before it starts (as Temporal records each step before the next).
 */
export type CreatePeerPipeline = (connection: Readonly<Record<string, unknown>>, durability: 'async' | 'sync', onStageStart: (threadId: string, stage: string) => void) => Promise<PeerPipeline>;
