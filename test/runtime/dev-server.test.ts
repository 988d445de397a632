import { execFile, spawn } from 'node:child_process';
import { accessSync, constants, statSync } from 'node:fs';
import { chmod, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Connection } from '@temporalio/client';
import type { DevServer } from '../../src/runtime/dev-server';
import { DEV_SERVER_DYNAMIC_CONFIG, isTemporalReachable, startDevServer } from '../../src/runtime/dev-server';
import { ensureTemporalCli, findTemporalCli } from '../../src/runtime/temporal-cli';
import { SEARCH_ATTRIBUTE_DEFINITIONS } from '../../src/shared/search-attributes';

const execFileAsync = promisify(execFile);
const repoRoot = path.resolve(__dirname, '..', '..');
const wardenHome = path.join(repoRoot, '.warden');

/** PATH without folders holding a `temporal`, so the lookup falls through to <wardenHome>/tools. */
function pathWithoutTemporal(): string {
  return (process.env.PATH ?? '')
    .split(path.delimiter)
    .filter((dir) => {
      try {
        accessSync(path.join(dir, 'temporal'), constants.X_OK);
        return false;
      } catch {
        return true;
      }
    })
    .join(path.delimiter);
}

/** Environment that makes ensureTemporalCli use (or create) the install under .warden/tools. */
function toolsOnlyEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, PATH: pathWithoutTemporal() };
  delete env.TEMPORAL_CLI_PATH;
  return env;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function listCustomSearchAttributes(server: DevServer): Promise<Record<string, number>> {
  const connection = await Connection.connect({ address: server.address });
  try {
    const res = await connection.operatorService.listSearchAttributes({ namespace: server.namespace });
    return Object.fromEntries(Object.entries(res.customAttributes ?? {}).map(([k, v]) => [k, Number(v)]));
  } finally {
    await connection.close();
  }
}

const KEYWORD = 2; // temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD

function expectWardenAttributes(attrs: Record<string, number>): void {
  for (const name of Object.keys(SEARCH_ATTRIBUTE_DEFINITIONS)) {
    expect(attrs[name]).toBe(KEYWORD);
  }
}

