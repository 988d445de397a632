import { approvalOutlook } from '../../src/client/approval-outlook';

describe('what warden approve adds after the decision', () => {
  test('nothing when the intent simply goes on', () => {
    expect(approvalOutlook('i1', 'merge', { stop: { stopped: false } })).toEqual([]);
  });

  test('the global stop: the decision is recorded, but the intent halts and nothing is merged', () => {
    const [line, ...more] = approvalOutlook('i1', 'merge', { stop: { stopped: true, by: 'alice', reason: 'incident' } });
    expect(more).toEqual([]);
    expect(line).toBe(
      'Warden is stopped (global stop set by alice: incident): the decision is recorded, but i1 halts before its next stage and nothing is merged. Once it is safe: warden unlock --reason TEXT, then warden resume i1.',
    );
  });

  test('a pause: nothing runs until resume-run; a gate before the merge does not speak of merging', () => {
    expect(approvalOutlook('i2', 'lld', { paused: { by: 'bob', at: '2026-01-01T00:00:00Z' }, stop: { stopped: false } })).toEqual([
      'i2 is paused (by bob): nothing runs until warden resume-run i2.',
    ]);
  });

  test('both, and a flag that could not be read', () => {
    const paused = { by: 'bob', reason: 'look first', at: '2026-01-01T00:00:00Z' };
    expect(approvalOutlook('i3', 'merge', { paused, stop: { stopped: true } })).toHaveLength(2);
    expect(approvalOutlook('i3', 'merge', { stopUnknown: 'connection refused' })).toEqual([
      'Could not read the global stop flag (connection refused); while it is set, i3 halts before its next stage and nothing is merged.',
    ]);
  });
});
