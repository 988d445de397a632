import js from '@eslint/js';
import tseslint from 'typescript-eslint';

import { builtinModules } from 'node:module';

// Every Node built-in by its bare name (the list comes from Node itself, so none is missed); node:* below.
const nodeBuiltins = [...new Set(builtinModules.filter((name) => !name.startsWith('_')))];
const builtinMessage = 'Workflow code must stay deterministic: no Node built-ins.';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.warden/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
    },
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
