/**
 * The spec's test plan, and whether impl kept it. The plan is the spec's requirement table: one
 * row per requirement with its test's name (in backticks) and the test file. A file marked
 * "(existing)" holds a test the change keeps; any other file is one impl writes or changes.
 * Pure: the caller says what the files hold, what impl changed and what the test run printed.
 */

export interface PlannedTest {
  readonly requirement: string;
  /** The test's name as the runner prints it (node:test / jest title, pytest function name). */
  readonly test: string;
  readonly file: string;
  /** The plan says the test exists before the change: its file need not be among the changed ones. */
  readonly existing: boolean;
}

/** A test's name as a run printed it, and how that test ended. */
export type RunStatus = 'passed' | 'failed' | 'skipped';

/**
 * How a planned test stands after impl:
 * - `ran`: in its file, and the run printed it as passed;
 * - `missing`: its file does not exist or does not contain its name;
 * - `not-in-change`: the plan says impl writes it, but impl did not change its file;
 * - `skipped`: skipped (or todo) in the run or marked so in its file;
 * - `not-run`: the run printed test names, but not this one;
 * - `failed`: the run printed it as failed;
 * - `unverified`: in its file, but the run printed no test names to check it against.
 */
export type PlannedTestStatus = 'ran' | 'missing' | 'not-in-change' | 'skipped' | 'not-run' | 'failed' | 'unverified';

export interface PlannedTestResult extends PlannedTest {
  readonly status: PlannedTestStatus;
}

export interface TestPlanVerdict {
  readonly ok: boolean;
  readonly tests: readonly PlannedTestResult[];
  /** One line per broken promise, for impl's next attempt. */
  readonly problems: readonly string[];
}

const REQUIREMENT_HEADER = /^requirements?\b/i;
const TEST_HEADER = /^tests?\b|^test cases?\b|^test names?\b/i;
const FILE_HEADER = /^(test )?files?\b|^where\b|^path\b/i;
const EXISTING_MARK = /\(existing\)|\balready (exists|there)\b/i;

export function splitRow(line: string): string[] | undefined {
  const trimmed = line.trim();
  if (!trimmed.startsWith('|')) return undefined;
  return trimmed
    .replace(/^\|/, '')
    .replace(/\|$/, '')
    .split('|')
    .map((c) => c.trim());
}

const isRule = (row: readonly string[]): boolean => row.every((c) => /^:?-{2,}:?$/.test(c));

/** A requirement table: its header's columns, and its rows (the |---| line left out). */
export interface RequirementTable {
  readonly columns: { readonly requirement: number; readonly test: number; readonly file: number };
  readonly rows: ReadonlyArray<readonly string[]>;
}

/** Every table whose header has a Requirement and a Test column (File is -1 when absent). */
export function requirementTables(markdown: string): RequirementTable[] {
  const lines = markdown.split('\n');
  const tables: RequirementTable[] = [];
  for (let i = 0; i < lines.length; i++) {
    const header = splitRow(lines[i]!);
    if (!header) continue;
    const requirement = header.findIndex((c) => REQUIREMENT_HEADER.test(c));
    const test = header.findIndex((c) => TEST_HEADER.test(c));
    if (requirement < 0 || test < 0) continue;
    const file = header.findIndex((c, n) => n !== test && FILE_HEADER.test(c));
    const rows: string[][] = [];
    let j = i + 1;
    for (; j < lines.length; j++) {
      const row = splitRow(lines[j]!);
      if (!row) break;
      if (!isRule(row)) rows.push(row);
    }
    tables.push({ columns: { requirement, test, file }, rows });
    i = j - 1;
  }
  return tables;
}

