import { uuid4, workflowInfo } from '@temporalio/workflow';
import type { LedgerBatch, LedgerRow } from '../activities';
import type { GateDecisionInput, SafetyEventInput } from '../ledger/types';
import type { SafetyEventType, Severity } from '../shared/safety-events';

type EventDetails = Omit<SafetyEventInput, 'id' | 'timestamp' | 'eventType' | 'severity' | 'reason' | 'intentId'>;
type GateDetails = Omit<GateDecisionInput, 'id' | 'intentId'>;
type Append = (batch: LedgerBatch) => Promise<unknown>;

/**
 * How a flush reaches `appendToLedger`. `local`: a local activity, no server round trip (the
 * default). `task-queue`: an ordinary activity, for writes that signals drive (a gate's refused
 * decisions, pauses): a local activity in flight while a flood of signals arrives can leave the
 * SDK holding two workflow tasks for one run, and the history it then writes no longer replays.
 */
export type LedgerRoute = 'local' | 'task-queue';

/**
 * Collects ledger rows in workflow code and writes them through the `appendToLedger` activity, in
 * the order they were recorded. Ids come from the workflow's deterministic `uuid4()`, so a
 * replayed or retried write inserts nothing twice. Rows whose write failed (e.g. cancelled
 * mid-flight) stay queued, first, for the next flush.
 */
export class LedgerRecorder {
  private queue: LedgerRow[] = [];
  /** Rows queued so far must be written before the workflow waits on anything (see `writeBeforeWaiting`). */
  private mustWrite = false;
  /** Told of every event as it is recorded (e.g. to say it on the intent's pull request). */
  observer?: (eventType: SafetyEventType, severity: Severity, reason: string) => void;

  constructor(
    private readonly intentId: string,
    private readonly append: Readonly<Record<LedgerRoute, Append>>,
  ) {}

  /**
   * Records a safety event. Its metadata also says where in the history it was recorded: the run
   * and the history's length at the workflow task recording it (that task's WorkflowTaskStarted
   * event id), so `warden audit --with-history` can read the row beside it.
   */
  event(eventType: SafetyEventType, severity: Severity, reason: string, details: EventDetails = {}): void {
    const { runId, historyLength } = workflowInfo();
    const metadata = { ...details.metadata, runId, historyLength };
    const safetyEvent: SafetyEventInput = { id: uuid4(), timestamp: new Date(), eventType, severity, reason, intentId: this.intentId, ...details, metadata };
    this.queue.push({ safetyEvent });
    this.observer?.(eventType, severity, reason);
  }

  gateDecision(details: GateDetails): void {
    const gateDecision: GateDecisionInput = { id: uuid4(), intentId: this.intentId, ...details };
    this.queue.push({ gateDecision });
  }

  get pending(): boolean {
    return this.queue.length > 0;
  }

  /**
   * The rows queued so far are written with the next ledger write when it comes first, or else
   * before the workflow calls any activity or opens a gate (the intent's activities and the gate
   * keeper call `flushIfDue`, see due-rows.ts). Within one workflow task that is the same as
   * writing them now for whoever reads the ledger: what a workflow task shows (search attributes,
   * the `state` query) is shown when it completes, and its local activities have all run by then.
   */
  writeBeforeWaiting(): void {
    if (this.pending) this.mustWrite = true;
  }

  /** Rows that `writeBeforeWaiting` asked for and no write has taken yet. */
  get due(): boolean {
    return this.mustWrite && this.pending;
  }

  /** Writes the queue (local route) when rows in it are due. */
  async flushIfDue(): Promise<void> {
    if (this.due) await this.flush();
  }

  /** Writes everything queued; on failure the rows go back to the queue and the error propagates. */
  async flush(route: LedgerRoute = 'local'): Promise<void> {
    if (!this.pending) return;
    await this.flushThrough(this.append[route]);
  }

  /**
   * Hands everything queued to `write`, an activity that writes the batch along with its own work
   * (e.g. the review package that opens a gate): one activity instead of two. On failure the rows
   * go back to the queue and the error propagates.
   */
  async flushThrough<T>(write: (batch: LedgerBatch) => Promise<T>): Promise<T> {
    const rows = this.queue;
    const mustWrite = this.mustWrite;
    this.queue = [];
    this.mustWrite = false;
    try {
      return await write({ rows });
    } catch (error) {
      this.queue = [...rows, ...this.queue];
      this.mustWrite ||= mustWrite;
      throw error;
    }
  }
}

