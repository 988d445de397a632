import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { migrate } from '../../src/ledger/migrate';
import { skipMarker } from '../setup/prerequisites';
import { isCi } from '../setup/system-packages';

/** A database of its own for one test file, on a shared test server. */
export interface FreshDatabase {
  /** Its URL, password included. */
  readonly url: string;
  readonly name: string;
  readonly pool: pg.Pool;
  /** Ends the pool and drops the database (WITH (FORCE): stray connections go too). */
  drop(): Promise<void>;
}

/**
 * The PostgreSQL servers the ledger tests run against, the embedded one first: always the
 * embedded one that test/global-setup.ts starts, and the server in WARDEN_TEST_DATABASE_URL
 * (which the setup starts from Debian's PostgreSQL when none is given). In CI (CI=true) that
 * server is required: a run that quietly tested one backend would pass for one that tested both.
 */
export function testBackends(env: NodeJS.ProcessEnv = process.env): Array<[name: string, baseUrl: string]> {
  const embedded = env.WARDEN_TEST_EMBEDDED_DATABASE_URL;
  if (!embedded) throw new Error('WARDEN_TEST_EMBEDDED_DATABASE_URL is not set: test/global-setup.ts starts the embedded PostgreSQL');
  const backends: Array<[string, string]> = [['embedded', embedded]];
  const external = env.WARDEN_TEST_DATABASE_URL;
  if (external) backends.push(['server', external]);
  else if (isCi(env)) throw new Error('CI is set but WARDEN_TEST_DATABASE_URL is not: the ledger tests must also run on a PostgreSQL server');
  return backends;
}

/**
 * One describe block per backend (`%s` in the title is its name). Where the setup could not have
 * a PostgreSQL server, the server's block is there but skipped, so the run's summary counts it
 * and says what to install.
 */
export function describeOnBackends(title: string, body: (baseUrl: string, backend: string) => void): void {
  for (const [name, baseUrl] of testBackends()) describe(title.replace('%s', name), () => body(baseUrl, name));
  if (!process.env.WARDEN_TEST_DATABASE_URL) {
    describe.skip(`${title.replace('%s', 'server')} ${skipMarker('postgresql')}`, () => body('postgres://unavailable/', 'server'));
  }
}

/**
 * Creates an empty database with a unique name on the server of `baseUrl` (whose user may
 * CREATE DATABASE) and opens a pool on it. Nothing is migrated.
 */
export async function freshDatabase(baseUrl: string, options: { max?: number } = {}): Promise<FreshDatabase> {
  const name = `warden_test_${process.pid}_${Date.now().toString(36)}_${randomBytes(3).toString('hex')}`;
  await admin(baseUrl, (client) => client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`));
  const url = withDatabase(baseUrl, name);
  const pool = new pg.Pool({ connectionString: url, max: options.max ?? 10 });
  // A test that stops the server must not crash the run through a client's error event, idle
  // or checked out: the queries fail, which is what the test looks at.
  pool.on('error', () => undefined);
  pool.on('connect', (client) => client.on('error', () => undefined));
  let dropped: Promise<void> | undefined;
  return {
    url,
    name,
    pool,
    drop: () =>
      (dropped ??= (async () => {
        await pool.end().catch(() => undefined);
        await admin(baseUrl, (client) => client.query(`DROP DATABASE IF EXISTS ${client.escapeIdentifier(name)} WITH (FORCE)`));
      })()),
  };
}

/**
 * A migrated database of its own for the calling test file, on the server of `baseUrl()`: made
 * before the file's tests, dropped after them. Returns its getter.
 */
export function migratedDatabaseForFile(baseUrl: () => string): () => FreshDatabase {
  let database: FreshDatabase | undefined;
  beforeAll(async () => {
    database = await freshDatabase(baseUrl());
    await migrate(database.pool);
  });
  afterAll(async () => {
    await database?.drop();
  });
  return () => database!;
}

/** `url` pointing at another database of the same server. */
export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

async function admin(baseUrl: string, fn: (client: pg.Client) => Promise<unknown>): Promise<void> {
  const client = new pg.Client({ connectionString: baseUrl });
  await client.connect();
  try {
    await fn(client);
  } finally {
    await client.end();
  }
}
