#!/usr/bin/env node
// The files under src/ that tsc does not emit but the compiled code reads at run time (ledger
// migrations, prompt templates), copied to the same places under dist/.
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const ASSET = /\.(sql|md)$/;
let copied = 0;
for (const entry of fs.readdirSync(path.join(root, 'src'), { recursive: true, withFileTypes: true })) {
  if (!entry.isFile() || !ASSET.test(entry.name)) continue;
  const from = path.join(entry.parentPath, entry.name);
  const to = path.join(root, 'dist', path.relative(path.join(root, 'src'), from));
  fs.mkdirSync(path.dirname(to), { recursive: true });
  fs.copyFileSync(from, to);
  copied++;
}
process.stdout.write(`copied ${copied} asset files into dist/\n`);
