/**
 * Two tiers. `unit` needs nothing but Node: pure logic, files in temp folders, local fake model
 * servers (`npm run test:unit`, well under a minute). `integration` talks to real servers that
 * test/global-setup.ts starts once for the run: a Temporal dev server, the embedded PostgreSQL
 * and Debian's PostgreSQL, with bubblewrap and Chromium where the tests need them.
 * `npm test` runs both.
 */
/**
 * TypeScript, and the ES modules among the dependencies (secretlint's packages): Node loads those
 * with require() itself, jest's module loader only once they are compiled to CommonJS.
 */
const ESM_PACKAGES = ['@secretlint'];
const transform = {
  '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2022' } }],
  [`/node_modules/(?:${ESM_PACKAGES.join('|')})/.+\\.js$`]: ['@swc/jest', { jsc: { target: 'es2022' }, module: { type: 'commonjs' } }],
};
const transformIgnorePatterns = [`/node_modules/(?!(?:${ESM_PACKAGES.join('|')})/)`];

/**
 * The unit tier: every test file here starts no server and needs no global setup. A new test file
 * lands in the integration tier until it is listed here; `npm run test:unit` fails fast if a file
 * listed here does need a server.
 */
const UNIT = [
  'test/shared/**/*.test.ts',
  'test/ledger/{chained-rows,round-trip-group}.test.ts',
  'test/config/**/*.test.ts',
  'test/safety/{secret-scan,scope-judge,cascade-detector,circuit-breaker,document-checks,test-plan,error-rate,limits,money,pricing,stub-detector,token-bucket}.test.ts',
  'test/activities/{change-inspection,edit-blocks,git,index-file,object-names,ref-files,launcher,process-tally,scripted-agent,global-stop-watch,ending-refs,lineage-ref,loose-objects,model-http,resume-ref,one-at-a-time,test-results,test-tamper,trash,worktree,worktree-records}.test.ts',
  'test/gateway/{call-patterns,call-shape,gateway,gateway-call-patterns,replay-book,spend-meter,upstream}.test.ts',
  'test/client/{approval-outlook,check-stubs,checkout-loader,cli-startup,command-program,config-commands,docs-commands,gate-prompt,init,replay-period,replay-start,web-pages}.test.ts',
  'test/ledger/{backends,embedded-binaries}.test.ts',
  'test/runtime/{config,logger,sandbox-readiness,temporal-server-install}.test.ts',
  'test/workers/{metrics,workflow-bundle,worker-deployment,host-name}.test.ts',
  'test/prometheus/metric-names.test.ts',
  'test/workflows/{auto-pass,ledger-recorder}.test.ts',
  'test/compose.test.ts',
  'test/bench/activity-rate.test.ts',
  'test/forge/{github,gitlab,gitlab-webhook,gitea-build,gitea-merge-retry,remote,webhook}.test.ts',
].map((glob) => `${__dirname}/${glob}`);

module.exports = {
  maxWorkers: 2,
  testSequencer: '<rootDir>/test/setup/sequencer.js',
  // A testTimeout inside a project is not applied (tests then fail at jest's 5 s): it lives here.
  // A hang guard for every test and hook, not a bound on how long one may take: on a busy machine
  // (`npm run test:loaded`) a test takes several times what it takes on an idle one.
  testTimeout: 300_000,
  reporters: ['default', '<rootDir>/test/setup/skip-summary-reporter.js'],
  projects: [
    {
      displayName: 'unit',
      testEnvironment: 'node',
      transform,
      transformIgnorePatterns,
      roots: ['<rootDir>/test'],
      testMatch: UNIT,
      setupFilesAfterEnv: ['<rootDir>/test/setup/per-file.ts'],
    },
    {
      displayName: 'integration',
      testEnvironment: 'node',
      transform,
      transformIgnorePatterns,
      roots: ['<rootDir>/test', '<rootDir>/scenarios'],
      testMatch: ['<rootDir>/{test,scenarios}/**/*.test.ts', ...UNIT.map((glob) => `!${glob}`)],
      setupFilesAfterEnv: ['<rootDir>/test/setup/per-file.ts'],
      globalSetup: '<rootDir>/test/global-setup.ts',
      globalTeardown: '<rootDir>/test/global-teardown.ts',
    },
  ],
};
