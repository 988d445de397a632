/**
 * `npm run cluster:up` / `cluster:down` as a user runs them (src/runtime/cluster.ts), in a Warden
 * home of the test's own whose tools folder links the server the real-server test builds, against
 * the test run's embedded PostgreSQL (DATABASE_URL), on a free frontend port.
 *
 * @runs-last: it waits for the Temporal server build .ci/run starts in the background (test/setup/sequencer.js).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Connection } from '@temporalio/client';
import pg from 'pg';
import { isAlive } from '../../src/shared/build-lock';
import { findFreePort } from '../../src/shared/ports';
import { ensureTemporalServer } from '../../src/runtime/temporal-server-install';
import { TEMPORAL_DATABASES } from '../../src/runtime/temporal-cluster';

const execFileAsync = promisify(execFile);
const repoRoot = path.join(__dirname, '..', '..');

let home: string;
let env: NodeJS.ProcessEnv;

// A hang guard, not a bound: a build on a busy two-core machine took 13 minutes.
beforeAll(async () => {
  const install = await ensureTemporalServer({ log: (message) => process.stderr.write(`[temporal-server] ${message}\n`) });
  home = mkdtempSync(path.join(tmpdir(), 'warden-cluster-home-'));
  mkdirSync(path.join(home, 'tools'));
  symlinkSync(install.dir, path.join(home, 'tools', path.basename(install.dir)));
  const adminUrl = process.env.WARDEN_TEST_EMBEDDED_DATABASE_URL;
  if (!adminUrl) throw new Error('WARDEN_TEST_EMBEDDED_DATABASE_URL is not set: test/global-setup.ts starts the embedded PostgreSQL');
  env = { ...process.env, WARDEN_HOME: home, DATABASE_URL: adminUrl, TEMPORAL_NAMESPACE: 'default' };
}, 45 * 60_000);

afterAll(() => {
  if (home) rmSync(home, { recursive: true, force: true });
});

function cluster(...args: string[]): Promise<{ stdout: string; stderr: string }> {
  return execFileAsync(process.execPath, [require.resolve('tsx/cli'), path.join(repoRoot, 'src', 'runtime', 'cluster.ts'), ...args], { env, cwd: repoRoot });
}

async function databases(): Promise<string[]> {
  const client = new pg.Client({ connectionString: env.DATABASE_URL });
  await client.connect();
  try {
    const result = await client.query<{ datname: string }>('SELECT datname FROM pg_database WHERE datname = ANY($1) ORDER BY datname', [[TEMPORAL_DATABASES.database, TEMPORAL_DATABASES.visibilityDatabase]]);
    return result.rows.map((row) => row.datname);
  } finally {
    await client.end();
  }
}

test('cluster:up starts the server and says how to use it, a second up reuses it, down stops it, down --wipe drops its databases', async () => {
  const port = await findFreePort();
  const statePath = path.join(home, 'cluster', 'state.json');
  let pid: number | undefined;
  try {
    const first = await cluster('up', '--port', String(port));
    expect(first.stdout).toContain(`export TEMPORAL_ADDRESS=127.0.0.1:${port}`);
    expect(first.stdout).toContain('Web UI');
    pid = (JSON.parse(readFileSync(statePath, 'utf8')) as { pid: number }).pid;
    expect(isAlive(pid)).toBe(true);
    const connection = await Connection.connect({ address: `127.0.0.1:${port}` });
    try {
      const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace: 'default' });
      expect(Object.keys(customAttributes ?? {})).toEqual(expect.arrayContaining(['WardenStage', 'WardenStatus', 'WardenGate', 'WardenRepo']));
    } finally {
      await connection.close();
    }

    const second = await cluster('up', '--port', String(port));
    expect(second.stderr).toContain(`the Temporal server is already running (pid ${pid})`);

    await cluster('down');
    expect(isAlive(pid)).toBe(false);
    expect(existsSync(statePath)).toBe(false);
    expect(await databases()).toEqual([TEMPORAL_DATABASES.database, TEMPORAL_DATABASES.visibilityDatabase]);

    const wiped = await cluster('down', '--wipe');
    expect(wiped.stderr).toContain('dropped the databases');
    expect(await databases()).toEqual([]);

    await expect(cluster('down', '--bogus')).rejects.toMatchObject({ code: 2, stderr: 'warden: unknown argument for cluster:down: --bogus\n' });
  } finally {
    if (pid !== undefined && isAlive(pid)) process.kill(pid, 'SIGKILL');
  }
});
