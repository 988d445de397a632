import { OneAtATime } from '../../src/activities/one-at-a-time';

const tick = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('OneAtATime', () => {
  it('runs the calls of one key one after another, in call order', async () => {
    const queue = new OneAtATime();
    let running = 0;
    let most = 0;
    const order: number[] = [];
    await Promise.all(
      [5, 1, 3, 0, 2].map((ms, i) =>
        queue.run('repo', async () => {
          running++;
          most = Math.max(most, running);
          await tick(ms);
          order.push(i);
          running--;
        }),
      ),
    );
    expect(most).toBe(1);
    expect(order).toEqual([0, 1, 2, 3, 4]);
    expect(queue.busyKeys).toBe(0);
  });

  it('runs calls of different keys alongside each other', async () => {
    const queue = new OneAtATime();
    const started: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const a = queue.run('a', async () => {
      started.push('a');
      await gate;
    });
    const b = queue.run('b', async () => {
      started.push('b');
      await gate;
    });
    await tick(5);
    expect(started.sort()).toEqual(['a', 'b']);
    release();
    await Promise.all([a, b]);
  });

  it('gives a failure to its own caller and goes on with the next call', async () => {
    const queue = new OneAtATime();
    const failed = queue.run('repo', async () => {
      throw new Error('git died');
    });
    const next = queue.run('repo', async () => 'made');
    await expect(failed).rejects.toThrow('git died');
    await expect(next).resolves.toBe('made');
    expect(queue.busyKeys).toBe(0);
  });
});
