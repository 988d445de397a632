import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, Worker, bundleWorkflowCode } from '@temporalio/worker';
import { safetyProbe } from './fixtures/safety-probe';
import type { safetyProbeWorkflow } from './fixtures/safety-workflow';

const SRC = path.resolve(__dirname, '../../src');
/** Modules the workflow code may run, by their path under src/. */
const WORKFLOW_SAFE = [
  'safety/behaviour-monitor',
  'safety/cascade-detector',
  'safety/cascade-acts',
  'safety/cascade-text',
  'safety/cascade-model',
  'safety/cascade-other-languages',
  'safety/error-rate',
  'safety/limits',
  'shared/money',
  'safety/pricing',
  'safety/token-bucket',
  'safety/circuit-state',
];
/** Data the workflow-safe modules may import: JSON, which the bundler inlines. */
const WORKFLOW_SAFE_DATA = ['safety/cascade-training.json'];
const NOT_WORKFLOW_SAFE = ['safety/circuit-breaker', 'safety/behaviour-watch', 'safety/rate-limits', 'safety/error-rate-window'];

function source(name: string): string {
  return readFileSync(path.join(SRC, `${name}.ts`), 'utf8');
}

describe('workflow safety of the safety layers', () => {
  it.each(WORKFLOW_SAFE)('%s says it is workflow-safe and imports only workflow-safe modules or types', (name) => {
    const text = source(name);
    expect(text.slice(0, 1_500)).toMatch(/Workflow-safe:/);
    const imports = [...text.matchAll(/^import\s+(type\s+)?[^;]*?from\s+'([^']+)';/gms)].map((m) => ({ typeOnly: Boolean(m[1]), from: m[2] }));
    for (const { typeOnly, from } of imports) {
      if (typeOnly) continue;
      const target = path.relative(SRC, path.resolve(SRC, path.dirname(name), from));
      if (from.endsWith('.json')) {
        expect(WORKFLOW_SAFE_DATA).toContain(target);
        continue;
      }
      expect(from).toMatch(/^\.\.?\/[a-z-/]+$/);
      expect(WORKFLOW_SAFE).toContain(target);
    }
    // No clocks, randomness, timers or process state inside.
    expect(text).not.toMatch(/\bDate\.now\(|\bnew Date\(|Math\.random|setTimeout|setInterval|\bprocess\.|\brequire\(/);
  });

  it.each(NOT_WORKFLOW_SAFE)('%s says it is not workflow-safe', (name) => {
    expect(source(name).slice(0, 500)).toMatch(/NOT workflow-safe/);
  });

  it('bundles for the workflow sandbox and computes there exactly what it computes in Node', async () => {
    // The bundler refuses Node built-ins and other non-deterministic imports in workflow code.
    const bundle = await bundleWorkflowCode({ workflowsPath: require.resolve('./fixtures/safety-workflow'), logger: new DefaultLogger('WARN') });
    expect(bundle.code).toContain('safetyProbeWorkflow');

    Runtime.install({ logger: new DefaultLogger('WARN') });
    const address = process.env.TEMPORAL_ADDRESS;
    if (!address) throw new Error('TEMPORAL_ADDRESS is not set: global-setup starts the dev server');
    const connection = await NativeConnection.connect({ address });
    const clientConnection = await Connection.connect({ address });
    try {
      const client = new Client({ connection: clientConnection, namespace: process.env.TEMPORAL_NAMESPACE ?? 'default' });
      const taskQueue = `safety-probe-${process.pid}-${Date.now()}`;
      const worker = await Worker.create({ connection, namespace: process.env.TEMPORAL_NAMESPACE ?? 'default', taskQueue, workflowBundle: bundle });
      const inSandbox = await worker.runUntil(
        client.workflow.execute<typeof safetyProbeWorkflow>('safetyProbeWorkflow', { taskQueue, workflowId: `safety-probe-${Date.now()}` }),
      );
      // Through JSON both ways: that is what the workflow result went through.
      expect(inSandbox).toEqual(JSON.parse(JSON.stringify(safetyProbe())));
    } finally {
      await clientConnection.close();
      await connection.close();
    }
  });
});
