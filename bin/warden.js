#!/usr/bin/env node
// The installed package runs its compiled code (dist/). In a checkout, where src/ is, the
// TypeScript runs directly through tsx, so no build step stands between a developer and it.
const { existsSync } = require('node:fs');
const path = require('node:path');

const checkout = existsSync(path.join(__dirname, '..', 'src', 'client', 'cli.ts'));
if (checkout) require('./checkout-loader');
const { main } = require(checkout ? '../src/client/cli.ts' : '../dist/client/cli.js');
main(process.argv).then(
  (code) => process.exit(code),
  (error) => {
    process.stderr.write(`warden: ${error && error.message ? error.message : String(error)}\n`);
    process.exit(1);
  },
);
