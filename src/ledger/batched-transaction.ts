import pg from 'pg';
import { beginStatement, onPooledClient, type TransactionOptions } from './transaction';

/** A parameter as the ledger's statements pass them. */
export type Literal = string | number | boolean | Date | null | undefined;

/** A statement and its parameters (`$1`, `$2`, … in its text), as `client.query(text, values)` takes them. */
export interface Statement {
  readonly text: string;
  readonly values?: readonly Literal[];
}

/**
 * The statement with each `$n` written as a quoted literal of its parameter (NULL for null), so
 * that several statements can go to the server as one simple query. A quoted literal has no type
 * until its context gives one, as a parameter has none, so casts and column types decide as they
 * would for the parameter. The text must hold no `$` but its parameters' (no dollar quoting).
 */
export function inlined(statement: Statement | string): string {
  if (typeof statement === 'string') return statement;
  const values = statement.values ?? [];
  return statement.text.replace(/\$(\d+)/g, (_match, digits: string) => {
    const index = Number(digits) - 1;
    if (index < 0 || index >= values.length) throw new RangeError(`statement refers to $${digits} but has ${values.length} parameter(s)`);
    return literalOf(values[index]);
  });
}

function literalOf(value: Literal): string {
  if (value === null || value === undefined) return 'NULL';
  if (value instanceof Date) return pg.escapeLiteral(value.toISOString());
  if (typeof value === 'number' && !Number.isFinite(value)) throw new RangeError(`${value} is not a number the ledger stores`);
  return pg.escapeLiteral(String(value));
}

/**
 * A transaction whose BEGIN travels with its first statements and whose COMMIT with its last, in
 * one round trip each (the simple query protocol sends several statements together, and the
 * server runs them in order, each after the one before has finished and with a snapshot of its
 * own): a transaction of a read and a write costs two round trips instead of four. Statements in
 * between go one at a time through `client`.
 */
export class BatchedTransaction {
  private opened = false;
  private committed = false;

  constructor(
    /** For the statements between the first and the last (they are sent on their own). */
    readonly client: pg.PoolClient,
    private readonly begin: string,
  ) {}

  /** BEGIN and `statements`, in one round trip; the statements' results, in order. */
  async open(statements: ReadonlyArray<Statement | string>): Promise<pg.QueryResult[]> {
    if (this.opened) throw new Error('the transaction is already open');
    this.opened = true;
    return this.send([this.begin, ...statements], statements.length);
  }

  /** `statements` and COMMIT, in one round trip; the statements' results, in order. */
  async commit(statements: ReadonlyArray<Statement | string> = []): Promise<pg.QueryResult[]> {
    if (!this.opened || this.committed) throw new Error('commit needs an open transaction');
    this.committed = true;
    const results = await this.send([...statements, 'COMMIT'], statements.length + 1);
    return results.slice(0, statements.length);
  }

  /** Whether the transaction was opened and still needs its COMMIT. */
  get awaitsCommit(): boolean {
    return this.opened && !this.committed;
  }

  private async send(statements: ReadonlyArray<Statement | string>, last: number): Promise<pg.QueryResult[]> {
    const sent: unknown = await this.client.query(statements.map(inlined).join(';\n'));
    // One statement answers with a result, several with one per statement (BEGIN and SET included).
    const results = (Array.isArray(sent) ? sent : [sent]) as pg.QueryResult[];
    return results.slice(results.length - last);
  }
}

/**
 * Runs `fn` in a BatchedTransaction on one pooled client: `fn` opens it with its first statements
 * and may commit it with its last; if it returns without committing, COMMIT is sent on its own.
 * ROLLBACK on error (also when the error came from a batch, which leaves the transaction
 * aborted), and the client is dropped if even that fails. `synchronousCommit: false` as for
 * `inTransaction`: not for ledger records.
 */
export async function inBatchedTransaction<T>(pool: pg.Pool, fn: (tx: BatchedTransaction) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
  return onPooledClient(pool, async (client) => {
    const tx = new BatchedTransaction(client, beginStatement(options));
    const result = await fn(tx);
    if (tx.awaitsCommit) await tx.commit();
    return result;
  });
}
