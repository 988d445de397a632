import { defaultPayloadConverter } from '@temporalio/common';
import type { temporal } from '@temporalio/proto';
import { replayFromStage, replayStartOf } from '../../src/client/replay-start';
import { UserError } from '../../src/shared/errors';

/**
 * Where `warden replay --from STAGE` starts, read from the original's history: the commit the
 * stage's first attempt started from, and triage's assessment (its last attempt's).
 */

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;
const payloads = (value: unknown) => ({ payloads: [defaultPayloadConverter.toPayload(value)] });
const commit = (c: string) => c.repeat(40);

function scheduled(eventId: number, stage: string, startCommit: string, extra: object = {}): HistoryEvent {
  return { eventId, activityTaskScheduledEventAttributes: { activityType: { name: 'runAgentStage' }, workflowTaskCompletedEventId: eventId - 1, input: payloads({ intent: { repoPath: '/repo' }, stage, startCommit, ...extra }) } } as unknown as HistoryEvent;
}
function completed(eventId: number, scheduledEventId: number, result: object): HistoryEvent {
  return { eventId, activityTaskCompletedEventAttributes: { scheduledEventId, result: payloads(result) } } as unknown as HistoryEvent;
}

const triage = (risk: string) => ({ risk, confidence: 0.9, affectedPaths: ['lib/a.js'], rationale: 'small', structured: true });
const events: HistoryEvent[] = [
  scheduled(5, 'triage', commit('a')),
  completed(7, 5, { triage: triage('HIGH') }),
  scheduled(9, 'triage', commit('a')),
  completed(11, 9, { triage: triage('LOW') }),
  scheduled(13, 'lld', commit('b')),
  scheduled(15, 'lld', commit('b'), { designReview: true }),
  completed(17, 15, { triage: triage('PROHIBITED') }),
  scheduled(19, 'impl', commit('c')),
  scheduled(21, 'impl', commit('d')),
];

test("the stage's first attempt's start commit and the last triage attempt's assessment (a design review's result is not triage's)", () => {
  expect(replayStartOf('orig', events, 'impl')).toEqual({ stage: 'impl', commit: commit('c'), triage: triage('LOW') });
  expect(replayStartOf('orig', events, 'lld').commit).toBe(commit('b'));
});

test('a stage the original never reached, or a history with no triage answer, is a clear error', () => {
  expect(() => replayStartOf('orig', events, 'review')).toThrow(/has not reached stage review/);
  expect(() => replayStartOf('orig', events.filter((e) => !e.activityTaskCompletedEventAttributes), 'impl')).toThrow(/holds no triage assessment/);
});

test('--from takes lld, spec, impl or review; triage (or none) is the whole replay; anything else is refused', () => {
  expect(replayFromStage(undefined)).toBeUndefined();
  expect(replayFromStage('triage')).toBeUndefined();
  expect(replayFromStage('spec')).toBe('spec');
  expect(() => replayFromStage('merge')).toThrow(UserError);
  expect(() => replayFromStage('impl2')).toThrow(/--from takes one of lld, spec, impl, review/);
});
