import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  detectNewStubs,
  detectStubs,
  detectStubsInFiles,
  formatStubFindings,
  stubLanguage,
  type StubFinding,
} from '../../src/safety/stub-detector';

/** `line kind` pairs, in line order. */
function found(filePath: string, content: string): string[] {
  return detectStubs({ path: filePath, content }).map((f) => `${f.line} ${f.kind}`);
}

function lineOf(content: string, needle: string): number {
  const index = content.split('\n').findIndex((l) => l.includes(needle));
  if (index < 0) throw new Error(`no line with ${needle}`);
  return index + 1;
}

describe('TypeScript and JavaScript', () => {
  const positives: [string, string, StubFinding['kind']][] = [
    ['empty function', 'export function parseConfig(text: string): Config {}', 'empty-body'],
    ['empty method', 'class Uploader {\n  upload(file: Buffer): void {}\n}', 'empty-body'],
    ['empty arrow bound to a name', 'export const handleSubmit = (event: Event) => {};', 'empty-body'],
    ['empty function expression assigned', 'module.exports.slugify = function (text) {};', 'empty-body'],
    ['empty class field arrow', 'class A {\n  onSave = (doc: Doc) => {};\n}', 'empty-body'],
    ['empty setter', 'class A {\n  set value(v: number) {}\n}', 'empty-body'],
    ['throw not implemented', "function rateLimit(req: Request): boolean {\n  throw new Error('not implemented');\n}", 'not-implemented'],
    ['throw TS quick-fix message', "class A {\n  save(x: number): void {\n    throw new Error('Method not implemented.');\n  }\n}", 'not-implemented'],
    ['throw TODO', "const load = async (id: string) => {\n  throw new Error('TODO: load from disk');\n};", 'not-implemented'],
    ['throw NotImplementedError', 'function f(a: number) {\n  throw new NotImplementedError();\n}', 'not-implemented'],
    ['throw in one branch', "function f(kind: string) {\n  if (kind === 'a') return 1;\n  throw new Error(`not implemented: ${kind}`);\n}", 'not-implemented'],
    ['throw inside an object literal method', "export const api = {\n  get(id: string) {\n    throw new Error('unimplemented');\n  },\n};", 'not-implemented'],
    ['return null with an input', 'export function parse(input: string): Ast | null {\n  return null;\n}', 'trivial-return'],
    ['return [] from a work name', 'function findUsers(): User[] {\n  return [];\n}', 'trivial-return'],
    ['return {} with an input', 'function merge(a: object, b: object) {\n  return {};\n}', 'trivial-return'],
    ["return '' with an input", "const slugify = (text: string): string => {\n  return '';\n};", 'trivial-return'],
    ['concise arrow returning null', 'export const parseDate = (s: string) => null;', 'trivial-return'],
    ['async returning undefined', 'async function sync() {\n  return undefined;\n}', 'trivial-return'],
    ['bare return with input', 'function validate(x: unknown) {\n  return;\n}', 'trivial-return'],
    ['Promise.resolve(null)', 'function fetchUser(id: string) {\n  return Promise.resolve(null);\n}', 'trivial-return'],
    ['TODO comment', 'const x = 1; // TODO: real value', 'todo-marker'],
    ['FIXME block comment', '/* FIXME handle errors */\nexport const y = 2;', 'todo-marker'],
    ['HACK comment', '// HACK around the bug\nexport const z = 3;', 'todo-marker'],
    ['XXX comment', 'function f(a: number) {\n  // XXX wrong for negatives\n  return a * 2;\n}', 'todo-marker'],
    ['todo: lower case', 'let a = 1; // todo: remove', 'todo-marker'],
    ['JSX component with an empty handler', 'export function Form() {\n  const onSubmit = (e: unknown) => {};\n  return <form onSubmit={onSubmit} />;\n}', 'empty-body'],
  ];
  test.each(positives)('finds: %s', (_name, code, kind) => {
    const file = code.includes('<form') ? 'src/x.tsx' : 'src/x.ts';
    const findings = detectStubs({ path: file, content: code });
    expect(findings.map((f) => f.kind)).toContain(kind);
    const finding = findings.find((f) => f.kind === kind)!;
    expect(finding.severity).toBe('block');
    expect(finding.path).toBe(file);
    expect(finding.excerpt.length).toBeGreaterThan(0);
    expect(code.split('\n')[finding.line - 1]!.trim()).toBe(finding.excerpt);
  });

  const negatives: [string, string][] = [
    ['a real function', 'export function add(a: number, b: number): number {\n  return a + b;\n}'],
    ['empty catch with a comment', 'try {\n  run();\n} catch {\n  // best effort: the file may be gone\n}'],
    ['empty catch without a comment', 'try { run(); } catch (e) {}'],
    ['empty body that says why', 'export function dispose(): void {\n  /* nothing to release: no handles are held */\n}'],
    ['interface, abstract, declare and overload declarations', [
      'interface Store { get(id: string): Promise<Item | null>; }',
      'abstract class Base { abstract run(input: string): void; }',
      'declare function external(x: number): void;',
      'function over(a: string): string;',
      'function over(a: number): number;',
      'function over(a: unknown) { return a; }',
    ].join('\n')],
    ['noop functions named so', 'export function noop(): void {}\nconst ignoreErrors = (_e: unknown) => {};\nconst identity = (x: unknown) => x;\nfunction _noop(...args: unknown[]) {}'],
    ['callbacks passed as arguments', "promise.catch(() => {});\nprocess.on('SIGPIPE', () => {});\n[1, 2].forEach(function () {});"],
    ['object literal members (mocks, defaults)', 'const logger = { info() {}, warn: () => {}, child: () => logger, level: () => null };'],
    ['constructors with parameter properties', 'class A {\n  constructor(private readonly db: Db) {}\n}\nclass B {\n  private constructor() {}\n}'],
    ['trivial returns from functions that take nothing and promise nothing', 'function isEnabled() {\n  return null;\n}\nclass A {\n  get items() {\n    return [];\n  }\n  count() { return this.n; }\n}\nconst Empty = () => null;'],
    ['real errors that mention not implemented', "function compress(level: number) {\n  if (level > 9) throw new Error(`level ${level} is not implemented by this server`);\n  return level;\n}"],
    ['markers inside strings and JSX text are not comments', "const s = '// TODO not a comment';\nconst t = `/* FIXME */`;\nconst el = <p>// TODO: text</p>;"],
    ['words that contain marker letters', '// Hackathon notes; the todo list renders here\nconst xxxLarge = 1;'],
    ['a return of a real value', 'function pick(list: number[]) {\n  return list[0];\n}'],
    ['an empty body explained on its line', 'check.run = () => {}; // no-op check\nfunction SYNC() {} // eslint-disable-line no-empty-function'],
    ['parameters ignored on purpose', 'export function assertIs<T>(_arg: T): void {}\nclass U { fromPayload(_content: Payload) { return undefined; } }'],
  ];
  test.each(negatives)('does not flag: %s', (_name, code) => {
    const file = code.includes('<p>') ? 'src/x.tsx' : 'src/x.ts';
    expect(found(file, code)).toEqual([]);
  });

  test('JavaScript files go through the same AST', () => {
    const js = "'use strict';\nfunction slugify(text) {}\nmodule.exports = { slugify };\n";
    expect(found('lib/strings.js', js)).toEqual(['2 empty-body']);
    expect(found('lib/strings.mjs', 'export function parse(x) { return null; }')).toEqual(['1 trivial-return']);
  });

  test('a file that does not parse gives one warning, nothing else (fail-open)', () => {
    const broken = 'export function parse(input: string {\n  // TODO\n  return null;\n';
    const findings = detectStubs({ path: 'src/broken.ts', content: broken });
    expect(findings).toHaveLength(1);
    expect(findings[0]).toMatchObject({ kind: 'parse-failed', severity: 'warn', path: 'src/broken.ts' });
    expect(findings[0]!.message).toMatch(/could not parse .*not checked for stubs/);
  });

  test('test files: empty test bodies and markers only; fakes may do nothing or throw', () => {
    const spec = [
      "import { thing } from '../src/thing';",
      "const fake = { save() {}, load: () => { throw new Error('not implemented'); } };",
      'class FakeClock { now() { return 0; } tick(ms: number) {} }',
      "it('saves', () => {});",
      "test('loads', async () => {});",
      "it('really checks', () => {",
      '  expect(thing()).toBe(1);',
      '});',
      "it.todo('later');",
      '// TODO: cover errors',
    ].join('\n');
    expect(found('test/thing.test.ts', spec)).toEqual(['4 empty-body', '5 empty-body', '10 todo-marker']);
    expect(detectStubs({ path: 'test/thing.test.ts', content: spec })[0]!.message).toBe("test 'saves' has an empty body: it checks nothing");
  });

  test('the function is named in the message; lines are 1-based', () => {
    const code = "import x from 'y';\n\nexport class Limiter {\n  allow(key: string): boolean {\n    throw new Error('not implemented');\n  }\n}\n";
    const [finding] = detectStubs({ path: 'src/limiter.ts', content: code });
    expect(finding).toEqual({
      path: 'src/limiter.ts',
      line: lineOf(code, 'throw new Error'),
      kind: 'not-implemented',
      severity: 'block',
      excerpt: "throw new Error('not implemented');",
      message: "method allow throws Error('not implemented'): implement it",
    });
  });
});

