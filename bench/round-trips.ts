import type pg from 'pg';

/**
 * Counts the queries sent by every client `pool` hands out (pool.query checks one out too), from
 * the outside, so the ledger's code is measured as it is. A query is one round trip: pg sends the
 * extended protocol's messages of one query together and waits once, and a simple query of
 * several statements is sent and answered at once too. Opening a connection is not counted (the
 * pool keeps its connections).
 */
export function countRoundTrips(pool: pg.Pool): () => number {
  let count = 0;
  const counted = new WeakSet<pg.PoolClient>();
  pool.on('acquire', (client) => {
    if (counted.has(client)) return;
    counted.add(client);
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    client.query = ((...args: unknown[]) => {
      count += 1;
      return query(...args);
    }) as unknown as typeof client.query;
  });
  return () => count;
}
