/** The most requests one round trip carries; more wait for the next. */
const MOST_PER_TRIP = 200;

interface Waiting<I, O> {
  readonly request: I;
  resolve(answer: O): void;
  reject(error: unknown): void;
}

/**
 * Requests of one kind that arrive while a round trip of that kind is under way wait for it to
 * end, then go together in the next: with many activities at once, their ledger work costs a
 * round trip per turn instead of one each, and a lone request goes at once, as it would alone.
 * No request is answered by a round trip that began before it was made, so a read is never older
 * than its request. When a shared round trip fails, each of its requests is sent again on its own,
 * so a request fails only for its own reasons.
 */
export class RoundTripGroup<I, O> {
  private waiting: Array<Waiting<I, O>> = [];
  private underWay = false;

  /** `send` answers its requests in their order, one answer each. */
  constructor(private readonly send: (requests: readonly I[]) => Promise<readonly O[]>) {}

  run(request: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.waiting.push({ request, resolve, reject });
      if (!this.underWay) void this.sendWaiting();
    });
  }

  private async sendWaiting(): Promise<void> {
    this.underWay = true;
    try {
      while (this.waiting.length > 0) {
        const turn = this.waiting.splice(0, MOST_PER_TRIP);
        if (turn.length === 1) await this.sendAlone(turn[0]!);
        else await this.sendTogether(turn);
      }
    } finally {
      this.underWay = false;
    }
  }

  private async sendTogether(turn: ReadonlyArray<Waiting<I, O>>): Promise<void> {
    let answers: readonly O[];
    try {
      answers = await this.send(turn.map((w) => w.request));
    } catch {
      for (const waiting of turn) await this.sendAlone(waiting);
      return;
    }
    turn.forEach((waiting, i) => waiting.resolve(answers[i]!));
  }

  private async sendAlone(waiting: Waiting<I, O>): Promise<void> {
    try {
      const [answer] = await this.send([waiting.request]);
      waiting.resolve(answer!);
    } catch (error) {
      waiting.reject(error);
    }
  }
}
