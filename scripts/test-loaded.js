#!/usr/bin/env node
// `npm run test:loaded [-- jest arguments]`: `npm test` on a busy machine. Two CPU-bound
// processes run beside the suite from its start to its end, whatever its outcome, so that a test
// which holds only on an idle machine (a wall-clock bound, a sleep that "is long enough") fails
// here and not on a loaded CI runner. The suite's exit code is this script's.
//
//   npm run test:loaded
//   npm run test:loaded -- test/workflows/gates.test.ts --maxWorkers=1
//   WARDEN_TEST_BURNERS=4 npm run test:loaded
const { spawn } = require('node:child_process');

const count = Number(process.env.WARDEN_TEST_BURNERS ?? 2);
if (!Number.isInteger(count) || count < 0) {
  process.stderr.write(`WARDEN_TEST_BURNERS must be a whole number, not ${process.env.WARDEN_TEST_BURNERS}\n`);
  process.exit(2);
}

// Spins, and leaves by itself once its parent (this script) is gone: a runner killed with
// SIGKILL leaves no burner behind.
const BURN = 'const parent = process.ppid; for (;;) { for (let i = 0; i < 5e7; i++); if (process.ppid !== parent) process.exit(0); }';
const burners = Array.from({ length: count }, () => spawn(process.execPath, ['-e', BURN], { stdio: 'ignore' }));
process.stderr.write(`test:loaded: ${count} CPU burner(s) beside the suite (pids ${burners.map((b) => b.pid).join(', ') || 'none'})\n`);

function stopBurners() {
  for (const burner of burners) if (burner.exitCode === null && burner.signalCode === null) burner.kill('SIGKILL');
}
process.on('exit', stopBurners);

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const suite = spawn(npm, ['test', '--', ...process.argv.slice(2)], { stdio: 'inherit' });
// Ctrl-C reaches the suite through the terminal's process group; a signal sent to this script
// alone is passed on.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => suite.kill(signal));
suite.on('error', (error) => {
  process.stderr.write(`test:loaded: could not start npm test: ${error.message}\n`);
  process.exit(1);
});
suite.on('exit', (code, signal) => {
  stopBurners();
  if (signal) process.stderr.write(`test:loaded: the suite ended on ${signal}\n`);
  process.exit(code ?? 1);
});
