/** Tests talk to a real Temporal dev server started once in globalSetup. */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test', '<rootDir>/scenarios'],
  testMatch: ['**/*.test.ts'],
  transform: { '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2022' } }] },
  globalSetup: '<rootDir>/test/global-setup.ts',
  globalTeardown: '<rootDir>/test/global-teardown.ts',
  testTimeout: 120_000,
  maxWorkers: 2,
  // The Temporal SDK's native runtime keeps a handle open after every connection is closed.
  forceExit: true,
};
