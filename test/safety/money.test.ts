import {
  InvalidMoneyError,
  ZERO_USD,
  addUsd,
  compareUsd,
  fromMicros,
  mulUsd,
  normalizeUsd,
  subUsd,
  sumUsd,
  toMicros,
  usdToNumber,
} from '../../src/shared/money';

describe('money', () => {
  it('parses decimal strings into exact micro-dollars', () => {
    expect(toMicros('0')).toBe(0n);
    expect(toMicros('1')).toBe(1_000_000n);
    expect(toMicros('1.5')).toBe(1_500_000n);
    expect(toMicros('0.000001')).toBe(1n);
    expect(toMicros('12.345678')).toBe(12_345_678n);
    expect(toMicros('-0.25')).toBe(-250_000n);
    expect(toMicros('99999999.999999')).toBe(99_999_999_999_999n);
  });

  it.each(['', ' 1', '1 ', '+1', '1e3', '1.', '.5', '0.0000001', 'NaN', '1,5', '$1'])('rejects %j', (bad) => {
    expect(() => toMicros(bad)).toThrow(InvalidMoneyError);
  });

  it('rejects non-strings at runtime', () => {
    expect(() => toMicros(1.5 as unknown as string)).toThrow(InvalidMoneyError);
  });

  it('formats with exactly six decimals', () => {
    expect(fromMicros(0n)).toBe(ZERO_USD);
    expect(fromMicros(1n)).toBe('0.000001');
    expect(fromMicros(1_500_000n)).toBe('1.500000');
    expect(fromMicros(-1n)).toBe('-0.000001');
    expect(fromMicros(-1_050_000n)).toBe('-1.050000');
    expect(normalizeUsd('3')).toBe('3.000000');
  });

  it('adds without float error where floats fail', () => {
    expect(0.1 + 0.2).not.toBe(0.3);
    expect(addUsd('0.1', '0.2')).toBe('0.300000');
    expect(sumUsd(Array.from({ length: 10 }, () => '0.1'))).toBe('1.000000');
    expect(sumUsd([])).toBe(ZERO_USD);
  });

  it('subtracts, possibly below zero', () => {
    expect(subUsd('5', '4.999999')).toBe('0.000001');
    expect(subUsd('1', '2.5')).toBe('-1.500000');
  });

  it('compares numerically, not lexically', () => {
    expect(compareUsd('10', '9.999999')).toBe(1);
    expect(compareUsd('1.5', '1.500000')).toBe(0);
    expect(compareUsd('-1', '0')).toBe(-1);
  });

  it('multiplies by integers only', () => {
    expect(mulUsd('0.000003', 1_000_000)).toBe('3.000000');
    expect(mulUsd('1.25', 3n)).toBe('3.750000');
    expect(mulUsd('1.25', 0)).toBe(ZERO_USD);
    expect(() => mulUsd('1', 1.5)).toThrow(RangeError);
    expect(() => mulUsd('1', Number.MAX_SAFE_INTEGER + 1)).toThrow(RangeError);
  });

  it('converts to a float for statistics only', () => {
    expect(usdToNumber('1.250000')).toBe(1.25);
  });
});
