import pino from 'pino';
import { readyCascadeModel } from '../../src/workers/cascade-model-cache';

/**
 * For a test file that screens answers outside a worker (a gateway of its own): the cascade model
 * as a worker has it, loaded from the weights an earlier process kept, or trained and kept when
 * there are none. Otherwise the file's first screened answer trains it in-process: seconds of
 * CPU in every such file.
 */
export function useKeptCascadeModel(): void {
  beforeAll(() => readyCascadeModel(pino({ level: 'silent' })));
}
