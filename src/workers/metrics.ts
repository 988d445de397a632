import type { MetricMeter } from '@temporalio/common';
import type { LedgerObserver } from '../ledger/ledger';
import { toMicros } from '../shared/money';

/**
 * Warden's own metrics, created on the SDK runtime's meter so they are served by the same
 * Prometheus endpoint as the SDK's (`telemetry.prometheusPort`). They count what the ledger
 * writer actually inserted, so a retried write is not counted twice.
 */
export type WardenMetrics = LedgerObserver;

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

export function createWardenMetrics(meter: MetricMeter): WardenMetrics {
  const trips = meter.createCounter('warden_safety_trips', '', 'breaker, limit and detector trips, by event type');
  const decisions = meter.createCounter('warden_gate_decisions', '', 'gate decisions, by gate and decision');
  const spend = meter.createCounter('warden_spend_usd_micros', 'usd_micros', 'agent spend in millionths of a dollar, by model');
  const tokens = meter.createCounter('warden_tokens', '', 'tokens used, by model and direction');
  const started = meter.createCounter('warden_intents_started', '', 'intents started');
  const finished = meter.createCounter('warden_intents_finished', '', 'intents finished, by status');
  const running = meter.createUpDownCounter?.('warden_intents_running', '', 'intents running now (started minus finished, as this worker saw them)');
  const waiting = meter.createUpDownCounter?.('warden_gates_waiting', '', 'gates waiting for a decision (requested minus decided, as this worker saw them)');
  return {
    safetyEvent(event) {
      if (TRIPS.has(event.eventType)) trips.add(1, { event_type: event.eventType });
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
