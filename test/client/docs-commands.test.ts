import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { buildProgram } from '../../src/client/cli';
import { loadRuntimeConfig } from '../../src/runtime/config';

/**
 * Every `warden …` command and `npm run …` script the README and docs/ show exists, with every
 * flag shown for it: each is looked up in the command's own --help, so the documents cannot
 * drift from the CLI.
 */
const ROOT = path.resolve(__dirname, '../..');
const DOCUMENTS = ['README.md', ...readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => path.join('docs', f))];
const SCRIPTS = Object.keys((JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts);

interface Shown {
  readonly where: string;
  readonly text: string;
}

/** The code a document shows: its fenced blocks' lines (continuation lines joined) and its inline code spans. */
export function codeShown(file: string, markdown: string): Shown[] {
  const shown: Shown[] = [];
  let fenced = false;
  let pending = '';
  markdown.split('\n').forEach((line, index) => {
    const where = `${file}:${index + 1}`;
    if (/^\s*```/.test(line)) {
      fenced = !fenced;
      return;
    }
    if (fenced) {
      pending += line.replace(/\\\s*$/, ' ');
      if (!/\\\s*$/.test(line)) {
        shown.push({ where, text: pending });
        pending = '';
      }
      return;
    }
    for (const span of line.matchAll(/`([^`]+)`/g)) shown.push({ where, text: span[1]! });
  });
  return shown;
}

/** Each `warden` invocation in a piece of code: its words up to a comment or the next command. */
export function invocations(text: string): string[][] {
  const found: string[][] = [];
  for (const match of text.matchAll(/(?:^|[\s(;|&])warden((?:\s+[^\s#;|&)]+)*)/g)) {
    found.push(match[1]!.trim().split(/\s+/).filter(Boolean));
  }
  return found;
}

/** The command a list of words names, and the words left for it. */
function commandOf(program: Command, words: string[]): { command: Command; path: string[] } {
  let command = program;
  const names: string[] = [];
  for (const word of words) {
    const sub = command.commands.find((c) => c.name() === word || c.aliases().includes(word));
    if (!sub) break;
    command = sub;
    names.push(word);
  }
  return { command, path: names };
}

const program = buildProgram(loadRuntimeConfig({ ...process.env, WARDEN_HOME: '/tmp/warden-docs-check' }));
const shown = DOCUMENTS.flatMap((file) => codeShown(file, readFileSync(path.join(ROOT, file), 'utf8')));

/** What a document's code shows that the CLI lacks, and how many invocations were checked. */
function problemsIn(pieces: readonly Shown[]): { problems: string[]; checked: number } {
  const problems: string[] = [];
  let checked = 0;
  for (const { where, text } of pieces) {
    for (const words of invocations(text)) {
      if (words.length === 0 || words[0]!.startsWith('-')) continue; // `warden --help`
      const { command, path: names } = commandOf(program, words);
      if (names.length === 0) {
        // A word after "warden" that is no command: only a problem when it looks like one.
        if (/^[a-z][a-z-]+$/.test(words[0]!)) problems.push(`${where}: warden ${words[0]} is not a command`);
        continue;
      }
      checked++;
      // The help of the command and of every command above it (global options such as --config).
      let help = '';
      for (let c: Command | null = command; c; c = c.parent) help += c.helpInformation();
      for (const flag of words.filter((w) => /^--[a-z]/.test(w)).map((w) => w.replace(/[=,.:].*$/, ''))) {
        if (flag !== '--help' && !new RegExp(`(^|[\\s,])${flag}(?![a-z-])`).test(help)) problems.push(`${where}: warden ${names.join(' ')} has no ${flag}`);
      }
    }
  }
  return { problems, checked };
}

test.each(DOCUMENTS)("every warden command and flag %s shows is in that command's --help", (file) => {
  const { problems, checked } = problemsIn(shown.filter((s) => s.where.startsWith(`${file}:`)));
  expect(problems).toEqual([]);
  if (file === 'README.md') expect(checked).toBeGreaterThan(10);
});

test('every npm script the documents show exists', () => {
  const problems = shown.flatMap(({ where, text }) =>
    [...text.matchAll(/npm run ([a-z][a-z0-9:-]*)/g)].map((m) => m[1]!).filter((script) => !SCRIPTS.includes(script)).map((script) => `${where}: npm run ${script}`),
  );
  expect(problems).toEqual([]);
});

test('the check itself finds what it looks for', () => {
  expect(invocations('npx warden run --repo . --goal "x" # then warden status ID')).toEqual([['run', '--repo', '.', '--goal', '"x"'], ['status', 'ID']]);
  expect(invocations('warden approve <id> --conditions "a"; warden stop ID')).toEqual([['approve', '<id>', '--conditions', '"a"'], ['stop', 'ID']]);
  const { path: names } = commandOf(program, ['approver', 'init', 'alice']);
  expect(names).toEqual(['approver', 'init']);
  const bad = codeShown('bad.md', 'run `warden run --repo r --bogus 1`, then `warden frobnicate ID` and `warden approver init a --force`\n');
  expect(problemsIn(bad).problems).toEqual(['bad.md:1: warden run has no --bogus', 'bad.md:1: warden frobnicate is not a command']);
  expect(codeShown('x.md', 'see `warden run --detach`\n```sh\nwarden run --repo r \\\n  --goal g\n```\n').map((s) => s.text)).toEqual(['warden run --detach', 'warden run --repo r    --goal g']);
});
