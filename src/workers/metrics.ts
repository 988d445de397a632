import type { MetricMeter } from '@temporalio/common';
import type { LedgerObserver } from '../ledger/ledger-writer';
import { toMicros } from '../shared/money';
import type { CircuitStateChange } from '../safety/circuit-breaker';

/**
 * Warden's own metrics, created on the SDK runtime's meter so they are served by the same
 * Prometheus endpoint as the SDK's (`telemetry.prometheusPort`). They count what the ledger
 * writer actually inserted, so a retried write is not counted twice.
 */
export interface WardenMetrics extends LedgerObserver {
  /** The outcome of the worker's latest ledger probe (src/workers/ledger-probe.ts). */
  ledgerReachable(up: boolean): void;
  /** A move of an endpoint's circuit in this worker's model gateway (which records no CIRCUIT_TRIPPED of its own). */
  circuitChanged(change: Pick<CircuitStateChange, 'endpoint' | 'to'>): void;
}

/** Safety events that are trips of a breaker, limit or detector (the rest are lifecycle). */
const TRIPS = new Set([
  'CIRCUIT_TRIPPED',
  'RATE_LIMIT_BLOCK',
  'COST_WARNING',
  'COST_BUDGET_EXCEEDED',
  'ANOMALY_DETECTED',
  'MODE_VIOLATION',
  'MAX_ITERATIONS_EXCEEDED',
  'STAGNATION_DETECTED',
  'BUDGET_RESERVATION_DENIED',
  'CASCADE_DETECTED',
  'SANDBOX_ESCAPE_ATTEMPTED',
  'ESCAPE_ATTEMPTED',
  'SECRET_IN_CHANGE',
  'DECISION_REFUSED',
  'GATE_ESCALATED',
]);

const ENDINGS: Record<string, string> = { INTENT_MERGED: 'merged', INTENT_REJECTED: 'rejected', INTENT_FAILED: 'failed', INTENT_CANCELLED: 'cancelled' };

/** Events that end an intent's current stage, as far as the stage clock is concerned. */
const STAGE_ENDS = new Set(['STAGE_COMPLETED', 'STAGE_FAILED', ...Object.keys(ENDINGS)]);

