import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const nodeBuiltins = [
  'fs', 'fs/promises', 'path', 'os', 'child_process', 'http', 'https', 'net', 'crypto', 'process',
  'timers', 'worker_threads', 'stream', 'util', 'events', 'dns', 'readline', 'url', 'zlib',
];

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
            ...nodeBuiltins.map((name) => ({ name, message: 'Workflow code must stay deterministic: no Node built-ins.' })),
            ...nodeBuiltins.map((name) => ({ name: `node:${name}`, message: 'Workflow code must stay deterministic: no Node built-ins.' })),
            { name: 'pg', message: 'No I/O in workflow code: use an activity.' },
            { name: 'pino', message: 'Use log from @temporalio/workflow.' },
            { name: '@temporalio/client', message: 'Workflows do not use the client.' },
            { name: '@temporalio/worker', message: 'Workflows do not use the worker.' },
            { name: '@temporalio/activity', message: 'Workflows do not import activity code.' },
          ],
          patterns: [
            { group: ['**/activities', '**/activities/*'], allowTypeImports: true, message: 'Import activity types only.' },
            { group: ['**/client/*', '**/workers/*', '**/runtime/*'], message: 'No I/O modules in workflow code.' },
          ],
        },
      ],
    },
  },
);
