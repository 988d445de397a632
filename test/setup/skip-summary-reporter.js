/* global process, module */
/**
 * Ends the run with why tests were skipped: for each system program the setup found missing,
 * how many tests it skipped and the command that installs it (test/setup/prerequisites.ts marks
 * those tests). Plain CommonJS: jest loads reporters without transforming them.
 */
const MARKER = /\[skipped: needs ([a-z]+)\]/;

class SkipSummaryReporter {
  onRunComplete(_contexts, results) {
    const byProgram = new Map();
    let other = 0;
    for (const file of results.testResults) {
      for (const test of file.testResults) {
        if (test.status !== 'pending' && test.status !== 'skipped') continue;
        const marked = [test.title, ...test.ancestorTitles].map((title) => MARKER.exec(title)).find(Boolean);
        if (marked) byProgram.set(marked[1], (byProgram.get(marked[1]) ?? 0) + 1);
        else other += 1;
      }
    }
    const lines = [];
    for (const [program, count] of byProgram) {
      const why = process.env[`WARDEN_TEST_MISSING_${program.toUpperCase()}`] ?? `${program} is missing`;
      lines.push(`  ${count} skipped: ${why}`);
    }
    if (other > 0) lines.push(`  ${other} skipped in the test files themselves (it.skip / describe.skip)`);
    if (lines.length === 0) return;
    process.stderr.write(`\nSkipped or left out:\n${lines.join('\n')}\n`);
  }
}

module.exports = SkipSummaryReporter;
