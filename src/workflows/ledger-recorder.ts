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
  /** Whether what is queued must be in the ledger before the intent's next step acts (see writeBeforeNextStep). */
  private owed = false;
  /** Rows handed to activities that have not ended yet, each batch as handed over. */
  private handedOver: LedgerRow[][] = [];
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
   * What is queued (a gate's decision) must be in the ledger before the intent's next step acts on
   * it. Where the workflow interceptors hand rows over, it costs no write of its own: the next
   * activity carries the rows and its worker writes them before anything else it does
   * (`handOver`); the interceptors write them at once instead when the next step is not an
   * activity that starts now (a timer, a local activity, an activity a pause or an agent call's
   * checks may hold). Without those interceptors they are written here and now.
   */
  async writeBeforeNextStep(): Promise<void> {
    if (!this.pending) return;
    if (!ledgerHandOverRegistered()) return this.flush();
    this.owed = true;
  }

  /** Whether rows wait to be written before the next step (see writeBeforeNextStep). */
  get owesRows(): boolean {
    return this.owed && this.pending;
  }

  /**
   * The owed rows, for the activity about to be scheduled to carry, or undefined when none are
   * owed. `settle` must be told how that activity ended.
   */
  handOver(): LedgerRow[] | undefined {
    if (!this.owesRows) return undefined;
    const rows = this.queue;
    this.queue = [];
    this.owed = false;
    this.handedOver.push(rows);
    return rows;
  }

  /**
   * The activity that carried `rows` ended. Completed: its worker wrote them first. Otherwise they
   * may never have been written (it was never started, or refused before): they go back to the
   * front of the queue, still owed; a repeat of a written row inserts nothing.
   */
  settle(rows: LedgerRow[], completed: boolean): void {
    this.handedOver = this.handedOver.filter((batch) => batch !== rows);
    if (completed) return;
    this.queue = [...rows, ...this.queue];
    this.owed = true;
  }

  /**
   * Writes everything queued; on failure the rows go back to the queue and the error propagates.
   * Rows handed to an activity still under way go first (a repeat inserts nothing): the ledger's
   * order stays the order they were recorded in.
   */
  async flush(route: LedgerRoute = 'local'): Promise<void> {
    if (!this.pending) return;
    const rows = this.queue;
    this.queue = [];
    this.owed = false;
    try {
      await this.append[route]({ rows: [...this.handedOver.flat(), ...rows] });
    } catch (error) {
      this.queue = [...rows, ...this.queue];
      throw error;
    }
  }
}

// The recorder lives on this workflow's own globalThis (the SDK gives every workflow its own
// globals), where the workflow interceptors find it; they say there that they hand rows over.
const RECORDER_KEY = '__wardenLedgerRecorder';
const HAND_OVER_KEY = '__wardenLedgerHandOver';

/** Makes `recorder` the one the workflow interceptors hand rows over from. */
export function installLedgerRecorder(recorder: LedgerRecorder): void {
  (globalThis as Record<string, unknown>)[RECORDER_KEY] = recorder;
}

/** This workflow's ledger recorder; undefined in a workflow that installed none. */
export function currentLedgerRecorder(): LedgerRecorder | undefined {
  return (globalThis as Record<string, unknown>)[RECORDER_KEY] as LedgerRecorder | undefined;
}

/** Said by the workflow interceptors as the workflow starts: activities carry owed rows. */
export function registerLedgerHandOver(): void {
  (globalThis as Record<string, unknown>)[HAND_OVER_KEY] = true;
}

function ledgerHandOverRegistered(): boolean {
  return (globalThis as Record<string, unknown>)[HAND_OVER_KEY] === true;
}
