import { bundleWorkflowsApart } from '../../src/workers/workflow-bundle';
import { WORKFLOW_INTERCEPTOR_MODULES } from '../../src/workers/warden-worker';

jest.setTimeout(120_000);

test('bundles the workflows with the given interceptor modules in a child process', async () => {
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
