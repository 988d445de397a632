import type pg from 'pg';

/**
 * The intents whose pull request a forge's webhook delivery is about, from the ledger's
 * PULL_REQUEST_OPENED / _UPDATED rows: by its number on the forge, or by its head commit. Newest
 * first. A delivery only wakes an intent to read its pull request, so a false match (two
 * repositories' pull request 7) costs a read and nothing more.
 */
export async function intentsWithPullRequest(pool: pg.Pool, about: { readonly number?: number; readonly headSha?: string }): Promise<string[]> {
  if (about.number === undefined && !about.headSha) return [];
  const { rows } = await pool.query<{ intent_id: string }>(
    `SELECT intent_id, max(seq) AS last FROM safety_events
      WHERE event_type IN ('PULL_REQUEST_OPENED', 'PULL_REQUEST_UPDATED') AND intent_id IS NOT NULL
        AND (($1::text IS NOT NULL AND metadata->>'number' = $1::text)
          OR ($2::text IS NOT NULL AND metadata->>'headSha' = $2::text))
      GROUP BY intent_id ORDER BY last DESC LIMIT 20`,
    [about.number === undefined ? null : String(about.number), about.headSha ?? null],
  );
  return rows.map((row) => row.intent_id);
}
