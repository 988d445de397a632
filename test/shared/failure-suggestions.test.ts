import { FailureType } from '../../src/shared/errors';
import { FAILURE_SUGGESTIONS, suggestionForFailure } from '../../src/shared/failure-suggestions';

/** STAGE_FAILED and INTENT_FAILED always say what a person could do. */

test('every failure type has a suggestion of its own', () => {
  for (const type of Object.values(FailureType)) expect(FAILURE_SUGGESTIONS[type].length).toBeGreaterThan(30);
  expect(new Set(Object.values(FAILURE_SUGGESTIONS)).size).toBe(Object.values(FailureType).length);
});

test('the suggestion names the intent where it gives a command', () => {
  expect(suggestionForFailure({ type: FailureType.AgentFailed }, 'fix-1')).toMatch(/`warden audit fix-1`.*`warden resume fix-1`/);
});

test('timeouts the server enforces are told apart, in either spelling of the SDK', () => {
  expect(suggestionForFailure({ timeoutType: 'START_TO_CLOSE' }, 'x')).toMatch(/limits\.stageTimeout/);
  expect(suggestionForFailure({ timeoutType: 'TIMEOUT_TYPE_HEARTBEAT' }, 'x')).toMatch(/stopped answering/);
});

test('an unknown failure still gets one', () => {
  expect(suggestionForFailure({}, 'x')).toMatch(/unexpected failure.*warden resume x/);
  expect(suggestionForFailure({ type: 'SOMETHING_NEW' }, 'x')).toMatch(/unexpected failure/);
});
