import { DECISION_KINDS } from '../shared/decisions';
import { z } from 'zod';
import { SAFETY_EVENT_TYPES, SEVERITIES, type Severity } from '../shared/safety-events';

/** USD as an exact decimal string ("0.012500"); never a float on the way to the database. */
export const UsdSchema = z.string().regex(/^\d{1,8}(\.\d{1,6})?$/, 'a non-negative USD amount with at most 6 decimals');

/** Spend at the moment of the event: the intent's, the stage's and the day's, and the limit that applied. */
const CostSnapshotSchema = z.object({
  intentUsd: UsdSchema.optional(),
  stageUsd: UsdSchema.optional(),
  dayUsd: UsdSchema.optional(),
  limitUsd: UsdSchema.optional(),
});

/** One safety decision, with the intent and stage it belongs to. */
export const SafetyEventSchema = z.object({
  /** Deterministic (workflow uuid4 or derived from workflow/run/activity ids): a retry inserts nothing. */
  id: z.uuid(),
  timestamp: z.coerce.date(),
  eventType: z.enum(SAFETY_EVENT_TYPES),
  intentId: z.string().optional(),
  stage: z.string().optional(),
  agentId: z.string().optional(),
  modelId: z.string().optional(),
  breakerId: z.string().optional(),
  costSnapshot: CostSnapshotSchema.optional(),
  reason: z.string(),
  /** What a person could do about it. */
  suggestion: z.string().optional(),
  metadata: z.record(z.string(), z.unknown()).default({}),
  severity: z.enum(SEVERITIES),
});
export type SafetyEventInput = z.input<typeof SafetyEventSchema>;

export const CostEventSchema = z.object({
  id: z.uuid(),
  timestamp: z.coerce.date(),
  intentId: z.string(),
  stage: z.string(),
  attempt: z.number().int().min(1),
  agentId: z.string(),
  modelId: z.string(),
  inputTokens: z.number().int().min(0),
  outputTokens: z.number().int().min(0),
  usd: UsdSchema,
});
export type CostEventInput = z.input<typeof CostEventSchema>;

/** The cost row a settlement writes with it: what the call was (its id and USD come from the reservation and the settlement). */
export const SettledCallSchema = CostEventSchema.omit({ id: true, usd: true });
export type SettledCall = z.input<typeof SettledCallSchema>;

/** A granted reservation nothing has settled or released yet. */
export interface OpenReservation {
  readonly id: string;
  readonly intentId: string;
  readonly amountUsd: string;
  readonly createdAt: Date;
  readonly agentId?: string;
  readonly stage?: string;
  /** Absent on reservations made before the activity was recorded. */
  readonly activity?: { readonly workflowId: string; readonly runId: string; readonly activityId: string; readonly attempt: number };
}

/** One intent's spend as the budget tables count it (settled and reconciled) and as cost_events do. */
export interface IntentBooks {
  readonly intentId: string;
  readonly budgetUsd: string;
  readonly costEventsUsd: string;
  /** Granted reservations still open (counted at their maximum in the budgets, in neither sum). */
  readonly openReservations: number;
}

/** One request an agent made through the model gateway (see src/gateway). */
export const ModelCallSchema = z.object({
  id: z.uuid(),
  timestamp: z.coerce.date(),
  intentId: z.string(),
  stage: z.string(),
  attempt: z.number().int().min(1),
  agentId: z.string(),
  api: z.enum(['chat', 'responses', 'messages']),
  modelId: z.string(),
  streamed: z.boolean(),
  status: z.number().int(),
  outcome: z.enum(['answered', 'refused', 'failed', 'cut']),
  refusal: z.string().optional(),
  inputTokens: z.number().int().min(0),
  outputTokens: z.number().int().min(0),
  usd: UsdSchema,
  estimated: z.boolean(),
  latencyMs: z.number().int().min(0),
});
export type ModelCallInput = z.input<typeof ModelCallSchema>;
export type ModelCallRow = z.output<typeof ModelCallSchema>;

