import { waitFor } from '../helpers/env';
import { existsSync } from 'node:fs';
import { lstat, mkdtemp, readFile, realpath, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { openDatabase, redactDatabaseUrl, startEmbeddedPostgres, type LedgerDatabase } from '../../src/ledger/database';
import { handOverServer } from '../../src/ledger/embedded-owner';
import { processStartTicks } from '../../src/shared/process-identity';
import { findFreePort } from '../../src/shared/ports';
import { spawn } from 'node:child_process';
import { Ledger } from '../../src/ledger/ledger';
import { freshDatabase, describeOnBackends } from '../helpers/database';
import { safetyEvent } from './fixtures';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

describe('the embedded PostgreSQL (no DATABASE_URL)', () => {
  const dirs: string[] = [];
  const open: LedgerDatabase[] = [];
  const tempDir = async (): Promise<string> => {
    const dir = await mkdtemp(path.join(tmpdir(), 'warden-embedded-'));
    dirs.push(dir);
    return dir;
  };
  afterAll(async () => {
    for (const db of open) await db.close().catch(() => undefined);
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });

  test('starts in the data folder, is shared by a second process, and stops when the last one closes', async () => {
    const dataDir = await tempDir();
    const messages: string[] = [];
    const first = await openDatabase({ dataDir, log: (m) => messages.push(m) });
    open.push(first);
    expect(first.embedded).toBe(true);
    expect(first.server).toMatchObject({ startedHere: true, dataDir });
    const { pid, port } = first.server!;
    expect(first.url).toBe(`postgres://postgres:***@127.0.0.1:${port}/warden`);
    expect((await readFile(path.join(dataDir, 'warden-port'), 'utf8')).trim()).toBe(String(port));
    expect(messages.some((m) => m.startsWith('initialising the embedded PostgreSQL'))).toBe(true);
    // Migrated on open.
    const migrations = await first.pool.query('SELECT name FROM schema_migrations');
    expect(migrations.rows.map((r) => r.name)).toContain('001_initial');
    const event = safetyEvent({ intentId: 'kept' });
    expect(await new Ledger(first.pool).audit.recordSafetyEvent(event)).toBe(true);

    // Another Warden process on the same folder joins the running server instead of starting one.
    const second = await openDatabase({ dataDir });
    open.push(second);
    expect(second.server).toEqual({ pid, port, dataDir, startedHere: false });
    expect((await second.pool.query('SELECT count(*)::int AS n FROM safety_events')).rows[0].n).toBe(1);

    // The first one leaves: the server stays for the second.
    await first.close();
    expect(alive(pid)).toBe(true);
    expect((await second.pool.query('SELECT 1 AS ok')).rows[0].ok).toBe(1);

    // The last one leaves: the server stops and its port is free again.
    await second.close();
    expect(alive(pid)).toBe(false);
    expect(existsSync(path.join(dataDir, 'pgdata', 'postmaster.pid'))).toBe(false);
    expect(await portFree(port)).toBe(true);
    await second.close(); // idempotent

    // The data outlives the server; the next start reuses the initialised folder.
    const later: string[] = [];
    const third = await openDatabase({ dataDir, log: (m) => later.push(m) });
    open.push(third);
    expect(third.server!.startedHere).toBe(true);
    expect(later.some((m) => m.startsWith('initialising'))).toBe(false);
    const kept = await third.pool.query('SELECT reason FROM safety_events WHERE id = $1', [event.id]);
    expect(kept.rows).toHaveLength(1);
    await third.close();
    expect(alive(third.server!.pid)).toBe(false);
  });

  test('handed over to another process (the Temporal server of cluster:up), the server outlives every ledger until that process ends', async () => {
    const dataDir = await tempDir();
    const first = await openDatabase({ dataDir });
    open.push(first);
    const { pid } = first.server!;
    // Stands in for the Temporal server, which keeps its own databases on this PostgreSQL.
    const user = spawn('sleep', ['600'], { stdio: 'ignore' });
    const exited = new Promise((resolve) => user.once('exit', resolve));
    try {
      await handOverServer(dataDir, { pid: user.pid!, startTicks: processStartTicks(user.pid!)! }, 'temporal-server');
      await first.close();
      expect(alive(pid)).toBe(true);
      const joined = await openDatabase({ dataDir });
      open.push(joined);
      expect(joined.server).toMatchObject({ pid, startedHere: false });
      await joined.close();
      expect(alive(pid)).toBe(true);
    } finally {
      user.kill('SIGKILL');
      await exited;
    }
    // That process gone, the last ledger to close stops the server again.
    const last = await openDatabase({ dataDir });
    open.push(last);
    await last.close();
    expect(alive(pid)).toBe(false);
  });

  test('after a restart of the server, a process that joined it never stops it while its owner runs; the owner reconnects and stops it last', async () => {
    const dataDir = await tempDir();
    const messages: string[] = [];
    const owner = await openDatabase({ dataDir, port: 0, log: (m) => messages.push(m) });
    open.push(owner);
    const { pid, port } = owner.server!;
    // The server goes down and comes back (another program restarts it on its port).
    process.kill(pid, 'SIGINT');
    // The waits in this test are hang guards: each takes a second or two, more on a busy machine.
    await waitFor(() => (alive(pid) ? undefined : true), 120_000, 'the server to stop');
    const restarted = await startEmbeddedPostgres({ dataDir, port });
    // A short command joins it before the owner's connection is back, counts no other client,
    // and still leaves it running: the process that started it runs.
    const guest = await openDatabase({ dataDir, log: (m) => messages.push(m) });
    expect(guest.server!.startedHere).toBe(false);
    // Whatever the owner has reconnected by now goes again, and its presence cannot come back
    // until the guest has closed (the presence connections are on the postgres database): the
    // guest counts no one but itself. Without the lock, on a busy machine the owner's presence
    // was sometimes back, or not yet gone, when the guest counted.
    const { app } = JSON.parse(await readFile(path.join(dataDir, 'warden-owner.json'), 'utf8')) as { app: string };
    await guest.pool.query('ALTER DATABASE postgres ALLOW_CONNECTIONS false');
    await guest.pool.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [app]);
    await waitFor(
      async () => ((await guest.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = 'postgres' AND application_name = $1", [app])).rows[0]!.n === 0 ? true : undefined),
      120_000,
      "the owner's presence to be gone",
    );
    await guest.close();
    expect(alive(restarted.pid)).toBe(true);
    expect(messages).toContain(`leaving the embedded PostgreSQL (pid ${restarted.pid}) running: the Warden process that started it (pid ${process.pid}) still runs`);
    // The owner's pool comes back by itself (its database was never locked); then its presence.
    await waitFor(async () => ((await owner.pool.query('SELECT 1 AS ok').catch(() => undefined))?.rows[0].ok === 1 ? true : undefined), 120_000, 'the pool to recover');
    await owner.pool.query('ALTER DATABASE postgres ALLOW_CONNECTIONS true');
    await waitFor(
      async () => {
        const rows = await owner.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = 'postgres' AND application_name LIKE 'warden-%'");
        return rows.rows[0]!.n >= 1 ? true : undefined;
      },
      120_000,
      "the owner's presence to reconnect",
    );
    // The owner, last out, stops it.
    await owner.close();
    await waitFor(() => (alive(restarted.pid) ? undefined : true), 120_000, 'the owner to stop the server');
  });

  test('two processes opening a new folder at the same moment end up on one server', async () => {
    const dataDir = await tempDir();
    const [a, b] = await Promise.all([openDatabase({ dataDir, port: 0 }), openDatabase({ dataDir, port: 0 })]);
    open.push(a, b);
    expect(a.server!.pid).toBe(b.server!.pid);
    expect([a.server!.startedHere, b.server!.startedHere].sort()).toEqual([false, true]);
    await Promise.all([a.close(), b.close()]);
    // The last one out stops it. The postmaster takes a moment to exit, many on a busy machine:
    // two minutes is a hang guard, not a figure.
    await waitFor(() => (alive(a.server!.pid) ? undefined : true), 120_000, 'the embedded server to exit');
  });

  test('startEmbeddedPostgres can stop and restart a server mid-run; pools recover once it is back', async () => {
    const dataDir = await tempDir();
    const server = await startEmbeddedPostgres({ dataDir, port: 0 });
    const pool = new pg.Pool({ connectionString: server.url });
    pool.on('error', () => undefined);
    try {
      await pool.query('CREATE TABLE t (x int)');
      await pool.query('INSERT INTO t VALUES (42)');
      await server.stop();
      await server.stop(); // idempotent
      expect(alive(server.pid)).toBe(false);
      await expect(pool.query('SELECT 1')).rejects.toThrow();

      const again = await startEmbeddedPostgres({ dataDir, port: server.port });
      expect(again.url).toBe(server.url); // same password, same port
      try {
        expect((await pool.query('SELECT x FROM t')).rows).toEqual([{ x: 42 }]);
      } finally {
        await again.stop();
      }
    } finally {
      await pool.end().catch(() => undefined);
    }
  });

  const asRoot = process.getuid?.() === 0 ? test : test.skip;
  asRoot('as root, data below a folder the server user cannot enter is kept in /var/lib/warden/postgres, linked from the data folder', async () => {
    const closed = await tempDir(); // mkdtemp: 0700, like /root
    const dataDir = path.join(closed, 'home', 'postgres');
    const messages: string[] = [];
    const db = await openDatabase({ dataDir, port: 0, log: (m) => messages.push(m) });
    open.push(db);
    const link = path.join(dataDir, 'pgdata');
    const target = await realpath(link);
    try {
      expect((await lstat(link)).isSymbolicLink()).toBe(true);
      expect(target.startsWith('/var/lib/warden/postgres/')).toBe(true);
      expect(messages.some((m) => m.includes('is closed to the user postgres'))).toBe(true);
      const event = safetyEvent();
      await new Ledger(db.pool).audit.recordSafetyEvent(event);
      await db.close();
      const again = await openDatabase({ dataDir, port: 0 });
      open.push(again);
      expect((await again.pool.query('SELECT 1 FROM safety_events WHERE id = $1', [event.id])).rowCount).toBe(1);
      await again.close();
    } finally {
      await rm(path.dirname(target), { recursive: true, force: true });
    }
  });

  test('a port held by another program is refused when asked for, and avoided by default', async () => {
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const busy = (blocker.address() as net.AddressInfo).port;
    // Hold the default port too, unless something else already does (then that proves the same).
    const defaultBlocker = net.createServer();
    await new Promise<void>((resolve) => {
      defaultBlocker.once('error', () => resolve());
      defaultBlocker.listen(5433, '127.0.0.1', resolve);
    });
    try {
      await expect(openDatabase({ dataDir: await tempDir(), port: busy })).rejects.toThrow(`port ${busy} for the embedded PostgreSQL is in use`);
      const messages: string[] = [];
      const db = await openDatabase({ dataDir: await tempDir(), log: (m) => messages.push(m) });
      open.push(db);
      expect(db.server!.port).not.toBe(5433);
      expect(messages).toContain(`port 5433 is in use by another program; the embedded PostgreSQL takes port ${db.server!.port}`);
      await db.close();
    } finally {
      blocker.close();
      defaultBlocker.close();
    }
  });
  test('a free port another program takes before the server binds it is replaced by another one', async () => {
    // It hangs up on whoever calls, so closing it does not wait on the readiness probes' sockets.
    const thief = net.createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => thief.listen(0, '127.0.0.1', resolve));
    const stolen = (thief.address() as net.AddressInfo).port;
    const offered: number[] = [];
    // The first port offered is already held, as when another program binds it in the gap.
    const freePort = async (): Promise<number> => {
      const port = offered.length === 0 ? stolen : await findFreePort();
      offered.push(port);
      return port;
    };
    const messages: string[] = [];
    try {
      const server = await startEmbeddedPostgres({ dataDir: await tempDir(), port: 0, freePort, log: (m) => messages.push(m) });
      try {
        expect(offered[0]).toBe(stolen);
        expect(offered).toHaveLength(2);
        expect(server.port).toBe(offered[1]);
        expect(messages).toContain(`port ${stolen} was taken before the embedded PostgreSQL could bind it; trying another`);
        const client = new pg.Client({ connectionString: server.url });
        await client.connect();
        await client.end();
      } finally {
        await server.stop();
      }
      // A port asked for by number is not swapped: the error says why the server did not start.
      await expect(startEmbeddedPostgres({ dataDir: await tempDir(), port: stolen })).rejects.toThrow(/did not start[\s\S]*Address already in use/);
    } finally {
      await new Promise((resolve) => thief.close(resolve));
    }
  });
});

describeOnBackends('openDatabase with DATABASE_URL (%s PostgreSQL)', (baseUrl) => {
  test('uses that server, migrates it, and redacts the password', async () => {
    const fresh = await freshDatabase(baseUrl);
    try {
      const db = await openDatabase({ databaseUrl: fresh.url, dataDir: '/nonexistent/never-used' });
      try {
        expect(db.embedded).toBe(false);
        expect(db.server).toBeUndefined();
        expect(db.url).toBe(redactDatabaseUrl(fresh.url));
        expect(db.url).not.toContain(new URL(fresh.url).password);
        const tables = await db.pool.query(`SELECT count(*)::int AS n FROM schema_migrations`);
        expect(tables.rows[0].n).toBeGreaterThanOrEqual(1);
        // numeric stays an exact string.
        expect((await db.pool.query(`SELECT 0.1::numeric(14,6) + 0.2 AS usd`)).rows[0].usd).toBe('0.300000');
      } finally {
        await db.close();
      }
    } finally {
      await fresh.drop();
    }
  });
});

test('an unreachable DATABASE_URL is a clear error that does not print the password', async () => {
  const error = await openDatabase({ databaseUrl: 'postgres://warden:s3cret@127.0.0.1:1/warden', dataDir: '/nonexistent' }).then(
    () => new Error('opened'),
    (e: unknown) => e as Error,
  );
  expect(error.message).toMatch(/^could not connect to the PostgreSQL server at postgres:\/\/warden:\*\*\*@127\.0\.0\.1:1\/warden \(DATABASE_URL\)/);
  expect(error.message).not.toContain('s3cret');
});

test('redactDatabaseUrl hides passwords wherever they are', () => {
  expect(redactDatabaseUrl('postgres://u:p%40ss@h:5432/db?sslmode=require')).toBe('postgres://u:***@h:5432/db?sslmode=require');
  expect(redactDatabaseUrl('postgres://h/db?user=u&password=p')).toBe('postgres://h/db?user=u&password=***');
  expect(redactDatabaseUrl('postgres://u@h/db')).toBe('postgres://u@h/db');
});
