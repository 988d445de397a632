import { SharedCircuitBreakers } from '../../src/ledger/shared-circuits';
import { SharedLimitStore, sharedLimitKey } from '../../src/ledger/shared-limits';
import { migratedDatabaseForFile } from '../helpers/database';
import { testDatabaseUrl } from '../helpers/env';

/**
 * The shared circuits and a call stopped before its endpoint answered (cancelled, or killed by a
 * stop): it is not recorded (a stop of a hundred intents would queue a hundred writes on one
 * row), and a probe it held is given back without judging the endpoint.
 */

class Stopped extends Error {}

const database = migratedDatabaseForFile(testDatabaseUrl);

function breakers(scope: string): SharedCircuitBreakers {
  return new SharedCircuitBreakers(new SharedLimitStore(database().pool), {
    scope,
    cacheMs: 0,
    consecutiveFailures: 2,
    coolDownMs: 0,
    probes: 1,
    probeIntervalMs: 0,
    isFailure: (error) => !(error instanceof Stopped),
    isUnanswered: (error) => error instanceof Stopped,
  });
}

async function row(scope: string, endpoint: string): Promise<{ state: { state: string; probe: unknown; counts: unknown[] } | null; updatedAt: Date } | undefined> {
  const { rows } = await database().pool.query<{ state: { state: string; probe: unknown; counts: unknown[] } | null; updated_at: Date }>('SELECT state, updated_at FROM shared_limits WHERE key = $1', [
    sharedLimitKey(scope, 'circuit', endpoint),
  ]);
  return rows[0] ? { state: rows[0].state, updatedAt: rows[0].updated_at } : undefined;
}

const stop = (): Promise<never> => Promise.reject(new Stopped('stopped by a person'));
const boom = (): Promise<never> => Promise.reject(new Error('502'));

test('a stopped call on a closed circuit writes nothing', async () => {
  const circuits = breakers('stopped-closed');
  await circuits.execute('e', () => 'answered');
  const before = await row('stopped-closed', 'e');
  expect(before?.state?.state).toBe('CLOSED');
  for (let i = 0; i < 3; i++) await expect(circuits.execute('e', stop)).rejects.toBeInstanceOf(Stopped);
  expect(await row('stopped-closed', 'e')).toEqual(before);
});

test('a stopped call breaks no run of failures', async () => {
  const circuits = breakers('stopped-run');
  await expect(circuits.execute('e', boom)).rejects.toThrow('502');
  await expect(circuits.execute('e', stop)).rejects.toBeInstanceOf(Stopped);
  await expect(circuits.execute('e', boom)).rejects.toThrow('502');
  expect((await circuits.status('e')).state).toBe('OPEN');
});

test('a stopped probe gives its slot back and leaves the circuit half-open; the next call probes', async () => {
  const circuits = breakers('stopped-probe');
  await expect(circuits.execute('e', boom)).rejects.toThrow('502');
  await expect(circuits.execute('e', boom)).rejects.toThrow('502');
  expect((await circuits.status('e')).state).toBe('OPEN');
  await expect(circuits.execute('e', stop)).rejects.toBeInstanceOf(Stopped);
  const after = await row('stopped-probe', 'e');
  expect(after?.state).toMatchObject({ state: 'HALF_OPEN', probe: null });
  await expect(circuits.execute('e', () => 'answered')).resolves.toBe('answered');
  expect((await circuits.status('e')).state).toBe('CLOSED');
});
