import { randomUUID } from 'node:crypto';
import type { SafetyEventInput } from '../../src/ledger/types';
import { createWardenMetrics } from '../../src/workers/metrics';
import { recordingMeter } from '../helpers/recording-meter';

/**
 * The gauges and counters the alerting rules read, as the worker's ledger observer sets them.
 * test/prometheus/alerts-fire.test.ts reads the same metrics from a real worker through a real
 * Prometheus.
 */

const event = (eventType: SafetyEventInput['eventType'], fields: Partial<SafetyEventInput> = {}): SafetyEventInput => ({
  id: randomUUID(),
  timestamp: new Date(),
  eventType,
  reason: eventType,
  severity: 'info',
  ...fields,
});

test('a breaker is open from its CIRCUIT_TRIPPED until its CIRCUIT_RESET, each breaker apart', () => {
  const { meter, value } = recordingMeter();
  const metrics = createWardenMetrics(meter);
  metrics.safetyEvent(event('CIRCUIT_TRIPPED', { breakerId: 'http://a' }));
  metrics.safetyEvent(event('CIRCUIT_TRIPPED', { breakerId: 'http://b' }));
  expect(value('warden_breaker_open', { breaker: 'http://a' })).toBe(1);
  metrics.safetyEvent(event('CIRCUIT_RESET', { breakerId: 'http://a' }));
  expect(value('warden_breaker_open', { breaker: 'http://a' })).toBe(0);
  expect(value('warden_breaker_open', { breaker: 'http://b' })).toBe(1);
});

test('budget warnings are counted by budget and share; a warning with no share (a released reservation) is not', () => {
  const { meter, value } = recordingMeter();
  const metrics = createWardenMetrics(meter);
  metrics.safetyEvent(event('COST_WARNING', { metadata: { budget: 'intent', share: 80 } }));
  metrics.safetyEvent(event('COST_WARNING', { metadata: { budget: 'intent', share: 90 } }));
  metrics.safetyEvent(event('COST_WARNING', { metadata: { reservationId: 'r1' } }));
  expect(value('warden_budget_warnings', { budget: 'intent', share: '80' })).toBe(1);
  expect(value('warden_budget_warnings', { budget: 'intent', share: '90' })).toBe(1);
  expect(value('warden_safety_trips', { event_type: 'COST_WARNING' })).toBe(3);
});

test("each stage's gauge holds when its longest-running intent entered it, and 0 once none is in it", () => {
  let clock = 1_000_000;
  const { meter, value } = recordingMeter();
  const metrics = createWardenMetrics(meter, () => clock);
  metrics.safetyEvent(event('STAGE_STARTED', { intentId: 'one', stage: 'impl' }));
  clock += 5_000;
  metrics.safetyEvent(event('STAGE_STARTED', { intentId: 'two', stage: 'impl' }));
  expect(value('warden_stage_oldest_started_seconds', { stage: 'impl' })).toBe(1_000);
  metrics.safetyEvent(event('STAGE_COMPLETED', { intentId: 'one', stage: 'impl' }));
  expect(value('warden_stage_oldest_started_seconds', { stage: 'impl' })).toBe(1_005);
  // moving on to the next stage leaves the last one
  metrics.safetyEvent(event('STAGE_STARTED', { intentId: 'two', stage: 'review' }));
  expect(value('warden_stage_oldest_started_seconds', { stage: 'impl' })).toBe(0);
  expect(value('warden_stage_oldest_started_seconds', { stage: 'review' })).toBe(1_005);
  metrics.safetyEvent(event('INTENT_FAILED', { intentId: 'two' }));
  expect(value('warden_stage_oldest_started_seconds', { stage: 'review' })).toBe(0);
});

test('the ledger probe sets warden_ledger_up', () => {
  const { meter, value } = recordingMeter();
  const metrics = createWardenMetrics(meter);
  metrics.ledgerReachable(true);
  expect(value('warden_ledger_up')).toBe(1);
  metrics.ledgerReachable(false);
  expect(value('warden_ledger_up')).toBe(0);
});

test('a gate is overdue from its notice (or its timeout) until it is decided or its intent ends', () => {
  const { meter, value } = recordingMeter();
  const metrics = createWardenMetrics(meter);
  const decision = { id: randomUUID(), intentId: 'one', gate: 'merge', decision: 'approve' as const, by: 'alice', requestedAt: new Date(), decidedAt: new Date(), timedOut: false };
  metrics.safetyEvent(event('GATE_TIMEOUT_NEAR', { intentId: 'one', metadata: { gate: 'merge' } }));
  metrics.safetyEvent(event('GATE_ESCALATED', { intentId: 'one', metadata: { gate: 'merge' } }));
  metrics.safetyEvent(event('GATE_ESCALATED', { intentId: 'two', metadata: { gate: 'spec' } }));
  expect(value('warden_gates_overdue')).toBe(2);
  metrics.gateDecision(decision);
  expect(value('warden_gates_overdue')).toBe(1);
  metrics.safetyEvent(event('INTENT_REJECTED', { intentId: 'two' }));
  expect(value('warden_gates_overdue')).toBe(0);
});

test("the model gateway's circuit moves set warden_breaker_open too: open until CLOSED again", () => {
  const { meter, value } = recordingMeter();
  const metrics = createWardenMetrics(meter);
  metrics.circuitChanged({ endpoint: 'openai http://m/v1 gpt', to: 'OPEN' });
  expect(value('warden_breaker_open', { breaker: 'openai http://m/v1 gpt' })).toBe(1);
  metrics.circuitChanged({ endpoint: 'openai http://m/v1 gpt', to: 'HALF_OPEN' });
  expect(value('warden_breaker_open', { breaker: 'openai http://m/v1 gpt' })).toBe(1);
  metrics.circuitChanged({ endpoint: 'openai http://m/v1 gpt', to: 'CLOSED' });
  expect(value('warden_breaker_open', { breaker: 'openai http://m/v1 gpt' })).toBe(0);
});
