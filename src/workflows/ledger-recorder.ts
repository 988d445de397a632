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
  /** Batches sent ahead with activities that have not ended yet (see `sendAhead`). */
  private aloft: LedgerRow[][] = [];
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
   * The rows queued so far are written with the next ledger write when it comes first; else they
   * go ahead of the next activity the workflow calls, written by its worker before it acts
   * (`sendAhead`, see due-rows.ts), or before a gate opens or a call waits (a pause, a
   * cooldown). Nothing acts on them before they are in the ledger; a reader of the ledger may see
   * them a moment after the workflow's state shows the step, until that activity starts.
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

  /**
   * Writes everything queued; on failure the rows go back to the queue and the error propagates.
   * Rows sent ahead with an activity still under way go first (a repeat inserts nothing): that
   * activity may not have started, and the ledger keeps the order rows were recorded in.
   */
  async flush(route: LedgerRoute = 'local'): Promise<void> {
    if (!this.pending) return;
    const sentAhead = this.aloft.flat();
    await this.flushThrough((batch) => this.append[route]({ rows: [...sentAhead, ...batch.rows] }));
  }

  /**
   * Sends everything queued ahead with `call`, an activity whose worker writes the rows before it
   * acts (its first argument carries them, see src/shared/carried-rows.ts): one activity instead
   * of a ledger write and the activity. If the activity fails the rows go back to the front of
   * the queue, as due as they were: it may never have started.
   */
  async sendAhead<T>(call: (batch: LedgerBatch) => Promise<T>): Promise<T> {
    const rows = this.queue;
    this.aloft.push(rows);
    try {
      return await this.flushThrough(() => call({ rows }));
    } finally {
      this.aloft = this.aloft.filter((batch) => batch !== rows);
    }
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

