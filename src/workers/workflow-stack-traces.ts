import workerThreads from 'node:worker_threads';

/**
 * The SDK's workflow threads keep a stack trace of every promise workflow code creates, so that
 * a running workflow can answer the "stack trace" query (the Web UI's Call Stack tab,
 * `temporal workflow stack`). Each trace is an Error's stack mapped through the bundle's source
 * map: replaying Warden's recorded intent histories takes about twice the CPU with it as without
 * (see docs/benchmarks.md). Warden shows where an intent is by its own state (`warden status`,
 * the gates), so by default its workflow threads start without the hook; the stack-trace query
 * then answers that stack traces are not enabled on the worker.
 *
 * The SDK has no option for it. Its workflow thread installs the hook through one object of its
 * module `vm-shared`, so the thread is started with a line that replaces that object's
 * `setPromiseHook` with nothing before the SDK's own thread code loads (the SDK then runs as it
 * does where promise hooks do not exist). Only threads whose file is the SDK's workflow thread are
 * started so, and only while `create` runs.
 */
const SDK_WORKFLOW_DIR = require.resolve('@temporalio/worker/lib/workflow/vm-shared').replace(/vm-shared\.js$/, '');
const WORKFLOW_THREAD_FILE = `${SDK_WORKFLOW_DIR}workflow-worker-thread.js`;
const VM_SHARED_FILE = `${SDK_WORKFLOW_DIR}vm-shared.js`;

/** What the thread runs instead of the SDK's file: the switch, then the SDK's file itself. */
const THREAD_WITHOUT_PROMISE_HOOK = [
  `const { globalHandlers } = require(${JSON.stringify(VM_SHARED_FILE)});`,
  `if (globalHandlers && typeof globalHandlers.setPromiseHook === 'function') globalHandlers.setPromiseHook = () => {};`,
  `require(${JSON.stringify(WORKFLOW_THREAD_FILE)});`,
].join('\n');

/** Runs `create` (a workflow worker's creation), its workflow threads started without the promise hook. */
export async function withoutWorkflowStackTraces<T>(create: () => Promise<T>): Promise<T> {
  const Original = workerThreads.Worker;
  class WorkflowThread extends Original {
    constructor(filename: string | URL, options?: workerThreads.WorkerOptions) {
      if (filename === WORKFLOW_THREAD_FILE) super(THREAD_WITHOUT_PROMISE_HOOK, { ...options, eval: true });
      else super(filename, options);
    }
  }
  workerThreads.Worker = WorkflowThread;
  try {
    return await create();
  } finally {
    workerThreads.Worker = Original;
  }
}