describe('Python', () => {
  const positives: [string, string, StubFinding['kind']][] = [
    ['pass body', 'def rate_limit(request):\n    pass\n', 'pass-body'],
    ['pass after a docstring', 'def parse(text):\n    """Parse the text."""\n    pass\n', 'pass-body'],
    ['ellipsis body', 'class Store:\n    def save(self, item):\n        ...\n', 'ellipsis-body'],
    ['one-line pass', 'def handle(event): pass\n', 'pass-body'],
    ['raise NotImplementedError', 'def upload(path):\n    raise NotImplementedError\n', 'not-implemented'],
    ['raise NotImplementedError("...") in a branch', 'def convert(kind, value):\n    if kind == "a":\n        return value\n    raise NotImplementedError(f"kind {kind}")\n', 'not-implemented'],
    ['raise NotImplemented (the constant)', 'def f(x):\n    raise NotImplemented\n', 'not-implemented'],
    ['return None with an input', 'def parse(text):\n    return None\n', 'trivial-return'],
    ['return 0 from a work name', 'def compute_total():\n    return 0\n', 'trivial-return'],
    ['return "" with an input', "def slugify(text: str) -> str:\n    return ''\n", 'trivial-return'],
    ['return [] async', 'async def fetch_rows():\n    return []\n', 'trivial-return'],
    ['multi-line signature', 'def build(\n    a: int,\n    b: int = 2,\n) -> int:\n    return 0\n', 'trivial-return'],
    ['docstring only', 'def score(item):\n    """Scores the item.\n\n    More text.\n    """\n', 'empty-body'],
    ['# TODO', 'def f(a):\n    # TODO: handle b\n    return a * 2\n', 'todo-marker'],
    ['# FIXME trailing', 'x = compute()  # FIXME wrong units\n', 'todo-marker'],
    ['# HACK', '# HACK: monkeypatch\nimport os\n', 'todo-marker'],
  ];
  test.each(positives)('finds: %s', (_name, code, kind) => {
    const findings = detectStubs({ path: 'pkg/mod.py', content: code });
    expect(findings.map((f) => f.kind)).toContain(kind);
    const finding = findings.find((f) => f.kind === kind)!;
    expect(finding.severity).toBe('block');
    expect(code.split('\n')[finding.line - 1]!.trim()).toBe(finding.excerpt);
  });

  const negatives: [string, string][] = [
    ['a real function', 'def add(a, b):\n    """Adds."""\n    return a + b\n'],
    ['abstract methods', [
      'import abc',
      'class Base(abc.ABC):',
      '    @abc.abstractmethod',
      '    def run(self, x):',
      '        raise NotImplementedError',
      '',
      '    @abstractmethod',
      '    def stop(self):',
      '        pass',
    ].join('\n')],
    ['overloads', 'from typing import overload\n@overload\ndef f(x: int) -> int: ...\n@overload\ndef f(x: str) -> str: ...\ndef f(x):\n    return x\n'],
    ['Protocol members', 'class Store(Protocol):\n    def get(self, key: str) -> bytes: ...\n    def put(self, key: str, value: bytes) -> None:\n        pass\n'],
    ['class and except bodies with pass', 'class MyError(Exception):\n    pass\n\ntry:\n    run()\nexcept OSError:\n    pass\n'],
    ['noop named so, dunder methods', 'def noop(*args):\n    pass\n\ndef _sighandler_noop(signum, frame):\n    pass\n\nclass A:\n    def __init__(self):\n        pass\n    def __exit__(self, *exc):\n        pass\n'],
    ['overloads through a module alias', 'import typing as t\n@t.overload\ndef get(key: str) -> str: ...\n@t.overload\ndef get(key: int) -> int: ...\n'],
    ['trivial return from a function that takes nothing and promises nothing', 'def name():\n    return None\n\ndef is_ready():\n    return 0\n'],
    ['markers and pass inside strings', 's = "# TODO: not a comment"\nt = """\ndef f(x):\n    pass\n"""\n'],
    ['a method whose body is longer than one statement', 'class A:\n    def f(self, x):\n        if x:\n            pass\n        return x\n'],
  ];
  test.each(negatives)('does not flag: %s', (_name, code) => {
    expect(found('pkg/mod.py', code)).toEqual([]);
  });

  test('.pyi stub files: only markers', () => {
    expect(found('pkg/mod.pyi', 'def f(x: int) -> int: ...\n# TODO: types for g\n')).toEqual(['2 todo-marker']);
  });

  test('test files: empty tests and markers only', () => {
    const code = [
      'import pytest',
      'class FakeStore:',
      '    def get(self, key):',
      '        raise NotImplementedError',
      'def test_upload():',
      '    pass',
      'def test_download():',
      '    assert download() == b"x"',
      'def helper(x):',
      '    return None',
      '# FIXME: flaky',
    ].join('\n');
    expect(found('tests/test_io.py', code)).toEqual(['5 empty-body', '11 todo-marker']);
  });

  test('an unterminated string or bracket gives one warning (fail-open)', () => {
    for (const broken of ['def f(x:\n    return x\n', 'def f(x):\n    s = "abc\n    pass\n']) {
      const findings = detectStubs({ path: 'pkg/broken.py', content: broken });
      expect(findings).toHaveLength(1);
      expect(findings[0]).toMatchObject({ kind: 'parse-failed', severity: 'warn' });
    }
  });
});

