import { GlobalStopSet, GlobalStopWatch } from '../../src/activities/global-stop-watch';
import type { GlobalStop } from '../../src/ledger/types';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A flag to flip, and how often it was read. */
function flag() {
  const state = { stop: { stopped: false } as GlobalStop, reads: 0, fail: false };
  const read = async (): Promise<GlobalStop> => {
    state.reads += 1;
    if (state.fail) throw new Error('ledger unreachable');
    return state.stop;
  };
  return { state, read };
}

describe('GlobalStopWatch', () => {
  it('aborts every running call once the flag is set, with who set it and why', async () => {
    const { state, read } = flag();
    const watch = new GlobalStopWatch(read, 20);
    const aborted = (signal: AbortSignal) => new Promise<unknown>((resolve) => signal.addEventListener('abort', () => resolve(signal.reason), { once: true }));
    const calls = [watch.during(aborted), watch.during(aborted)];
    await sleep(60);
    state.stop = { stopped: true, by: 'ops', reason: 'drill', at: new Date() };
    const reasons = await Promise.all(calls);
    for (const reason of reasons) {
      expect(reason).toBeInstanceOf(GlobalStopSet);
      expect((reason as GlobalStopSet).message).toBe('global stop set by ops: drill');
    }
  });

  it('reads nothing while no call runs', async () => {
    const { state, read } = flag();
    const watch = new GlobalStopWatch(read, 10);
    await watch.during(() => sleep(50));
    const after = state.reads;
    expect(after).toBeGreaterThan(0);
    await sleep(60);
    expect(state.reads).toBe(after);
    // and starts again for the next call
    await watch.during(() => sleep(50));
    expect(state.reads).toBeGreaterThan(after);
  });

  it('skips a failed read and keeps watching', async () => {
    const { state, read } = flag();
    const watch = new GlobalStopWatch(read, 10);
    state.fail = true;
    const call = watch.during((signal) => new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true })));
    // It reads again after a failed read (every 10 ms; later on a busy machine, never not at all).
    while (state.reads < 2) await sleep(5);
    state.fail = false;
    state.stop = { stopped: true, by: 'ops', reason: 'back', at: new Date() };
    await expect(call).resolves.toBeDefined();
  });

  it('leaves a call alone while the flag is clear', async () => {
    const { read } = flag();
    const watch = new GlobalStopWatch(read, 5);
    await expect(watch.during(async (signal) => (await sleep(50), signal.aborted))).resolves.toBe(false);
  });
});
