import { RoundTripGroup } from '../../src/ledger/round-trip-group';

/** A `send` that holds each round trip until the test lets it go, and remembers what each carried. */
function heldTrips(answer: (request: number) => number = (n) => n * 10) {
  const trips: number[][] = [];
  const held: Array<() => void> = [];
  const failing = new Set<number>();
  const group = new RoundTripGroup<number, number>(async (requests) => {
    trips.push([...requests]);
    await new Promise<void>((resolve) => held.push(resolve));
    if (requests.some((r) => failing.has(r))) throw new Error(`request ${requests.find((r) => failing.has(r))} is refused`);
    return requests.map(answer);
  });
  const letGo = async (): Promise<void> => {
    while (held.length === 0) await new Promise((resolve) => setImmediate(resolve));
    held.shift()!();
    await new Promise((resolve) => setImmediate(resolve));
  };
  return { group, trips, failing, letGo };
}

test('a lone request goes at once; requests made meanwhile wait and go together in the next round trip', async () => {
  const { group, trips, letGo } = heldTrips();
  const first = group.run(1);
  expect(trips).toEqual([[1]]);
  const later = [group.run(2), group.run(3), group.run(4)];
  // None of them rides on the round trip already under way.
  expect(trips).toEqual([[1]]);
  await letGo();
  expect(await first).toBe(10);
  expect(trips).toEqual([[1], [2, 3, 4]]);
  await letGo();
  expect(await Promise.all(later)).toEqual([20, 30, 40]);
  // Idle again: the next request goes at once.
  const next = group.run(5);
  expect(trips).toEqual([[1], [2, 3, 4], [5]]);
  await letGo();
  expect(await next).toBe(50);
});

test('when a shared round trip fails, each request is sent alone and fails only for its own reasons', async () => {
  const { group, trips, failing, letGo } = heldTrips();
  failing.add(3);
  const first = group.run(1);
  const together = [group.run(2), group.run(3), group.run(4)].map((p) => p.then((n) => ({ n }), (error: Error) => ({ error: error.message })));
  await letGo();
  await first;
  for (let i = 0; i < 4; i++) await letGo();
  expect(await Promise.all(together)).toEqual([{ n: 20 }, { error: 'request 3 is refused' }, { n: 40 }]);
  expect(trips).toEqual([[1], [2, 3, 4], [2], [3], [4]]);
});
