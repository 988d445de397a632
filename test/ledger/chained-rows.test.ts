import { canonicalContent, safetyEventRow } from '../../src/ledger/chained-rows';

/*
 * A chained row's content is hashed by the writer from the values it holds and by verify from the
 * values PostgreSQL gives back. jsonb keeps JSON's values only, so both must canonicalise a
 * metadata value to what JSON makes of it, whether or not it held more than JSON's own values.
 */
function row(metadata: object): ReturnType<typeof safetyEventRow> {
  return safetyEventRow({ id: '9F1C2D3E-0000-4000-8000-000000000001', timestamp: new Date('2026-11-28T10:00:00.123Z'), eventType: 'STAGE_COMPLETED', reason: 'done', metadata, severity: 'info' });
}

function asStored(metadata: object): object {
  return JSON.parse(JSON.stringify(metadata)) as object;
}

describe('a chained row\'s canonical content', () => {
  it('is the same for plain JSON metadata as for what PostgreSQL gives back', () => {
    const metadata = { zeta: 1, alpha: [1.5, 1e-7, 1e21, 'x', null, false], nested: { b: null, a: true }, '': -0 };
    expect(canonicalContent(row(metadata))).toBe(canonicalContent(row(asStored(metadata))));
    expect(canonicalContent(row(metadata))).toContain('"metadata":{"":0,"alpha":[1.5,1e-7,1e+21,"x",null,false],"nested":{"a":true,"b":null},"zeta":1}');
  });

  it('drops what JSON drops and turns what JSON turns, as jsonb stores it', () => {
    const at = new Date('2026-01-02T03:04:05.006Z');
    const metadata = { gone: undefined, at, list: [undefined, Number.NaN, Infinity, 2], map: new Map([['k', 1]]), inner: { skip: undefined, keep: 'x' } };
    const content = canonicalContent(row(metadata));
    expect(content).toBe(canonicalContent(row(asStored(metadata))));
    expect(content).toContain('"metadata":{"at":"2026-01-02T03:04:05.006Z","inner":{"keep":"x"},"list":[null,null,null,2],"map":{}}');
  });

  it('writes a timestamp with microseconds, as PostgreSQL gives it back', () => {
    expect(canonicalContent(row({}))).toContain('"timestamp":"2026-11-28T10:00:00.123000Z"');
    expect(canonicalContent(row({}))).toContain('"id":"9f1c2d3e-0000-4000-8000-000000000001"');
  });
});
