/* global module, require */
/* eslint-disable @typescript-eslint/no-require-imports -- plain CommonJS: jest loads its sequencer without transforming it */
// The order test files run in: jest's own (the ones that failed last time first, then the longest
// by the last run's timings, or the largest when there are none), except that files marked
// `@runs-last` go after all others, longest first. Those wait for a Go build (Gitea, the Temporal
// server) that .ci/run starts in the background: run early, each would hold one of the two jest
// workers idle for the build's many minutes; run last, they find the build done.
const { readFileSync } = require('node:fs');
const Sequencer = require('@jest/test-sequencer').default;

const MARK = /@runs-last\b/;

function runsLast(test) {
  try {
    return MARK.test(readFileSync(test.path, 'utf8'));
  } catch {
    return false;
  }
}

class BuildsLastSequencer extends Sequencer {
  async sort(tests) {
    const sorted = await super.sort(tests);
    const last = sorted.filter(runsLast);
    return [...sorted.filter((test) => !last.includes(test)), ...last];
  }
}

module.exports = BuildsLastSequencer;
