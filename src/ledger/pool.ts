import pg from 'pg';

/**
 * How long the ledger waits for PostgreSQL. A server that stops answering (paused, partitioned,
 * swapping) would otherwise hold a connection attempt or a query forever: activities would miss
 * their heartbeats and the CLI would hang. With these limits each try fails, and callers retry.
 */
export const LEDGER_TIMEOUTS = {
  /** To open a connection, or to get one from a full pool. */
  connectMs: 5_000,
  /** The server cancels a statement that runs longer (statement_timeout). */
  statementMs: 12_000,
  /** We stop waiting for an answer after this, even if the server never replies (query_timeout). */
  queryMs: 15_000,
  /** The server ends a session left inside a transaction, releasing its locks. */
  idleInTransactionMs: 60_000,
} as const;

/** The URL with its password (in the authority or a `password` parameter) replaced by `***`. */
export function redactDatabaseUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    if (parsed.searchParams.has('password')) parsed.searchParams.set('password', '***');
    return parsed.toString();
  } catch {
    return url.replace(/(\/\/[^:/@]+):[^@]*@/, '$1:***@');
  }
}

/** A pool on the ledger database with LEDGER_TIMEOUTS, whose lost connections are logged, not fatal. */
export function createLedgerPool(connectionString: string, applicationName: string, log: (m: string) => void): pg.Pool {
  const pool = new pg.Pool({
    connectionString,
    application_name: applicationName,
    Client: clientExplainingTimeouts(redactDatabaseUrl(connectionString)),
    connectionTimeoutMillis: LEDGER_TIMEOUTS.connectMs,
    statement_timeout: LEDGER_TIMEOUTS.statementMs,
    query_timeout: LEDGER_TIMEOUTS.queryMs,
    idle_in_transaction_session_timeout: LEDGER_TIMEOUTS.idleInTransactionMs,
    keepAlive: true,
  });
  // An idle client whose server went away emits 'error' on the pool; unhandled, that kills the process.
  pool.on('error', (error) => log(`ledger database connection lost: ${error.message}`));
  // So does a checked-out client between two queries (e.g. inside a transaction): its next query
  // fails and the caller retries, so the event itself only needs a listener.
  pool.on('connect', (client) => client.on('error', (error) => log(`ledger database connection lost: ${error.message}`)));
  return pool;
}

/** pg's message when query_timeout passes. */
const QUERY_READ_TIMEOUT = 'Query read timeout';

/**
 * pg.Client whose read timeout says which server did not answer, and for how long, instead of
 * pg's bare "Query read timeout": that is the one line a CLI user sees.
 */
function clientExplainingTimeouts(url: string): typeof pg.Client {
  const explain = (error: unknown): unknown => {
    if (error instanceof Error && error.message === QUERY_READ_TIMEOUT) {
      error.message = `the ledger database at ${url} did not answer within ${LEDGER_TIMEOUTS.queryMs / 1000} s (query timed out)`;
    }
    return error;
  };
  const query = pg.Client.prototype.query as (this: pg.Client, ...args: unknown[]) => unknown;
  class LedgerClient extends pg.Client {}
  // One implementation for all of pg's overloads (callback, promise, submittable); it only rewrites the error.
  LedgerClient.prototype.query = function (this: pg.Client, ...args: unknown[]): unknown {
    const last = args.length - 1;
    const callback = args[last];
    if (typeof callback === 'function') {
      args[last] = (error: unknown, result: unknown) => (callback as (e: unknown, r: unknown) => void)(explain(error), result);
      return query.apply(this, args);
    }
    const result = query.apply(this, args);
    return result instanceof Promise ? result.catch((error: unknown) => Promise.reject(explain(error))) : result;
  } as typeof pg.Client.prototype.query;
  return LedgerClient;
}
