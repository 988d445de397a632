import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { initApproverKey } from '../../src/client/approver-keys';

/** An approver with a key of its own, in a folder of its own: for gates that take only signed decisions. */
export interface TestApprover {
  readonly name: string;
  readonly publicKey: string;
  readonly keysDir: string;
}

export function testApprover(name: string): TestApprover {
  const keysDir = mkdtempSync(path.join(os.tmpdir(), 'warden-approver-'));
  return { name, keysDir, publicKey: initApproverKey(keysDir, name).publicKey };
}
