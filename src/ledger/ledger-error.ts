/** A state conflict no retry can fix (settling a released reservation, settling above the reservation, …). */
export class LedgerError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'LedgerError';
  }
}
