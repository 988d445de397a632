/**
 * Text preparation for the cascade detector: what the agent said in its own voice, cut into
 * units (sentences and list items), and the intent's context (goal words, declared paths) the
 * rules compare it with.
 *
 * Workflow-safe: pure, no Node built-ins, no I/O; regexes are stateless (no `g` flag on shared ones).
 */

/** What the intent asked for: its goal and the paths it declared. Both optional. */
export interface CascadeContext {
  readonly goal?: string;
  readonly paths?: readonly string[];
}

/**
 * Removes what the agent did not say in its own voice: fenced code, inline code (kept as a
 * placeholder word, or as the path it names), quoted sentences and diff hunks. Curly quotes become straight.
 */
export function ownVoice(text: string): string {
  const lines = text
    .replace(/\r\n?/g, '\n')
    .replace(/[\u2018\u2019]/g, "'")
    .replace(/[\u201c\u201d]/g, '"')
    // Code is not the agent talking; a status block (YAML, JSON, a log, a diffstat) is its report.
    .replace(/^(```|~~~)([^\n]*)\n([\s\S]*?)(?:^\1[^\n]*$|(?![\s\S]))/gm, (_block: string, _fence: string, tag: string, body: string) => (isReport(tag.trim(), body) ? body : ''))
    .replace(/`([^`\n]+)`/g, (_code: string, inner: string) => (looksLikePath(inner) ? inner : /\b(?:TODO|FIXME|XXX)\b/.test(inner) ? 'TODO' : /auto[_-]?(?:continue|approve|merge|proceed)/i.test(inner) ? inner : 'CODE'))
    // Quoted sentences (three words or more) are someone else's words, e.g. a UI prompt.
    .replace(/"([^"\n]{1,200})"/g, (quoted: string, inner: string) => (inner.trim().split(/\s+/).length >= 3 ? 'QUOTE' : quoted))
    .replace(/(^|[\s:(])'([^'\n]{1,200}?)'(?=[\s.,;:)!?]|$)/gm, (quoted: string, lead: string, inner: string) =>
      inner.trim().split(/\s+/).length >= 3 ? `${lead}QUOTE` : quoted,
    )
    .split('\n');
  const kept: string[] = [];
  let inHunk = false;
  // A quoted block at the very top, or after a line that introduces it ("The issue says:"), is someone else's words.
  let quoting = true;
  for (const line of lines) {
    const quoted = /^\s*>/.test(line);
    if (quoted && quoting) continue;
    quoting = quoted || (kept.length === 0 && !line.trim()) || /(?::|wrote|said)\s*$/i.test(line.trim());
    if (/^@@ .* @@/.test(line)) {
      inHunk = true;
      continue;
    }
    if (inHunk && /^[ +\-\\]/.test(line)) continue;
    inHunk = false;
    if (/^(?:diff --git |index [0-9a-f]+\.\.|--- (?:a\/|\/dev\/null)|\+\+\+ (?:b\/|\/dev\/null))/.test(line)) continue;
    kept.push(line);
  }
  return kept.join('\n');
}

/** A fenced block that reports rather than shows code: tagged as data or a log, or untagged and made of diffstat or commit lines. */
function isReport(tag: string, body: string): boolean {
  if (/^(?:ya?ml|json|text|txt|log|plain(?:text)?|console|output)$/i.test(tag)) return true;
  if (tag) return false;
  const lines = body.split('\n').filter((l) => l.trim());
  const reportLines = lines.filter((l) => /^\s*\S+\s*\|\s*\d+|^\s*[0-9a-f]{7,40} \S|^\s*\d+ files? changed/.test(l));
  return lines.length > 0 && reportLines.length * 2 >= lines.length;
}

/** One sentence or list item of the agent's own text, with where it starts. */
export interface TextUnit {
  readonly text: string;
  readonly offset: number;
}

/** Cuts text into sentences and lines: a rule reads one unit at a time, so a "not" in one sentence never excuses the next. */
export function unitsOf(text: string): TextUnit[] {
  const units: TextUnit[] = [];
  const boundary = /[.!?;](?=\s)|\n|\s[—–]\s|:\s*\n/g;
  let start = 0;
  const push = (end: number): void => {
    const raw = text.slice(start, end);
    const lead = raw.length - raw.trimStart().length;
    const trimmed = raw.trim();
    if (trimmed) units.push({ text: trimmed, offset: start + lead });
  };
  for (let match = boundary.exec(text); match; match = boundary.exec(text)) {
    // A dot inside a version or a file name ("v2.4.1", "app.ts") is not a sentence end.
    if (match[0] === '.' && /\d$/.test(text.slice(0, match.index)) && /^\s\d/.test(text.slice(match.index + 1))) continue;
    push(match.index + match[0].length);
    start = match.index + match[0].length;
  }
  push(text.length);
  return units;
}

/** A word that denies the act around it: what was not done, left alone, or is out of scope. */
const DENIAL =
  /\b(?:not|never|no longer|nor|without|neither|cannot|can't|won't(?!-fix)|didn't|don't|doesn't|haven't|hasn't|wasn't|weren't|isn't|aren't|shouldn't|wouldn't|couldn't|refuse|refused|declined?|avoid(?:ed)?|skipp(?:ed|ing)|untouched|as[- ]is|alone|out of (?:the )?scope|outside (?:of )?(?:the |this )?(?:scope|intent|task))\b|\bno (?:changes?|edits?)\b|^\W*(?:no|none|nothing)\b|\bnothing (?:was|were|got|has been|is)\b|\b(?:is|are|was|were|gets?) (?:also )?(?:blocked|prevented|refused|rejected|forbidden|disallowed)\b|\bno [\w-]+(?: [\w-]+)? (?:was|were|is|are|got|has been|have been)\b/i;

/**
 * Whether the words just before text[index, index + length) and the rest of its clause deny it:
 * "did not delete the branch", "no tables were dropped", but not "nothing reads it, so I dropped it".
 */
export function deniedNear(text: string, index: number, length: number): boolean {
  const before = text.slice(0, index).split(/\s+/).slice(-7).join(' ');
  const after = text.slice(index, index + length + 200).split(/[.;,!?]|\s(?:but|and then|so|because)\s/)[0] ?? '';
  return denies(`${before} ${after}`);
}

/** Whether the unit says something was not done (or will not be). */
export function denies(unit: string): boolean {
  return DENIAL.test(unit);
}

/** Words too common in any task to tell one task from another. */
const GENERIC = new Set(
  (
    'the a an and or of to in on for with from by at as is are was were be been it its this that these those them they their there here ' +
    'i me my we our you your he she his her all any each every some more most other another same next rest remaining also too well ' +
    'now then just still already only both few many much one two three four five six seven eight nine ten first second last new old ' +
    'code file files change changes changed fix fixed fixes work task tasks thing things way ways part parts bit lot stuff done ' +
    'test tests testing spec specs doc docs readme changelog comment comments type types typing lint logs log pr prs commit commits ' +
    'branch main master repo project module modules function functions class method methods line lines case cases step steps ' +
    'should would could can will may might shall must do does did make made get got use used using add added update updated ' +
    'let know want like please need needs needed if when while so but not no yes ok okay go going ' +
    'continue continuing proceed proceeding monitor monitoring poll polling item items phase stage shard candidate result results run running'
  ).split(' '),
);

/** Lower-case word stems of `text` that say what it is about (generic words dropped). */
export function contentStems(text: string): string[] {
  return (text.toLowerCase().match(/[a-z][a-z0-9]+/g) ?? []).filter((w) => w.length >= 3 && !GENERIC.has(w)).map(stemOf);
}

function stemOf(word: string): string {
  const trimmed = word.replace(/(?:ies|ied)$/, 'y').replace(/(?:ing|ed|es|er|s)$/, '');
  return trimmed.slice(0, 6);
}

/**
 * Whether `phrase` names something the goal or the declared paths do not: fewer than `share` (half)
 * of its content words appear in them. Undecided (undefined) when the phrase has no content words or the
 * intent gave no context.
 */
export function foreignTo(phrase: string, context: CascadeContext, share = 1 / 2): boolean | undefined {
  const words = contentStems(phrase);
  const known = new Set([...contentStems(context.goal ?? ''), ...(context.paths ?? []).flatMap((p) => contentStems(p.replace(/[/_.-]+/g, ' ')))]);
  if (words.length === 0 || known.size === 0) return undefined;
  // Stems are crude ("deleted" and "deletion" differ): a shared beginning of five letters is the same word.
  const prefixes = new Set([...known].filter((w) => w.length >= 5).map((w) => w.slice(0, 5)));
  const inside = words.filter((w) => known.has(w) || (w.length >= 5 && prefixes.has(w.slice(0, 5)))).length;
  return inside < words.length * share;
}

const PATH_EXTENSIONS = 'ts|tsx|js|jsx|mjs|cjs|py|rb|go|rs|java|kt|cs|php|md|json|ya?ml|toml|sql|sh|tf|cfg|ini|lock|txt|html|css|scss|vue|swift|c|h|cpp|hpp|gradle|xml|proto|env|conf';
/** A repository path: a/b/c, a/b/, or a file name with a known extension. */
const PATH = new RegExp(String.raw`(?:^|[\s(\[,'"])((?:\.?[\w@-]+/)+[\w@.-]*|[\w@-]+(?:\.[\w-]+)*\.(?:${PATH_EXTENSIONS}))(?=$|[\s),\]:;'"]|\.(?:\s|$))`, 'gi');

function looksLikePath(text: string): boolean {
  return /^(?:\.?[\w@-]+\/)+[\w@.-]*$/.test(text) || new RegExp(String.raw`^[\w@-]+(?:\.[\w-]+)*\.(?:${PATH_EXTENSIONS})$`, 'i').test(text);
}

/** The paths named in `text`, without URLs. */
export function pathsIn(text: string): string[] {
  const found: string[] = [];
  for (const match of text.matchAll(PATH)) {
    const path = match[1]!.replace(/[.:]+$/, '');
    // URLs, version numbers, and "a/b" pairs without a dot or a trailing slash ("async/await", "and/or") are not paths.
    if (/^(?:https?|ftp):|\/\//.test(path) || /^\d+(?:\.\d+)*$/.test(path) || /^[\w-]+\/[\w-]+$/.test(path) || /^@|@\d/.test(path)) continue;
    found.push(path);
  }
  return found;
}

/** Where tests, docs and lock files live: touching them beside the declared paths is part of most changes. */
const ALONGSIDE = /(?:^|\/)(?:tests?|spec|specs|__tests__|docs?|e2e|fixtures?)\/|\.(?:test|spec)\.[\w]+$|(?:^|\/)(?:README|CHANGELOG|CHANGES)(?:\.\w+)?$|(?:^|\/)(?:package-lock\.json|yarn\.lock|pnpm-lock\.yaml|poetry\.lock|Cargo\.lock|go\.sum|Gemfile\.lock)$/i;

/** Whether `path` lies outside every declared path (tests, docs and lock files never do). Undefined without declared paths. */
export function outsidePaths(path: string, declared: readonly string[] | undefined): boolean | undefined {
  if (!declared || declared.length === 0) return undefined;
  const clean = path.replace(/^\.\//, '');
  // Tests and docs beside a code change are part of it; beside a change that *is* docs or tests, they are other work.
  if (ALONGSIDE.test(clean) && !declared.some((d) => ALONGSIDE.test(d.endsWith('/') ? `${d}x` : d))) return false;
  return !declared.some((d) => {
    const base = d.replace(/^\.\//, '').replace(/\*.*$/, '').replace(/\/+$/, '');
    if (!base) return true;
    return clean === base || clean.startsWith(`${base}/`) || base.startsWith(`${clean.replace(/\/+$/, '')}/`) || baseName(clean) === baseName(base);
  });
}

function baseName(path: string): string {
  return path.split('/').pop() ?? path;
}

/** A short excerpt of text[index, index + length) with a little context, on one line, at most 160 characters. */
export function excerptAt(text: string, index: number, length: number): string {
  const start = Math.max(0, index - 40);
  const end = Math.min(text.length, index + length + 40);
  const raw = `${start > 0 ? '…' : ''}${text.slice(start, end)}${end < text.length ? '…' : ''}`;
  const oneLine = raw.replace(/\s+/g, ' ').trim();
  return oneLine.length > 160 ? `${oneLine.slice(0, 159)}…` : oneLine;
}
