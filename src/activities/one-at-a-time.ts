/**
 * Runs async work one call at a time per key, in call order; calls with different keys run
 * alongside each other. A failed call does not stop the ones queued behind it.
 */
export class OneAtATime {
  private readonly tails = new Map<string, Promise<void>>();

  run<T>(key: string, work: () => Promise<T>): Promise<T> {
    const result = (this.tails.get(key) ?? Promise.resolve()).then(work);
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }

  /** Keys with work running or queued. */
  get busyKeys(): number {
    return this.tails.size;
  }
}
