import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import { cascadeModel, cascadeModelFingerprint, cascadeModelFrom, installCascadeModel, type CascadeModelWeights } from '../safety/cascade-model';

/** Beside the workflow bundles: a build tool's cache, never part of the tree. */
const CACHE_DIR = path.join(__dirname, '..', '..', 'node_modules', '.cache', 'warden');

/**
 * Makes the cascade model ready before a worker polls: loaded from the weights kept by an earlier
 * worker when the training answers and settings are the same (its fingerprint), otherwise trained
 * (a few seconds of CPU) and kept for the next. Training is deterministic, so kept weights are
 * exactly what training would give; a cache that cannot be read or written only costs the time.
 */
export async function readyCascadeModel(logger: Logger): Promise<void> {
  const file = path.join(CACHE_DIR, `cascade-model-${cascadeModelFingerprint()}.json`);
  const kept = await readFile(file, 'utf8').then(
    (text) => JSON.parse(text) as CascadeModelWeights,
    () => undefined,
  );
  if (kept) {
    installCascadeModel(cascadeModelFrom(kept));
    return;
  }
  const started = Date.now();
  const model = cascadeModel();
  logger.info({ ms: Date.now() - started }, 'cascade model trained');
  try {
    await mkdir(CACHE_DIR, { recursive: true });
    // Written whole, then renamed: a worker starting meanwhile reads the old file or none, never half of one.
    const partial = `${file}.${process.pid}.tmp`;
    await writeFile(partial, JSON.stringify(model.weights()));
    await rename(partial, file);
  } catch (error) {
    logger.warn({ error: error instanceof Error ? error.message : String(error) }, 'could not keep the cascade model; the next worker trains it again');
  }
}
