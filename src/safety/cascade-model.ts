/**
 * A small learned model of cascade risk: logistic regression over hashed word and character
 * n-grams, trained from the labelled answers shipped beside it (`cascade-training.json`). The act
 * rules name what they see; this model catches the same intent said in words no rule lists
 * ("the surplus was invested in…", "a thumbs-up is all it takes…"). It is trained in-process on
 * first use — two to four seconds, deterministic: fixed features, fixed order, fixed number of
 * full-batch steps, no randomness — so the same corpus always gives the same weights, and
 * nothing is downloaded or generated into the tree.
 *
 * Workflow-safe: pure, no Node built-ins, no I/O (the corpus is a JSON import).
 */
import training from './cascade-training.json';
import { ownVoice } from './cascade-text';

/** One labelled answer the model learns from. */
export interface TrainingSample {
  readonly text: string;
  readonly label: 'risky' | 'benign';
}

/** A trained model: `probability(text)` is the estimated chance that the answer (its own words, see `ownVoice`) widens its task. */
export interface CascadeModel {
  probability(text: string): number;
  /** What it learned, to be kept and loaded again instead of trained (see `cascadeModelFrom`). */
  weights(): CascadeModelWeights;
}

/** A trained model's parameters: the features any training answer had, with their weight and idf. */
export interface CascadeModelWeights {
  readonly bias: number;
  readonly indices: readonly number[];
  readonly weights: readonly number[];
  readonly idf: readonly number[];
  /** The idf of a feature no training answer had. */
  readonly unseenIdf: number;
}

/** 2^18 hashed features: collisions are rare at this corpus size, and the weights stay a 1 MB array. */
const DIMENSIONS = 1 << 18;
/** Full-batch gradient steps with momentum: the loss is convex, and at this rate 200 steps reach its minimum (a rate of 2 gives the same model). */
const STEPS = 200;
const LEARNING_RATE = 5;
const MOMENTUM = 0.9;
/** L2 penalty: keeps weights small so one rare n-gram never decides alone. */
const L2 = 1e-3;

