import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/**
 * bin/checkout-loader.js, which `warden` in a checkout runs under: Warden's TypeScript goes
 * through tsx, the packages in node_modules through Node's own loader, as in the installed
 * package (tsx's loader would lex them, and keep the memory it lexed them in).
 */
const LOADER = path.resolve(__dirname, '../../bin/checkout-loader.js');

/** A package written as an ES module, and a TypeScript file beside node_modules, in a temp folder. */
function sampleFolder(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'warden-checkout-loader-'));
  const pkg = path.join(dir, 'node_modules', 'esm-probe');
  mkdirSync(pkg, { recursive: true });
  writeFileSync(path.join(pkg, 'package.json'), JSON.stringify({ name: 'esm-probe', type: 'module', main: 'index.js' }));
  writeFileSync(path.join(pkg, 'index.js'), 'export const x = 1;\n');
  writeFileSync(path.join(dir, 'source.ts'), 'const n: number = 2;\nexport const y: number = n;\n');
  return dir;
}

/** What a script run under `loaders` (files given to --require) prints. */
function runUnder(loaders: string[], script: string): { stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [...loaders.flatMap((l) => ['--require', l]), '-e', script], { encoding: 'utf8' });
  expect(result.status).toBe(0);
  return { stdout: result.stdout.trim(), stderr: result.stderr };
}

const PROBE = (dir: string) =>
  `const m = require(${JSON.stringify(path.join(dir, 'node_modules', 'esm-probe'))});
   const s = require(${JSON.stringify(path.join(dir, 'source.ts'))});
   console.log(JSON.stringify([Object.prototype.toString.call(m), m.x, s.y]));`;

test('a package is loaded by Node itself (an ES module package comes back as its module namespace), while TypeScript still runs through tsx', () => {
  const dir = sampleFolder();
  const { stdout, stderr } = runUnder([LOADER], PROBE(dir));
  expect(JSON.parse(stdout)).toEqual(['[object Module]', 1, 2]);
  expect(stderr).toBe('');
});

test('under tsx alone the same package would go through tsx (compiled to CommonJS): the probe tells the two apart', () => {
  const dir = sampleFolder();
  const { stdout } = runUnder([require.resolve('tsx/cjs')], PROBE(dir));
  expect(JSON.parse(stdout)).toEqual(['[object Object]', 1, 2]);
});