export const GateDecisionRowSchema = z.object({
  id: z.uuid(),
  intentId: z.string(),
  gate: z.string(),
  decision: z.enum(DECISION_KINDS),
  by: z.string(),
  reason: z.string().optional(),
  conditions: z.array(z.string()).default([]),
  requestedAt: z.coerce.date(),
  decidedAt: z.coerce.date(),
  timedOut: z.boolean(),
  /** A person's decision: whether it carried its approver's signature. Absent for the ladder's and a timeout's. */
  signed: z.boolean().optional(),
});
export type GateDecisionInput = z.input<typeof GateDecisionRowSchema>;

/** Outcome of reserving a paid call's maximum cost against a day's budget. */
/** The budgets a reservation is checked against, in the order they are judged. */
export const BUDGET_SCOPES = ['day', 'agent', 'intent', 'stage'] as const;
export type BudgetScope = (typeof BUDGET_SCOPES)[number];

export interface BudgetReservation {
  readonly granted: boolean;
  /**
   * Settled spend plus open reservations before this one (exact decimal string), of the day's
   * budget when granted, of the refusing budget when denied.
   */
  readonly committedUsd: string;
  readonly limitUsd: string;
  /** The budget that refused it; absent when granted. */
  readonly deniedBy?: BudgetScope;
  /** What was reserved: `amountUsd`, or less for a request with `minAmountUsd` (see there). */
  readonly amountUsd: string;
}

export interface GlobalStop {
  readonly stopped: boolean;
  readonly by?: string;
  readonly reason?: string;
  readonly at?: Date;
}

/** One line of `warden audit ID`, oldest first. */
export interface TimelineEntry {
  readonly at: Date;
  /** `activity`: one attempt of an activity as the worker ran it (`activity_runs`), when asked for. */
  readonly kind: 'safety' | 'cost' | 'gate' | 'activity';
  readonly type: string;
  readonly stage?: string;
  readonly summary: string;
  readonly severity?: Severity;
  readonly usd?: string;
}

export type CostGrouping = 'intent' | 'stage' | 'model' | 'agent' | 'day';

export interface CostRow {
  readonly key: string;
  readonly usd: string;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly calls: number;
}

/** The state snapshots: the lineage each intent that ended that day left behind. */
interface SnapshotCheck {
  /** MISSING when an intent that finished at least one stage ended without a kept lineage. */
  readonly status: 'OK' | 'MISSING';
  /** Intents that ended that day (merged, rejected, failed or cancelled). */
  readonly ended: number;
  /** Of those, how many recorded where their lineage was kept. */
  readonly kept: number;
  /** Intents that finished a stage but ended with no lineage kept. */
  readonly missing: string[];
}

/** The daily health report, one section per safety layer. */
export interface DailyReport {
  readonly date: string;
  readonly layers: {
    readonly limits: {
      readonly iterations: number;
      readonly spendUsd: string;
      /** The day budget compared with; absent when none was given. */
      readonly budgetUsd?: string;
      /** A day budget of 0 means no limit (as the worker treats it): nothing remains or runs over. */
      readonly unlimited?: true;
      readonly remainingUsd?: string;
      readonly remainingPct?: number;
    };
    readonly thresholds: {
      /** Gates passed without a person (the automation ladder). */
      readonly autoExecuted: number;
      /** Gates handed to a person (requested) that day. */
      readonly escalated: number;
      /** Gate deadlines that passed with no decision (GATE_ESCALATED). */
      readonly timedOut: number;
      /** Mean triage confidence, in percent with one decimal; null when nothing was assessed. */
      readonly averageConfidencePct: number | null;
      /** Triage assessments the average is taken over. */
      readonly assessments: number;
    };
    readonly history: { readonly commits: number; readonly rollbacks: number; readonly snapshots: SnapshotCheck };
    readonly humanOverride: { readonly emergencyStops: number; readonly manualInterventions: number; readonly decisionQueue: number };
    readonly anomalies: { readonly total: number; readonly bySeverity: Record<Severity, number>; readonly patterns: string[] };
  };
  readonly health: 'GREEN' | 'YELLOW' | 'RED';
  /** The rule that produced `health`, in words. */
  readonly rule: string;
}