export function createWardenMetrics(meter: MetricMeter, now: () => number = Date.now): WardenMetrics {
  const trips = meter.createCounter('warden_safety_trips', '', 'breaker, limit and detector trips, by event type');
  const decisions = meter.createCounter('warden_gate_decisions', '', 'gate decisions, by gate and decision');
  const spend = meter.createCounter('warden_spend_usd_micros', 'usd_micros', 'agent spend in millionths of a dollar, by model');
  const tokens = meter.createCounter('warden_tokens', '', 'tokens used, by model and direction');
  const started = meter.createCounter('warden_intents_started', '', 'intents started');
  const finished = meter.createCounter('warden_intents_finished', '', 'intents finished, by status');
  const running = meter.createUpDownCounter?.('warden_intents_running', '', 'intents running now (started minus finished, as this worker saw them)');
  const waiting = meter.createUpDownCounter?.('warden_gates_waiting', '', 'gates waiting for a decision (requested minus decided, as this worker saw them)');
  // Gauges the alerting rules (deploy/prometheus/warden-alerts.yml) read: a state, not a count.
  const breakerOpen = meter.createGauge('warden_breaker_open', 'int', '', '1 while a circuit breaker is open (tripped and not yet reset), by breaker');
  const budgetWarnings = meter.createCounter('warden_budget_warnings', '', 'budgets that reached a share of their limit (80, 90 per cent), by budget and share');
  const stageOldest = meter.createGauge('warden_stage_oldest_started_seconds', 'float', '', 'when the longest-running intent in each stage entered it (unix seconds; 0 when none is in it)');
  const overdue = meter.createGauge('warden_gates_overdue', 'int', '', 'gates still waiting past their notice (GATE_TIMEOUT_NEAR) or their timeout (GATE_ESCALATED), as this worker saw them');
  const ledgerUp = meter.createGauge('warden_ledger_up', 'int', '', "1 when the worker's latest ledger probe was answered, 0 when it was not");
  const inStage = new Map<string, { stage: string; since: number }>();
  const stagesSeen = new Set<string>();
  const publishStages = (): void => {
    const oldest = new Map<string, number>();
    for (const { stage, since } of inStage.values()) oldest.set(stage, Math.min(oldest.get(stage) ?? Infinity, since));
    for (const stage of stagesSeen) stageOldest.set((oldest.get(stage) ?? 0) / 1000, { stage });
  };
  const trackStage = (event: Parameters<LedgerObserver['safetyEvent']>[0]): void => {
    if (!event.intentId) return;
    if (event.eventType === 'STAGE_STARTED' && event.stage) {
      inStage.set(event.intentId, { stage: event.stage, since: now() });
      stagesSeen.add(event.stage);
    } else if (STAGE_ENDS.has(event.eventType)) {
      if (!inStage.delete(event.intentId)) return;
    } else return;
    publishStages();
  };
  // `intent/gate` of each gate past its notice and not yet decided.
  const overdueGates = new Set<string>();
  const trackOverdue = (event: Parameters<LedgerObserver['safetyEvent']>[0]): void => {
    const gate = event.metadata?.gate;
    if ((event.eventType === 'GATE_TIMEOUT_NEAR' || event.eventType === 'GATE_ESCALATED') && event.intentId && typeof gate === 'string') {
      overdueGates.add(`${event.intentId}/${gate}`);
    } else if (event.intentId && ENDINGS[event.eventType]) {
      for (const key of overdueGates) if (key.startsWith(`${event.intentId}/`)) overdueGates.delete(key);
    } else return;
    overdue.set(overdueGates.size);
  };
  return {
    ledgerReachable(up) {
      ledgerUp.set(up ? 1 : 0);
    },
    circuitChanged(change) {
      // HALF_OPEN still refuses all but its probes: open until it is CLOSED again.
      breakerOpen.set(change.to === 'CLOSED' ? 0 : 1, { breaker: change.endpoint });
    },
    safetyEvent(event) {
      if (TRIPS.has(event.eventType)) trips.add(1, { event_type: event.eventType });
      if (event.breakerId && (event.eventType === 'CIRCUIT_TRIPPED' || event.eventType === 'CIRCUIT_RESET')) {
        breakerOpen.set(event.eventType === 'CIRCUIT_TRIPPED' ? 1 : 0, { breaker: event.breakerId });
      }
      const share = event.metadata?.share;
      if (event.eventType === 'COST_WARNING' && typeof share === 'number') {
        budgetWarnings.add(1, { budget: String(event.metadata?.budget ?? 'unknown'), share: String(share) });
      }
      trackStage(event);
      trackOverdue(event);
      if (event.eventType === 'INTENT_STARTED') {
        started.add(1);
        running?.add(1);
      }
      const ending = ENDINGS[event.eventType];
      if (ending) {
        finished.add(1, { status: ending });
        running?.add(-1);
      }
      if (event.eventType === 'GATE_REQUESTED') waiting?.add(1);
    },
    gateDecision(decision) {
      // Any decision, a deferral too, ends this wait (a deferral starts a new one with a new notice).
      if (overdueGates.delete(`${decision.intentId}/${decision.gate}`)) overdue.set(overdueGates.size);
      decisions.add(1, { gate: decision.gate, decision: decision.decision });
      // An auto-passed gate was never requested from a person, so it was never waiting.
      if (decision.decision !== 'defer' && !decision.by.startsWith('warden-ladder')) waiting?.add(-1);
    },
    cost(cost) {
      spend.add(Number(toMicros(cost.usd)), { model: cost.modelId });
      tokens.add(cost.inputTokens, { model: cost.modelId, direction: 'input' });
      tokens.add(cost.outputTokens, { model: cost.modelId, direction: 'output' });
    },
  };
}
