import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { LEDGER_TIMEOUTS, openDatabase, startEmbeddedPostgres, type EmbeddedPostgres, type LedgerDatabase } from '../../src/ledger/database';
import { parseProcStat } from '../../src/shared/proc-stat';

/** The server's processes: the postmaster and its children. */
async function serverProcesses(postmasterPid: number): Promise<number[]> {
  const pids: number[] = [postmasterPid];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => undefined);
    if (stat && parseProcStat(stat).ppid === postmasterPid) pids.push(Number(entry));
  }
  return pids;
}

/** How long `promise` takes to settle, and with what error. */
async function failureOf(promise: Promise<unknown>): Promise<{ ms: number; message: string }> {
  const started = Date.now();
  try {
    await promise;
  } catch (error) {
    return { ms: Date.now() - started, message: (error as Error).message };
  }
  throw new Error('expected it to fail');
}

describe('a PostgreSQL server that stops answering (SIGSTOP: connections accepted, nothing answered)', () => {
  let dataDir: string;
  let server: EmbeddedPostgres;
  let database: LedgerDatabase;
  let frozen: number[] = [];

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), 'warden-pg-frozen-'));
    server = await startEmbeddedPostgres({ dataDir, port: 0 });
    database = await openDatabase({ databaseUrl: server.url, dataDir });
    await database.pool.query('SELECT 1'); // one idle connection in the pool, opened before the freeze
    frozen = await serverProcesses(server.pid);
    for (const pid of frozen) process.kill(pid, 'SIGSTOP');
  });
  afterAll(async () => {
    for (const pid of frozen) process.kill(pid, 'SIGCONT');
    await database?.close();
    await server?.stop();
    await rm(dataDir, { recursive: true, force: true });
  });

  test('a query fails after the query timeout, naming the server, and a new connection after the connect timeout', async () => {
    const [query, connect] = await Promise.all([
      failureOf(database.pool.query('SELECT count(*) FROM schema_migrations')),
      failureOf(openDatabase({ databaseUrl: server.url, dataDir })),
    ]);
    expect(query.message).toBe(`the ledger database at ${database.url} did not answer within ${LEDGER_TIMEOUTS.queryMs / 1000} s (query timed out)`);
    // Not before the timeout; after it, the message says it was the timeout that ended the wait
    // (without one the query would wait for ever: the test's own timeout then fails it).
    expect(query.ms).toBeGreaterThanOrEqual(LEDGER_TIMEOUTS.queryMs - 100);
    // What a CLI command shows: one line, the password left out.
    expect(connect.message).toMatch(/^could not connect to the PostgreSQL server at postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:\d+\/postgres \(DATABASE_URL\): .*timeout/);
    expect(connect.message).not.toContain('\n');
    expect(connect.ms).toBeGreaterThanOrEqual(LEDGER_TIMEOUTS.connectMs - 100);
  });

  test('once the server answers again, the same pool works', async () => {
    for (const pid of frozen) process.kill(pid, 'SIGCONT');
    frozen = [];
    const result = await database.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM schema_migrations');
    expect(result.rows[0]!.n).toBeGreaterThan(0);
  });
});
