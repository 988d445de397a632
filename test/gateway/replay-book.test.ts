/**
 * How a replayed request is matched to the recorded one: what is new each run (test times here)
 * is left out of the comparison, and anything else that differs is a divergence.
 */
import { ReplayBook } from '../../src/gateway/replay-book';
import type { Recording } from '../../src/ledger/exchange-store';

/** The test output a failed impl attempt leaves for the next attempt's prompt, with its times. */
function implPrompt(times: { readonly tap: string; readonly total: string; readonly spec: string }, failure = 'slugify is missing'): string {
  return [
    '# Warden: impl (attempt 2)',
    '## Test output of attempt 1',
    'not ok 2 - slugify makes a lower-case, dash-separated slug',
    '  ---',
    `  duration_ms: ${times.tap}`,
    `  error: '${failure}'`,
    '  ...',
    `# duration_ms ${times.total}`,
    `✖ slugify makes a lower-case, dash-separated slug (${times.spec})`,
  ].join('\n');
}

const body = (prompt: string): string => JSON.stringify({ model: 'gpt-4.1', messages: [{ role: 'user', content: prompt }] });
const then = { tap: '0.927534', total: '45.12077', spec: '0.93ms' };

function bookOf(prompt: string): ReplayBook {
  const recording: Recording = {
    intentId: 'original',
    exchanges: [
      {
        callId: '1',
        stage: 'impl',
        attempt: 2,
        order: 1,
        status: 200,
        answerKind: 'whole',
        requestBytes: prompt.length,
        answerBytes: 2,
        stored: true,
        recordedAt: new Date(0),
        request: body(prompt),
        answer: { kind: 'whole', text: '{}' },
      },
    ],
  };
  return new ReplayBook(recording);
}

test('the times in a test output are new each run: a request that differs only in them gets the recorded answer', () => {
  const book = bookOf(implPrompt(then));
  expect(book.answerFor('impl', 2, 1, body(implPrompt({ tap: '0.844189', total: '51.3', spec: '12 ms' })))).toEqual({ kind: 'answer', status: 200, answer: { kind: 'whole', text: '{}' } });
});

test('a test output that differs in what failed is a divergence, named by the first difference', () => {
  const book = bookOf(implPrompt(then));
  const answer = book.answerFor('impl', 2, 1, body(implPrompt(then, 'slugify keeps the case')));
  expect(answer.kind).toBe('diverged');
  expect(answer.kind === 'diverged' && answer.message).toMatch(/^diverged at stage impl attempt 2 call 1: the request differs from the recorded one: messages\[0\]\.content: recorded ".*slugify is missing.*", now ".*slugify keeps the case/);
});

/** aider's listing of its chat's files: each file's path, a fence, its content, the fence. */
function listing(files: ReadonlyArray<readonly [string, string]>): string {
  return `I have added these files to the chat:\n${files.map(([name, content]) => `\n${name}\n\`\`\`\`\n${content}\`\`\`\`\n`).join('')}\nEdit them.`;
}

test("aider's files in another order are the same request; a file whose content differs is not", () => {
  const strings = ['lib/strings.js', "'use strict';\nmodule.exports = {};\n"] as const;
  const design = ['docs/lineage/active/original/02-lld.md', '# Design\n```js\nslugify()\n```\n'] as const;
  const book = bookOf(listing([design, strings]));
  expect(book.answerFor('impl', 2, 1, body(listing([strings, design])))).toMatchObject({ kind: 'answer' });
  const changed = book.answerFor('impl', 2, 1, body(listing([strings, [design[0], '# Design, edited\n']])));
  expect(changed.kind).toBe('diverged');
  expect(changed.kind === 'diverged' && changed.message).toMatch(/recorded ".*# Design\\n.*", now ".*# Design, edited/);
});
