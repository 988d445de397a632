import { DefaultPayloadConverter, type Payload, type PayloadConverter } from '@temporalio/common';
import { UNDECODABLE_PAYLOAD, type UndecodablePayload } from '../shared/undecodable';

/*
 * The worker's payload converter: Temporal's default one, except that a payload it cannot decode
 * (an unknown encoding, `json/plain` that is not JSON) becomes a marker value instead of an error.
 * Anyone who can reach the namespace can send a signal in any encoding (the Web UI, `temporal
 * workflow signal`, raw gRPC); with the default converter such a signal fails the workflow task
 * on every attempt and the intent stops answering, stops included. With this one the signal's
 * handler gets the marker and refuses it like any invalid decision.
 */

const MAX_DETAIL = 200;

class TolerantPayloadConverter implements PayloadConverter {
  private readonly inner = new DefaultPayloadConverter();

  toPayload<T>(value: T): Payload {
    return this.inner.toPayload(value);
  }

  fromPayload<T>(payload: Payload): T {
    try {
      return this.inner.fromPayload<T>(payload);
    } catch (error) {
      const marker: UndecodablePayload = { [UNDECODABLE_PAYLOAD]: `${encodingOf(payload)}: ${String((error as Error)?.message ?? error).slice(0, MAX_DETAIL)}` };
      return marker as T;
    }
  }
}

/** The payload's encoding as printable text; never throws (its bytes may come from another realm, or be anything). */
function encodingOf(payload: Payload): string {
  try {
    const raw = payload?.metadata?.encoding as ArrayLike<number> | null | undefined;
    if (!raw || typeof raw.length !== 'number') return 'no encoding';
    let text = '';
    for (let i = 0; i < Math.min(raw.length, 40); i++) {
      const byte = Number(raw[i]);
      text += byte >= 0x20 && byte < 0x7f ? String.fromCharCode(byte) : '?';
    }
    return `encoding "${text}"`;
  } catch {
    return 'an unreadable encoding';
  }
}

export const payloadConverter = new TolerantPayloadConverter();
