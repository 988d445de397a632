import { readFileSync } from 'node:fs';
import path from 'node:path';
import { configJsonSchema } from '../../src/config/json-schema';

/**
 * docs/configuration.md names every key of the config file, two levels deep: each top-level key
 * has a heading of its own, and each key one level below it is named in that heading's section.
 * The keys come from the JSON Schema made from the zod schema that validates the file, so a key
 * added to the schema without its documentation fails here.
 */
const ROOT = path.resolve(__dirname, '../..');
const PAGE = 'docs/configuration.md';

type JsonSchema = {
  readonly properties?: Record<string, JsonSchema>;
  readonly additionalProperties?: JsonSchema | boolean;
  readonly propertyNames?: { readonly enum?: readonly string[] };
  readonly items?: JsonSchema;
  readonly anyOf?: readonly JsonSchema[];
  readonly oneOf?: readonly JsonSchema[];
  readonly allOf?: readonly JsonSchema[];
};

/** The keys an object written at `schema` may hold: its properties, a record's names and values' keys, an array's items' keys, every branch of a union. */
export function keysOf(schema: JsonSchema): string[] {
  const keys = new Set<string>(Object.keys(schema.properties ?? {}));
  for (const name of schema.propertyNames?.enum ?? []) keys.add(name);
  const nested = [
    ...(typeof schema.additionalProperties === 'object' ? [schema.additionalProperties] : []),
    ...(schema.items ? [schema.items] : []),
    ...(schema.anyOf ?? []),
    ...(schema.oneOf ?? []),
    ...(schema.allOf ?? []),
  ];
  for (const sub of nested) for (const key of keysOf(sub)) keys.add(key);
  return [...keys];
}

interface Section {
  readonly heading: string;
  /** The key-shaped code spans of the heading. */
  readonly named: readonly string[];
  /** Every word of the code (spans and fenced blocks) in the heading's section, its subsections included. */
  readonly codeWords: ReadonlySet<string>;
}

const CODE_WORD = /[$A-Za-z0-9_-]+/g;
const KEY_SHAPED = /^[$A-Za-z][\w-]*$/;

/** The page's headings, each with the code words of everything under it (until a heading of its level or above). */
export function sectionsOf(markdown: string): Section[] {
  const lines = markdown.split('\n');
  const headings: Array<{ index: number; level: number; text: string }> = [];
  let fenced = false;
  lines.forEach((line, index) => {
    if (/^\s*```/.test(line)) fenced = !fenced;
    const match = !fenced && /^(#{1,6})\s+(.*)$/.exec(line);
    if (match) headings.push({ index, level: match[1]!.length, text: match[2]! });
  });
  return headings.map((h, i) => {
    const next = headings.slice(i + 1).find((other) => other.level <= h.level);
    const body = lines.slice(h.index + 1, next ? next.index : lines.length);
    const words = new Set<string>();
    let inFence = false;
    for (const line of body) {
      if (/^\s*```/.test(line)) {
        inFence = !inFence;
        continue;
      }
      const code = inFence ? [line] : [...line.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
      for (const piece of code) for (const word of piece.match(CODE_WORD) ?? []) words.add(word);
    }
    const named = [...h.text.matchAll(/`([^`]+)`/g)].map((m) => m[1]!).filter((span) => KEY_SHAPED.test(span));
    return { heading: h.text, named, codeWords: words };
  });
}

/** What the page leaves out of the schema, and what it names that the schema does not have. */
export function problemsOf(schema: JsonSchema, markdown: string): string[] {
  const sections = sectionsOf(markdown);
  const topLevel = keysOf(schema);
  const problems: string[] = [];
  for (const key of topLevel) {
    const section = sections.find((s) => s.named.includes(key));
    if (!section) {
      problems.push(`${key}: no heading names it`);
      continue;
    }
    for (const child of keysOf(schema.properties![key]!)) {
      if (!section.codeWords.has(child)) problems.push(`${key}.${child}: not named under the heading "${section.heading}"`);
    }
  }
  for (const section of sections) {
    for (const name of section.named) if (!topLevel.includes(name)) problems.push(`heading "${section.heading}" names ${name}, which is no key of the config`);
  }
  return problems;
}

const schema = configJsonSchema() as JsonSchema;

test(`${PAGE} names every key of the config, two levels deep, under its key's heading`, () => {
  expect(problemsOf(schema, readFileSync(path.join(ROOT, PAGE), 'utf8'))).toEqual([]);
});

test('the keys come from the schema, records, arrays and unions included', () => {
  const top = keysOf(schema);
  expect(top).toEqual(expect.arrayContaining(['$schema', 'profile', 'limits', 'worker', 'gates', 'agents', 'notify', 'customGates', 'run']));
  // A record of gates: the gates' names and the settings of each.
  expect(keysOf(schema.properties!.gates!)).toEqual(expect.arrayContaining(['merge', 'blast-radius', 'timeout', 'minRisk']));
  // A record of a union of agent kinds: every kind's fields.
  expect(keysOf(schema.properties!.agents!)).toEqual(expect.arrayContaining(['kind', 'scriptPath', 'command', 'upstream', 'apiKeyEnv']));
  // An array of a union of channels.
  expect(keysOf(schema.properties!.notify!)).toEqual(expect.arrayContaining(['kind', 'urlEnv', 'secretEnv']));
});

test('the check itself finds what it looks for', () => {
  const small: JsonSchema = {
    properties: {
      limits: { properties: { budgetUsd: {}, cooldown: {} } },
      serve: { properties: { host: {} } },
    },
  };
  const page = [
    '# Configuration',
    '### `limits`',
    'The `budgetUsd` of an intent.',
    '```json',
    '{ "limits": { "cooldown": "60s" } }',
    '```',
    '### `serve` and `telemetry`',
    'Where it listens (`host` is named in the next section only).',
  ].join('\n');
  expect(problemsOf(small, page)).toEqual(['heading "`serve` and `telemetry`" names telemetry, which is no key of the config']);
  const missing = page.replace('The `budgetUsd` of an intent.', 'The budget of an intent.').replace('### `serve` and `telemetry`', '### Serving');
  expect(problemsOf(small, missing)).toEqual(['limits.budgetUsd: not named under the heading "`limits`"', 'serve: no heading names it']);
});