/** The first backticked text of a cell, or the cell without its "(existing)" mark. */
function nameIn(cell: string): string {
  const ticked = /`([^`]+)`/.exec(cell)?.[1];
  return (ticked ?? cell.replace(EXISTING_MARK, '')).trim();
}

/** The planned tests: the rows of the spec's requirement tables that name a test and a file. */
export function readTestPlan(markdown: string): PlannedTest[] {
  const plan: PlannedTest[] = [];
  for (const { columns, rows } of requirementTables(markdown)) {
    if (columns.file < 0) continue;
    for (const row of rows) {
      const test = nameIn(row[columns.test] ?? '');
      const fileCell = row[columns.file] ?? '';
      const file = nameIn(fileCell).replace(/^\.\//, '');
      if (!test || !file) continue;
      plan.push({ requirement: row[columns.requirement] ?? '', test, file, existing: EXISTING_MARK.test(fileCell) || EXISTING_MARK.test(row[columns.test] ?? '') });
    }
  }
  return plan;
}

/** A line that skips the test it declares: `.skip(`, `.todo(`, `xit(`, `{ skip: true }`, pytest's skip marks. */
const SKIP_MARK = /\.(skip|todo)\s*\(|\bx(it|test|describe)\s*\(|\bskip\s*:\s*(true|['"`])|\btodo\s*:\s*(true|['"`])|@pytest\.mark\.skip|@unittest\.skip/;

/** Whether `content` declares the test `name` skipped: on its line, or a decorator on the line above. */
export function skippedInFile(content: string, name: string): boolean {
  const lines = content.split('\n');
  return lines.some((line, i) => line.includes(name) && (SKIP_MARK.test(line) || (i > 0 && /^\s*@/.test(lines[i - 1]!) && SKIP_MARK.test(lines[i - 1]!))));
}

/** Whether a name the runner printed is the planned one: equal, or the planned one after a scope (`file::name`, `suite › name`, `suite name`). */
function sameTest(printed: string, planned: string): boolean {
  if (printed === planned) return true;
  if (!printed.endsWith(planned)) return false;
  const before = printed.slice(0, printed.length - planned.length);
  return /(::|›|>|\s)$/.test(before);
}

export interface TestPlanFacts {
  /** The file's text after impl, or undefined when it does not exist. */
  readonly read: (file: string) => string | undefined;
  /** Files impl changed against the base (added or modified). */
  readonly changedFiles: readonly string[];
  /** What the run printed for each test, by the printed name; empty when it printed no names. */
  readonly statuses: ReadonlyMap<string, RunStatus>;
}

/** Judges each planned test (see PlannedTestStatus); anything but ran or unverified is a problem. */
export function judgeTestPlan(plan: readonly PlannedTest[], facts: TestPlanFacts): TestPlanVerdict {
  const changed = new Set(facts.changedFiles);
  const tests = plan.map((planned): PlannedTestResult => ({ ...planned, status: statusOf(planned, facts, changed) }));
  const problems = tests.filter((t) => t.status !== 'ran' && t.status !== 'unverified').map(describeProblem);
  return { ok: problems.length === 0, tests, problems };
}

function statusOf(planned: PlannedTest, facts: TestPlanFacts, changed: ReadonlySet<string>): PlannedTestStatus {
  const content = facts.read(planned.file);
  if (content === undefined || !content.includes(planned.test)) return 'missing';
  if (!planned.existing && !changed.has(planned.file)) return 'not-in-change';
  const printed = [...facts.statuses].filter(([name]) => sameTest(name, planned.test)).map(([, status]) => status);
  if (printed.includes('failed')) return 'failed';
  if (printed.includes('passed')) return 'ran';
  if (printed.includes('skipped') || skippedInFile(content, planned.test)) return 'skipped';
  return facts.statuses.size > 0 ? 'not-run' : 'unverified';
}

function describeProblem(t: PlannedTestResult): string {
  const what = `"${t.test}" in ${t.file} (for "${t.requirement}")`;
  switch (t.status) {
    case 'missing':
      return `${what} is missing: write it in ${t.file}, with that exact name`;
    case 'not-in-change':
      return `${what} is not part of the change: the plan says this change writes or changes it, but ${t.file} was not changed`;
    case 'skipped':
      return `${what} is skipped: make it run`;
    case 'not-run':
      return `${what} did not run: the test command must run ${t.file}`;
    case 'failed':
      return `${what} failed`;
    default:
      return what;
  }
}

/** One line per planned test, for the ledger and the review package: `ran: "name" (file)`. */
export function describePlannedTest(t: PlannedTestResult): string {
  return `${t.status}: "${t.test}" (${t.file}${t.existing ? ', existing' : ''}) for ${t.requirement}`;
}
