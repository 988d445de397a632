import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { launch, stopLauncher } from '../../src/activities/launcher';

const opts = () => ({ cwd: mkdtempSync(path.join(tmpdir(), 'warden-launcher-')), env: { ...process.env, WARDEN_PROBE: 'from the caller' }, maxBuffer: 1024 * 1024 });

/** The pid of the process that started `sh`, as sh sees it. */
async function parentOfLaunched(): Promise<number> {
  return Number((await launch('sh', ['-c', 'echo $PPID'], opts())).stdout.trim());
}

afterEach(() => stopLauncher());

test('runs the program from another, small process, with the cwd and environment it is given', async () => {
  const options = opts();
  const { stdout } = await launch('sh', ['-c', 'pwd; echo "$WARDEN_PROBE"; echo oops >&2'], options);
  expect(stdout.split('\n').slice(0, 2)).toEqual([options.cwd, 'from the caller']);
  const launcherPid = await parentOfLaunched();
  expect(launcherPid).not.toBe(process.pid);
  // The launcher's own memory, not the caller's, is what each fork copies.
  const rssKb = Number(/VmRSS:\s+(\d+)/.exec(execFileSync('cat', [`/proc/${launcherPid}/status`], { encoding: 'utf8' }))![1]);
  expect(rssKb).toBeLessThan(150 * 1024);
  // One launcher serves every call.
  expect(await parentOfLaunched()).toBe(launcherPid);
});

test("keeps execFile's contract: output and exit code of a failure, a string code when the program cannot run", async () => {
  const failed = await launch('sh', ['-c', 'echo out; echo err >&2; exit 3'], opts()).catch((e: unknown) => e);
  expect(failed).toMatchObject({ code: 3, stdout: 'out\n', stderr: 'err\n' });
  const missing = await launch('no-such-program-here', [], opts()).catch((e: unknown) => e);
  expect(missing).toMatchObject({ code: 'ENOENT' });
  const big = await launch('sh', ['-c', 'head -c 3000000 /dev/zero'], opts()).catch((e: unknown) => e);
  expect(big).toMatchObject({ code: 'ERR_CHILD_PROCESS_STDIO_MAXBUFFER' });
});

test('many calls at once are each answered with their own output', async () => {
  const outputs = await Promise.all(Array.from({ length: 50 }, (_, i) => launch('sh', ['-c', `echo ${i}`], opts())));
  expect(outputs.map((o) => o.stdout.trim())).toEqual(Array.from({ length: 50 }, (_, i) => String(i)));
});

test('a launcher that dies is replaced, and a call in flight when it died still gets its answer', async () => {
  const first = await parentOfLaunched();
  const inFlight = launch('sh', ['-c', 'sleep 0.5; echo done'], opts());
  await new Promise((resolve) => setTimeout(resolve, 100));
  expect(first).not.toBe(process.pid);
  process.kill(first, 'SIGKILL');
  expect((await inFlight).stdout).toBe('done\n');
  const second = await parentOfLaunched();
  expect(second).not.toBe(first);
});

test("writes the caller's input to the program's standard input, and can keep its output byte for byte", async () => {
  expect((await launch('cat', [], { ...opts(), input: 'fed in\n' })).stdout).toBe('fed in\n');
  const bytes = await launch('sh', ['-c', "printf '\\377\\303\\251'"], { ...opts(), encoding: 'latin1' });
  expect(Buffer.from(bytes.stdout, 'latin1')).toEqual(Buffer.from([0xff, 0xc3, 0xa9]));
  // A program that reads none of it still answers.
  expect((await launch('true', [], { ...opts(), input: 'x'.repeat(1 << 20) })).stdout).toBe('');
});
