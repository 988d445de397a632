/**
 * Child-process entry of bundleWorkflowsApart: `workflow-bundler-main <out.js> [interceptor modules…]`
 * writes the bundle (its source map inline) to out.js.
 */
import { writeFile } from 'node:fs/promises';
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import { PAYLOAD_CONVERTER_PATH } from './payload-converter-path';

async function main(): Promise<void> {
  const [out, ...interceptorModules] = process.argv.slice(2);
  if (!out) throw new Error('usage: workflow-bundler-main <out.js> [interceptor modules…]');
  const bundle = await bundleWorkflowCode({
    workflowsPath: require.resolve('../workflows'),
    workflowInterceptorModules: interceptorModules,
    payloadConverterPath: PAYLOAD_CONVERTER_PATH,
    logger: new DefaultLogger('WARN'),
  });
  await writeFile(out, bundle.code);
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
