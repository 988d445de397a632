/** An answer's body that passed the most a reader takes. */
export class BodyTooLargeError extends Error {
  constructor(readonly maxBytes: number) {
    super(`the answer passed ${maxBytes} bytes`);
    this.name = 'BodyTooLargeError';
  }
}

/** The body as text, refusing it (BodyTooLargeError) once it passes `maxBytes`; the rest is not read. */
export async function readCapped(response: Response, maxBytes: number): Promise<string> {
  if (!response.body) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength;
    if (size > maxBytes) {
      await response.body.cancel().catch(() => undefined);
      throw new BodyTooLargeError(maxBytes);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}
