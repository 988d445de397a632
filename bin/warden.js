#!/usr/bin/env node
// Runs the TypeScript CLI directly (through tsx), so no build step stands between a user and it.
require('tsx/cjs');
const { main } = require('../src/client/cli.ts');
main(process.argv).then(
  (code) => process.exit(code),
  (error) => {
    process.stderr.write(`warden: ${error && error.message ? error.message : String(error)}\n`);
    process.exit(1);
  },
);
