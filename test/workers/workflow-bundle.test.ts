import { mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { bundleWorkflowsApart, cachedBundlePath, sourceKey } from '../../src/workers/workflow-bundle';
import { WORKFLOW_INTERCEPTOR_MODULES } from '../../src/workers/warden-worker';

test('bundles the workflows with the given interceptor modules', async () => {
  const withGuard = await bundleWorkflowsApart(WORKFLOW_INTERCEPTOR_MODULES);
  expect(withGuard.code).toContain('intentWorkflow');
  expect(withGuard.code).toContain('installStageGuard');
  expect(withGuard.code).toContain('sourceMappingURL=data:application/json');

  // Without the interceptor modules (the overhead benchmark's "safety off"), the bundle has no
  // module that installs interceptors.
  const bare = await bundleWorkflowsApart([]);
  expect(bare.code).toContain('intentWorkflow');
  expect(bare.code).not.toContain('workflows/interceptors.ts');
  expect(withGuard.code).toContain('workflows/interceptors.ts');

  // Every cached workflow evaluates its own copy of the bundle's modules: zod and the intent
  // schemas would cost each one over 1 MB. They stay in the activities (see schema-primitives.ts).
  expect(withGuard.code).toContain('shared/decisions.ts');
  expect(withGuard.code).not.toMatch(/node_modules\/zod\//);
  expect(withGuard.code).not.toContain('shared/intent.ts');
  expect(withGuard.code).not.toContain('config/schema.ts');
});

test('a bundling failure says so, with the bundler output', async () => {
  await expect(bundleWorkflowsApart(['/nonexistent/interceptors.ts'])).rejects.toThrow(/bundling the workflow code failed \(exit 1\): .*nonexistent/s);
});

test('a bundle is kept under node_modules/.cache and used again while its sources stay the same', async () => {
  const first = await bundleWorkflowsApart(WORKFLOW_INTERCEPTOR_MODULES);
  const cached = await cachedBundlePath(WORKFLOW_INTERCEPTOR_MODULES);
  expect(cached).toMatch(/node_modules\/\.cache\/warden\/workflows-[0-9a-f]{24}\.js$/);
  expect(readFileSync(cached, 'utf8')).toBe(first.code);
  // A miss would bundle again and put a new file in its place (written beside it, then renamed).
  const { ino } = statSync(cached);
  expect((await bundleWorkflowsApart(WORKFLOW_INTERCEPTOR_MODULES)).code).toBe(first.code);
  expect(statSync(cached).ino).toBe(ino);
  // Another module list is another bundle.
  expect(await cachedBundlePath([])).not.toBe(cached);
});

test('the cache key changes with any file under src/, the lock file, the module list, or a listed module from outside src/', async () => {
  const root = mkdtempSync(path.join(tmpdir(), 'warden-bundle-key-'));
  mkdirSync(path.join(root, 'src', 'workflows'), { recursive: true });
  writeFileSync(path.join(root, 'src', 'workflows', 'a.ts'), 'export const a = 1;\n');
  writeFileSync(path.join(root, 'package-lock.json'), '{"lockfileVersion":3}\n');
  const keys = new Set<string>();
  const key = async (modules: string[] = []) => {
    const k = await sourceKey(modules, root);
    keys.add(k);
    return k;
  };
  const base = await key();
  expect(await key()).toBe(base); // stable
  writeFileSync(path.join(root, 'src', 'workflows', 'a.ts'), 'export const a = 2;\n');
  await key();
  writeFileSync(path.join(root, 'src', 'b.ts'), '\n');
  await key();
  writeFileSync(path.join(root, 'package-lock.json'), '{"lockfileVersion":3,"packages":{}}\n');
  await key();
  await key(['/some/interceptors.ts']);
  // A benchmark's own interceptor module, outside src/: its content is part of the bundle too.
  const outside = path.join(root, 'bench-interceptor.ts');
  writeFileSync(outside, 'export const x = 1;\n');
  await key([outside]);
  writeFileSync(outside, 'export const x = 2;\n');
  await key([outside]);
  expect(keys.size).toBe(7);
});