describe('helpers', () => {
  test('languages by extension; other files give nothing', () => {
    expect(stubLanguage('a.tsx')).toBe('typescript');
    expect(stubLanguage('a.cjs')).toBe('typescript');
    expect(stubLanguage('a.py')).toBe('python');
    expect(stubLanguage('README.md')).toBeUndefined();
    expect(detectStubs({ path: 'README.md', content: 'TODO: write docs' })).toEqual([]);
  });

  test('detectNewStubs reports only the stubs a change added', () => {
    const before = '// TODO: old debt\nexport function a(x: number) { return x; }\n';
    const after = '// TODO: old debt\nexport function a(x: number) { return x; }\nexport function b(x: number) {}\n// TODO: old debt\n';
    expect(detectNewStubs({ path: 'src/a.ts', before, after }).map((f) => `${f.line} ${f.kind}`)).toEqual(['3 empty-body', '4 todo-marker']);
    expect(detectNewStubs({ path: 'src/a.ts', after }).map((f) => f.kind)).toEqual(['todo-marker', 'empty-body', 'todo-marker']);
  });

  test('detectStubsInFiles reads files and skips missing and foreign ones; formatStubFindings prints them', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'warden-stubs-'));
    writeFileSync(path.join(dir, 'a.py'), 'def parse(text):\n    pass\n');
    writeFileSync(path.join(dir, 'b.md'), 'TODO\n');
    const findings = await detectStubsInFiles(dir, ['a.py', 'b.md', 'gone.ts']);
    expect(findings.map((f) => `${f.path}:${f.line} ${f.kind}`)).toEqual(['a.py:1 pass-body']);
    expect(formatStubFindings(findings)).toBe('a.py:1: pass-body: function parse has only `pass`: implement it (if it is meant to do nothing, say so in a comment)\n    def parse(text):');
  });
});

test('the TypeScript compiler is loaded when a TypeScript or JavaScript file is first checked, not when the detector is, nor for a Python file', () => {
  const script = `
    const detector = require(${JSON.stringify(path.resolve(__dirname, '../../src/safety/stub-detector.ts'))});
    const compilerLoaded = () => Object.keys(require.cache).some((file) => file.includes('/node_modules/typescript/'));
    const seen = [compilerLoaded()];
    seen.push(detector.detectStubs({ path: 'calc.py', content: 'def add(a, b):\\n    raise NotImplementedError\\n' }).length, compilerLoaded());
    seen.push(detector.detectStubs({ path: 'calc.ts', content: "export function add(a: number, b: number): number {\\n  throw new Error('not implemented');\\n}\\n" }).length, compilerLoaded());
    console.log(JSON.stringify(seen));`;
  const run = spawnSync(process.execPath, ['--require', require.resolve('tsx/cjs'), '-e', script], { encoding: 'utf8' });
  expect(run.stderr).toBe('');
  expect(JSON.parse(run.stdout)).toEqual([false, 1, false, 1, true]);
});
