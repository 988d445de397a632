import js from '@eslint/js';
import { createNodeResolver, importX } from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';

import { builtinModules } from 'node:module';

// Every Node built-in by its bare name (the list comes from Node itself, so none is missed); node:* below.
const nodeBuiltins = [...new Set(builtinModules.filter((name) => !name.startsWith('_')))];
const builtinMessage = 'Workflow code must stay deterministic: no Node built-ins.';

/*
 * Warden's layers, bottom to top. A module imports from its own layer and the layers below it,
 * never from one above, not even a type: a type that two layers need lives in the lower one.
 *
 *   shared      the vocabulary: types, ids, messages, schemas, pure helpers
 *   safety      pure safety logic: limits, money, breakers, monitors, detectors
 *   config      the config file, its profiles and their loader
 *   ledger      the PostgreSQL ledger
 *   gateway     the model gateway: every model call of every agent, metered, limited and screened
 *   forge       a team's forge (Gitea, GitHub, GitLab): pull requests, reviews, checks, webhooks
 *   activities  everything an intent does outside its workflow (agents, git, tests)
 *   workflows   deterministic workflow code (activities, ledger and config as types only, below)
 *   runtime     process plumbing for the entry points: env config, logger, Temporal, telemetry
 *   workers     the worker and its interceptors
 *   client      the CLI and the programs a person runs
 */
const LAYERS = ['shared', 'safety', 'config', 'ledger', 'gateway', 'forge', 'activities', 'workflows', 'runtime', 'workers', 'client'];
const layerZones = LAYERS.slice(0, -1).map((layer, index) => ({
  target: `./src/${layer}`,
  from: LAYERS.slice(index + 1).map((above) => `./src/${above}`),
  message: `Imports go down the layers only (eslint.config.mjs): move what src/${layer} needs down to it or below.`,
}));

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.warden/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    plugins: { 'import-x': importX },
    // Every import in Warden is relative or a package; Node's resolution with .ts first finds them all.
    settings: { 'import-x/resolver-next': [createNodeResolver({ extensions: ['.ts', '.js', '.json', '.node'] })] },
    rules: {
      // A value cycle means a module may run before what it imports is initialised.
      'import-x/no-cycle': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
    },
  },
  {
    files: ['src/**/*.ts'],
    rules: { 'import-x/no-restricted-paths': ['error', { basePath: import.meta.dirname, zones: layerZones }] },
  },
  {
    // Workflow code is replayed: it must not reach Node built-ins or I/O libraries.
    files: ['src/workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [
            ...nodeBuiltins.map((name) => ({ name, message: builtinMessage })),
            { name: 'pg', message: 'No I/O in workflow code: use an activity.' },
            { name: 'pino', message: 'Use log from @temporalio/workflow.' },
            { name: '@temporalio/client', message: 'Workflows do not use the client.' },
            { name: '@temporalio/worker', message: 'Workflows do not use the worker.' },
            { name: '@temporalio/activity', message: 'Workflows do not import activity code.' },
          ],
          patterns: [
            { group: ['**/activities', '**/activities/*'], allowTypeImports: true, message: 'Import activity types only.' },
            { group: ['node:*'], message: builtinMessage },
            { group: ['**/client/*', '**/workers/*', '**/runtime/*'], message: 'No I/O modules in workflow code.' },
            // The ledger and the config loader do I/O; their types are fine.
            { group: ['**/ledger/*', '**/config/*'], allowTypeImports: true, message: 'No I/O modules in workflow code: import their types only.' },
            // Exporters send spans over the network; the workflow side of the interceptors package is the one allowed.
            { group: ['@opentelemetry/*'], message: 'No exporters in workflow code: use @temporalio/interceptors-opentelemetry/lib/workflow.' },
            // Every cached workflow evaluates its own copy of what it imports, and zod costs over 1 MB each.
            { group: ['zod', 'zod/*'], message: 'No zod in workflow code (memory per cached workflow): validate with the plain parsers in src/shared.' },
          ],
        },
      ],
      'no-restricted-syntax': [
        'error',
        { selector: 'ImportExpression', message: 'No dynamic import in workflow code: it is bundled once and replayed.' },
        { selector: "CallExpression[callee.name='require']", message: 'No require in workflow code: it is bundled once and replayed.' },
      ],
    },
  },
);
