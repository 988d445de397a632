import { InvalidMoneyError } from '../../src/shared/money';
import type { PricingTable } from '../../src/safety/pricing';
import { UnknownModelError, costOf, maxCostOf } from '../../src/safety/pricing';

const table: PricingTable = {
  'model-a': { inputUsdPerMillion: '3', outputUsdPerMillion: '15' },
  'model-cheap': { inputUsdPerMillion: '0.25', outputUsdPerMillion: '1.25' },
  'model-free': { inputUsdPerMillion: '0', outputUsdPerMillion: '0' },
};

describe('pricing', () => {
  it('prices a call exactly', () => {
    // 1000 × $3/M + 500 × $15/M = $0.003 + $0.0075
    expect(costOf('model-a', { inputTokens: 1000, outputTokens: 500 }, table)).toBe('0.010500');
    expect(costOf('model-a', { inputTokens: 1_000_000, outputTokens: 1_000_000 }, table)).toBe('18.000000');
    expect(costOf('model-a', { inputTokens: 0, outputTokens: 0 }, table)).toBe('0.000000');
  });

  it('rounds a fraction of a micro-dollar up, once, on the total', () => {
    // 1 token × $0.25/M = 0.25 µ$ → 1 µ$; 3 tokens → 0.75 µ$ → 1 µ$; 4 tokens → exactly 1 µ$.
    expect(costOf('model-cheap', { inputTokens: 1, outputTokens: 0 }, table)).toBe('0.000001');
    expect(costOf('model-cheap', { inputTokens: 3, outputTokens: 0 }, table)).toBe('0.000001');
    expect(costOf('model-cheap', { inputTokens: 4, outputTokens: 0 }, table)).toBe('0.000001');
    expect(costOf('model-cheap', { inputTokens: 5, outputTokens: 0 }, table)).toBe('0.000002');
    // Summed before rounding: 2 × 0.25 µ$ + 0 = 0.5 µ$ → 1 µ$, not 2.
    expect(costOf('model-cheap', { inputTokens: 2, outputTokens: 0 }, table)).toBe('0.000001');
  });

  it('prices a free model at zero, because it is in the table', () => {
    expect(costOf('model-free', { inputTokens: 10_000, outputTokens: 10_000 }, table)).toBe('0.000000');
  });

  it('gives the maximum cost of a call from its limits', () => {
    expect(maxCostOf('model-a', 200_000, 8_192, table)).toBe('0.722880');
  });

  it('refuses an unknown model with a typed error, never 0', () => {
    expect(() => costOf('model-z', { inputTokens: 1, outputTokens: 1 }, table)).toThrow(UnknownModelError);
    try {
      maxCostOf('gpt-unknown', 1, 1, table);
      throw new Error('expected UnknownModelError');
    } catch (error) {
      expect(error).toBeInstanceOf(UnknownModelError);
      expect((error as UnknownModelError).model).toBe('gpt-unknown');
      expect((error as UnknownModelError).knownModels).toEqual(['model-a', 'model-cheap', 'model-free']);
      expect((error as Error).message).toContain('gpt-unknown');
    }
  });

  it('does not mistake Object.prototype members for models', () => {
    for (const name of ['constructor', 'toString', '__proto__', 'hasOwnProperty']) {
      expect(() => costOf(name, { inputTokens: 1, outputTokens: 1 }, table)).toThrow(UnknownModelError);
    }
  });

  it('rejects negative or fractional token counts and malformed prices', () => {
    expect(() => costOf('model-a', { inputTokens: -1, outputTokens: 0 }, table)).toThrow(RangeError);
    expect(() => costOf('model-a', { inputTokens: 1.5, outputTokens: 0 }, table)).toThrow(RangeError);
    expect(() => costOf('bad', { inputTokens: 1, outputTokens: 1 }, { bad: { inputUsdPerMillion: '3.0000001', outputUsdPerMillion: '1' } })).toThrow(
      InvalidMoneyError,
    );
  });
});