describe('Temporal CLI', () => {
  let cliPath: string;

  test('ensureTemporalCli returns an executable that answers --version', async () => {
    cliPath = await ensureTemporalCli({ wardenHome, env: toolsOnlyEnv() });
    expect(path.isAbsolute(cliPath)).toBe(true);
    expect(cliPath.startsWith(path.join(wardenHome, 'tools'))).toBe(true);
    accessSync(cliPath, constants.X_OK);
    const { stdout } = await execFileAsync(cliPath, ['--version']);
    expect(stdout).toMatch(/^temporal version \d+\.\d+\.\d+/);
  });

  test('a second ensureTemporalCli call finds the installed binary without reinstalling', async () => {
    const before = statSync(cliPath).mtimeMs;
    const messages: string[] = [];
    const again = await ensureTemporalCli({ wardenHome, env: toolsOnlyEnv(), log: (m) => messages.push(m) });
    expect(again).toBe(cliPath);
    // Nothing said (an install says what it fetches) and the file untouched: found, not installed.
    expect(messages).toEqual([]);
    expect((await stat(again)).mtimeMs).toBe(before);
  });

  test('TEMPORAL_CLI_PATH wins over everything else', async () => {
    const env = { ...toolsOnlyEnv(), TEMPORAL_CLI_PATH: cliPath };
    await expect(findTemporalCli({ wardenHome: '/nonexistent-warden-home', env })).resolves.toBe(cliPath);
  });

  test('TEMPORAL_CLI_PATH pointing at a missing file gives a clear error', async () => {
    const missing = path.join(os.tmpdir(), 'warden-no-such-temporal-binary');
    const env = { ...process.env, TEMPORAL_CLI_PATH: missing };
    await expect(ensureTemporalCli({ wardenHome, env })).rejects.toThrow(
      `TEMPORAL_CLI_PATH is set to ${missing}, but no file exists there`,
    );
  });

  test('TEMPORAL_CLI_PATH pointing at a non-executable file gives a clear error', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'warden-cli-'));
    try {
      const file = path.join(dir, 'temporal');
      await writeFile(file, 'not a binary');
      await chmod(file, 0o644);
      await expect(
        findTemporalCli({ wardenHome, env: { ...process.env, TEMPORAL_CLI_PATH: file } }),
      ).rejects.toThrow('is not an executable file');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('Temporal dev server', () => {
  let cliPath: string;
  let dir: string;
  const running: DevServer[] = [];

  beforeAll(async () => {
    cliPath = process.env.WARDEN_TEST_CLI_PATH ?? (await ensureTemporalCli({ wardenHome, env: process.env }));
    dir = await mkdtemp(path.join(os.tmpdir(), 'warden-dev-server-'));
  });

  afterAll(async () => {
    await Promise.all(running.map((s) => s.stop()));
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  async function start(dbFile: string, uiPort: number | false, log?: (m: string) => void): Promise<DevServer> {
    const server = await startDevServer({
      cliPath,
      dbFile,
      port: 0,
      uiPort,
      logFile: path.join(dir, 'server.log'),
      log,
    });
    running.push(server);
    return server;
  }

  test('starts on a db file with free ports, registers the search attributes, stops, and restarts', async () => {
    const dbFile = path.join(dir, 'nested', 'folder', 'temporal.db');

    const first = await start(dbFile, 0);
    expect(first.address).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(first.namespace).toBe('default');
    expect(first.uiUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(await isTemporalReachable(first.address)).toBe(true);
    expectWardenAttributes(await listCustomSearchAttributes(first));
    const ui = await fetch(first.uiUrl!);
    expect(ui.status).toBeLessThan(500);
    expect((await stat(dbFile)).isFile()).toBe(true);
    // Its history task readers run unthrottled (DEV_SERVER_DYNAMIC_CONFIG): ~50 ms less per workflow task.
    const commandLine = (await readFile(`/proc/${first.pid}/cmdline`, 'utf8')).split('\0');
    for (const [key, value] of Object.entries(DEV_SERVER_DYNAMIC_CONFIG)) {
      expect(commandLine[commandLine.indexOf(`${key}=${value}`) - 1]).toBe('--dynamic-config-value');
    }

    await first.stop();
    expect(isAlive(first.pid)).toBe(false);
    expect(await isTemporalReachable(first.address, 1000)).toBe(false);
    await first.stop(); // idempotent

    // Same db file, same --search-attribute flags: the CLI accepts them again.
    const messages: string[] = [];
    const second = await start(dbFile, false, (m) => messages.push(m));
    expect(messages.some((m) => m.startsWith('Registering search attributes'))).toBe(false);
    expect(second.uiUrl).toBeUndefined();
    expect(second.pid).not.toBe(first.pid);
    expectWardenAttributes(await listCustomSearchAttributes(second));
    await second.stop();
    expect(isAlive(second.pid)).toBe(false);
  });

  test('adds search attributes that an existing db file lacks', async () => {
    // The CLI applies --search-attribute only when it creates the namespace, so a db made
    // without them keeps lacking them unless startDevServer registers them itself.
    const dbFile = path.join(dir, 'bare.db');
    const port = await freePort();
    const bare = spawn(
      cliPath,
      ['server', 'start-dev', '--ip', '127.0.0.1', '--port', String(port), '--headless', '--db-filename', dbFile],
      { stdio: 'ignore' },
    );
    try {
      const deadline = Date.now() + 60_000;
      while (!(await isTemporalReachable(`127.0.0.1:${port}`, 1000))) {
        if (Date.now() > deadline) throw new Error('bare dev server did not come up');
        await new Promise((r) => setTimeout(r, 250));
      }
    } finally {
      const exited = new Promise((r) => bare.once('exit', r));
      bare.kill('SIGTERM');
      await exited;
    }

    const messages: string[] = [];
    const server = await start(dbFile, false, (m) => messages.push(m));
    expect(messages.some((m) => m.startsWith('Registering search attributes'))).toBe(true);
    expectWardenAttributes(await listCustomSearchAttributes(server));
    await server.stop();
  });

  test('rejects with the exit code and stderr tail when the server exits at once', async () => {
    const fake = path.join(dir, 'fake-temporal');
    const runs = path.join(dir, 'fake-runs');
    await writeFile(fake, `#!/bin/sh\necho run >> '${runs}'\necho "bind: address already in use" >&2\nexit 3\n`);
    await chmod(fake, 0o755);
    // "exited early", not a wait for the server that ran out: it did not wait for readiness.
    const messages: string[] = [];
    const failure = startDevServer({ cliPath: fake, port: 0, uiPort: false, log: (m) => messages.push(m) });
    await expect(failure).rejects.toThrow('Temporal dev server exited early (code 3)');
    await expect(failure).rejects.toThrow('bind: address already in use');
    // Free ports were asked for, so a port taken in the gap was retried, three times in all.
    expect((await readFile(runs, 'utf8')).split('\n').filter(Boolean)).toHaveLength(3);
    expect(messages.filter((m) => m.startsWith('a port was taken'))).toHaveLength(2);
  });

  test('a free port taken before the server binds it is replaced by other ones', async () => {
    // The first launch loses its port, as when another program binds it in the gap; the next is the real server.
    const flaky = path.join(dir, 'flaky-temporal');
    const lost = path.join(dir, 'flaky-lost');
    await writeFile(flaky, `#!/bin/sh\nif [ ! -e '${lost}' ]; then touch '${lost}'; echo "bind: address already in use" >&2; exit 1; fi\nexec '${cliPath}' "$@"\n`);
    await chmod(flaky, 0o755);
    const messages: string[] = [];
    const server = await startDevServer({ cliPath: flaky, port: 0, uiPort: false, log: (m) => messages.push(m) });
    running.push(server);
    expect(await isTemporalReachable(server.address)).toBe(true);
    expect(messages).toContain('a port was taken before the Temporal dev server could bind it; trying other ports');
    await server.stop();
    // A port asked for by number is not swapped.
    await rm(lost);
    await expect(startDevServer({ cliPath: flaky, port: await freePort(), uiPort: false })).rejects.toThrow('bind: address already in use');
  });

  test('a port the server picked for itself and lost is seen in its panic, however long the stack after it, and retried', async () => {
    // As the CLI panics when its HTTP or metrics port is taken in the gap: the panic's line, then
    // a stack trace far longer than the tail an error message keeps.
    const flaky = path.join(dir, 'panicky-temporal');
    const lost = path.join(dir, 'panicky-lost');
    const stack = Array.from({ length: 200 }, (_, i) => `go.uber.org/fx.(*module).invoke(0x${i})\n\t/go/pkg/mod/go.uber.org/fx@v1.24.0/module.go:335 +0x13b`).join('\n');
    await writeFile(flaky, `#!/bin/sh\nif [ ! -e '${lost}' ]; then touch '${lost}'; echo "panic: listen tcp 127.0.0.1:41234: bind: address already in use" >&2; printf '%s\\n' '${stack}' >&2; exit 2; fi\nexec '${cliPath}' "$@"\n`);
    await chmod(flaky, 0o755);
    const logFile = path.join(dir, 'panicky.log');
    const messages: string[] = [];
    const server = await startDevServer({ cliPath: flaky, port: 0, uiPort: false, logFile, log: (m) => messages.push(m) });
    running.push(server);
    expect(messages).toContain('a port was taken before the Temporal dev server could bind it; trying other ports');
    await server.stop();
    // With the port asked for by number it is not retried, and the error names the panic.
    await rm(lost);
    await expect(startDevServer({ cliPath: flaky, port: await freePort(), uiPort: false, logFile })).rejects.toThrow(
      'Temporal dev server exited early (code 2): panic: listen tcp 127.0.0.1:41234: bind: address already in use',
    );
  });

  test('refuses a port that is already in use', async () => {
    const blocker = net.createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', () => r()));
    const { port } = blocker.address() as net.AddressInfo;
    try {
      await expect(startDevServer({ cliPath, port, uiPort: false })).rejects.toThrow(`port ${port}`);
    } finally {
      await new Promise((r) => blocker.close(r));
    }
  });
});

describe('isTemporalReachable', () => {
  test('is false for a port nothing listens on', async () => {
    const port = await freePort();
    expect(await isTemporalReachable(`127.0.0.1:${port}`, 2000)).toBe(false);
  });

  test('is true for the suite-wide server from globalSetup', async () => {
    expect(process.env.TEMPORAL_ADDRESS).toBeTruthy();
    expect(await isTemporalReachable(process.env.TEMPORAL_ADDRESS!)).toBe(true);
  });
});