/** FNV-1a, 32 bits: a fixed, fast string hash (the same in every process and version). */
function hash(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** Sparse features: word unigrams and bigrams (words, "?", "!", arrows and emoji), and 3- to 5-character pieces of each word, with sublinear counts. */
function countsOf(text: string): Map<number, number> {
  const words = text
    .toLowerCase()
    .replace(/[\u2018\u2019]/g, "'")
    .match(/[\p{L}\p{N}']+|[?!→]|\p{Extended_Pictographic}/gu) ?? [];
  const counts = new Map<number, number>();
  const add = (feature: string): void => {
    const index = hash(feature) % DIMENSIONS;
    counts.set(index, (counts.get(index) ?? 0) + 1);
  };
  for (let i = 0; i < words.length; i++) {
    const word = words[i]!;
    add(`w:${word}`);
    if (i > 0) add(`b:${words[i - 1]} ${word}`);
    const padded = ` ${word} `;
    for (let n = 3; n <= 5; n++) for (let j = 0; j + n <= padded.length; j++) add(`c:${padded.slice(j, j + n)}`);
  }
  for (const [index, count] of counts) counts.set(index, 1 + Math.log(count));
  return counts;
}

/** Feature indices in ascending order, with their values: two typed arrays, which training walks 200 times. */
interface SparseVector {
  readonly indices: Int32Array;
  readonly values: Float64Array;
}

/** Weighted by inverse document frequency and scaled to unit length, so long answers weigh as much as short ones. */
function vectorOf(counts: Map<number, number>, idf: Float64Array): SparseVector {
  const entries: Array<[number, number]> = [];
  let norm = 0;
  for (const [index, value] of counts) {
    const weighted = value * idf[index]!;
    entries.push([index, weighted]);
    norm += weighted * weighted;
  }
  const scale = norm > 0 ? 1 / Math.sqrt(norm) : 0;
  entries.sort((a, b) => a[0] - b[0]);
  const indices = new Int32Array(entries.length);
  const values = new Float64Array(entries.length);
  entries.forEach(([index, value], i) => {
    indices[i] = index;
    values[i] = value * scale;
  });
  return { indices, values };
}

function sigmoid(x: number): number {
  return 1 / (1 + Math.exp(-x));
}

/** Trains the model on `samples` (deterministic: the same samples in the same order give the same model). */
export function trainCascadeModel(samples: readonly TrainingSample[]): CascadeModel {
  // The agent's own words, as the detector reads them: code, diffs and quotes are not what it said.
  const documents = samples.map((s) => countsOf(ownVoice(s.text)));
  const documentFrequency = new Float64Array(DIMENSIONS);
  for (const counts of documents) for (const index of counts.keys()) documentFrequency[index]! += 1;
  const idf = new Float64Array(DIMENSIONS);
  for (let i = 0; i < DIMENSIONS; i++) idf[i] = Math.log((1 + samples.length) / (1 + documentFrequency[i]!)) + 1;
  const vectors = documents.map((counts) => vectorOf(counts, idf));
  const labels = samples.map((s) => (s.label === 'risky' ? 1 : 0));

  const weights = new Float64Array(DIMENSIONS);
  let bias = 0;
  const gradient = new Float64Array(DIMENSIONS);
  const velocity = new Float64Array(DIMENSIONS);
  let biasVelocity = 0;
  const touched = new Set<number>();
  for (const { indices } of vectors) for (const index of indices) touched.add(index);
  const active = [...touched].sort((a, b) => a - b);
  for (let step = 0; step < STEPS; step++) {
    for (const index of active) gradient[index] = L2 * weights[index]!;
    let biasGradient = 0;
    for (let i = 0; i < vectors.length; i++) {
      const { indices, values } = vectors[i]!;
      let z = bias;
      for (let k = 0; k < indices.length; k++) z += weights[indices[k]!]! * values[k]!;
      const error = sigmoid(z) - labels[i]!;
      biasGradient += error;
      for (let k = 0; k < indices.length; k++) gradient[indices[k]!]! += (error * values[k]!) / vectors.length;
    }
    for (const index of active) {
      velocity[index] = MOMENTUM * velocity[index]! - LEARNING_RATE * gradient[index]!;
      weights[index]! += velocity[index]!;
    }
    biasVelocity = MOMENTUM * biasVelocity - (LEARNING_RATE * biasGradient) / vectors.length;
    bias += biasVelocity;
  }

  // The idf of a feature in no document, as the formula above gives it.
  return modelOf(bias, weights, idf, active, Math.log(1 + samples.length) + 1);
}

function modelOf(bias: number, weights: Float64Array, idf: Float64Array, active: readonly number[], unseenIdf: number): CascadeModel {
  return {
    probability(text: string): number {
      let z = bias;
      const { indices, values } = vectorOf(countsOf(text), idf);
      for (let k = 0; k < indices.length; k++) z += weights[indices[k]!]! * values[k]!;
      return sigmoid(z);
    },
    weights: () => ({
      bias,
      indices: [...active],
      weights: active.map((i) => weights[i]!),
      idf: active.map((i) => idf[i]!),
      unseenIdf,
    }),
  };
}

/** A model from weights a trained one gave (`model.weights()`). */
export function cascadeModelFrom(saved: CascadeModelWeights): CascadeModel {
  const weights = new Float64Array(DIMENSIONS);
  const idf = new Float64Array(DIMENSIONS).fill(saved.unseenIdf);
  saved.indices.forEach((index, i) => {
    weights[index] = saved.weights[i]!;
    idf[index] = saved.idf[i]!;
  });
  return modelOf(saved.bias, weights, idf, saved.indices, saved.unseenIdf);
}

/**
 * What the shipped model is made of — the training answers and every setting of its training —
 * as a short hash: kept weights with another fingerprint are not this model's.
 */
export function cascadeModelFingerprint(): string {
  return hash(JSON.stringify({ training, DIMENSIONS, STEPS, LEARNING_RATE, MOMENTUM, L2, version: 1 })).toString(16);
}

let shipped: CascadeModel | undefined;

/** The model trained on the shipped corpus: trained once per process on first use, unless one was installed. */
export function cascadeModel(): CascadeModel {
  shipped ??= trainCascadeModel(training as readonly TrainingSample[]);
  return shipped;
}

/** Makes `model` (loaded from kept weights of the same fingerprint) the one `cascadeModel()` returns. */
export function installCascadeModel(model: CascadeModel): void {
  shipped = model;
}
