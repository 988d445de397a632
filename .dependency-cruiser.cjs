/*
 * Import cycles, type-only imports included. ESLint's import-x/no-cycle sees value imports only
 * (a type cycle costs nothing at run time), but a type cycle still ties two modules into one
 * concept; this check counts both. Layers are ESLint's (eslint.config.mjs).
 */
module.exports = {
  forbidden: [
    {
      name: 'no-cycle',
      severity: 'error',
      comment: 'Two modules that import each other, even for a type: move what both need into a third, lower one.',
      from: {},
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // Count `import type` too: TypeScript drops them when it compiles, the design does not.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
