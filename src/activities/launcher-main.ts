/**
 * The launcher's child process (see launcher.ts): runs each program it is sent with execFile and
 * sends back what it printed and how it ended. It imports nothing but Node, so it stays small,
 * and forking from it stays cheap. It ends when the process that started it goes away.
 */
import { execFile } from 'node:child_process';
import type { LaunchReply, LaunchRequest } from './launcher';

process.on('disconnect', () => process.exit(0));
// A Ctrl-C reaches the whole process group: the worker then shuts down gracefully, and its git
// calls in flight must still be answered. The launcher goes when the worker does (disconnect).
process.on('SIGINT', () => undefined);

process.on('message', (request: LaunchRequest) => {
  const child = execFile(request.file, [...request.args], { cwd: request.cwd, env: request.env, maxBuffer: request.maxBuffer, encoding: request.encoding ?? 'utf8' }, (error, stdout, stderr) => {
    const failure = error as (Error & { code?: number | string | null; signal?: string | null }) | null;
    const reply: LaunchReply = failure
      ? { id: request.id, stdout, stderr, code: failure.code ?? null, signal: failure.signal ?? null, message: failure.message }
      : { id: request.id, stdout, stderr, code: 0, signal: null };
    process.send?.(reply);
  });
  // A program that exits before reading all of it must not take the launcher down (EPIPE).
  child.stdin?.on('error', () => undefined);
  if (request.input !== undefined) child.stdin?.end(request.input);
});