/** A calendar day, YYYY-MM-DD (UTC where the ledger derives it from timestamps). */
export const DaySchema = z.iso.date();

/** A request to reserve a paid call's maximum cost against a day's budget; `id` makes it idempotent. */
export const BudgetReservationRequestSchema = z.object({
  /** Deterministic (e.g. derived from workflow, activity and attempt): a retried reservation is the same one. */
  id: z.string().min(1).max(200),
  day: DaySchema,
  intentId: z.string().min(1),
  amountUsd: UsdSchema,
  /** The day's budget across intents. */
  limitUsd: UsdSchema,
  /** The agent (cost events' agent id) and its own day budget; no limit when absent. */
  agentId: z.string().min(1).optional(),
  agentLimitUsd: UsdSchema.optional(),
  /** The intent's budget (all days); no limit when absent. */
  intentLimitUsd: UsdSchema.optional(),
  /** The stage and its budget within the intent; no limit when absent. */
  stage: z.string().min(1).optional(),
  stageLimitUsd: UsdSchema.optional(),
  /**
   * When given, a call that may be made smaller: if `amountUsd` does not fit every budget, the
   * largest amount that does is granted instead, as long as it is at least this much.
   */
  minAmountUsd: UsdSchema.optional(),
  /** The activity attempt that makes the call: a worker asks Temporal whether it still runs before closing an open reservation. */
  activity: z
    .object({ workflowId: z.string().min(1), runId: z.string().min(1), activityId: z.string().min(1), attempt: z.number().int().min(1) })
    .optional(),
})
  .refine((r) => r.agentLimitUsd === undefined || r.agentId !== undefined, { message: 'an agent budget needs the agent id', path: ['agentId'] })
  .refine((r) => r.stageLimitUsd === undefined || r.stage !== undefined, { message: 'a stage budget needs the stage', path: ['stage'] });
export type BudgetReservationRequest = z.infer<typeof BudgetReservationRequestSchema>;

export const COST_GROUPINGS = ['intent', 'stage', 'model', 'agent', 'day'] as const satisfies readonly CostGrouping[];

/** How an activity attempt ended. */
const ACTIVITY_OUTCOMES = ['completed', 'failed', 'cancelled'] as const;
export type ActivityOutcome = (typeof ACTIVITY_OUTCOMES)[number];

/**
 * One activity attempt as the worker saw it (`activity_runs`). The key is
 * (workflowId, runId, activityId, attempt): writing the same attempt again changes nothing.
 */
export const ActivityRunSchema = z
  .object({
    workflowId: z.string().min(1),
    runId: z.string().min(1),
    activityId: z.string().min(1),
    attempt: z.number().int().min(1),
    activityType: z.string().min(1),
    taskQueue: z.string().min(1),
    intentId: z.string().optional(),
    stage: z.string().optional(),
    agentId: z.string().optional(),
    modelId: z.string().optional(),
    startedAt: z.coerce.date(),
    endedAt: z.coerce.date(),
    outcome: z.enum(ACTIVITY_OUTCOMES),
    /** The failure's type (or error name) only: messages may quote agent output. */
    failureType: z.string().max(200).optional(),
    /** What a paid call cost, when known. */
    spendUsd: UsdSchema.optional(),
  })
  .refine((run) => run.endedAt.getTime() >= run.startedAt.getTime(), { message: 'an activity cannot end before it starts', path: ['endedAt'] });
export type ActivityRunInput = z.input<typeof ActivityRunSchema>;

/** An `activity_runs` row as read back, with its duration. */
export interface ActivityRun {
  readonly workflowId: string;
  readonly runId: string;
  readonly activityId: string;
  readonly attempt: number;
  readonly activityType: string;
  readonly taskQueue: string;
  readonly intentId?: string;
  readonly stage?: string;
  readonly agentId?: string;
  readonly modelId?: string;
  readonly startedAt: Date;
  readonly endedAt: Date;
  readonly durationMs: number;
  readonly outcome: ActivityOutcome;
  readonly failureType?: string;
  readonly spendUsd?: string;
}
