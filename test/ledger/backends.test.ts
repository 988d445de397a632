import { testBackends } from '../helpers/database';

const EMBEDDED = { WARDEN_TEST_EMBEDDED_DATABASE_URL: 'postgres://e/x' };

test('the ledger tests run on the embedded PostgreSQL, and on the server when one is given', () => {
  expect(testBackends({ ...EMBEDDED })).toEqual([['embedded', 'postgres://e/x']]);
  expect(testBackends({ ...EMBEDDED, WARDEN_TEST_DATABASE_URL: 'postgres://s/y', CI: 'true' })).toEqual([
    ['embedded', 'postgres://e/x'],
    ['server', 'postgres://s/y'],
  ]);
});

test('in CI a missing server fails the run instead of testing one backend', () => {
  expect(() => testBackends({ ...EMBEDDED, CI: 'true' })).toThrow(/CI is set but WARDEN_TEST_DATABASE_URL is not/);
  expect(() => testBackends({ ...EMBEDDED, CI: '1' })).toThrow(/WARDEN_TEST_DATABASE_URL/);
  expect(testBackends({ ...EMBEDDED, CI: 'false' })).toHaveLength(1);
});
