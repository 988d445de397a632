/**
 * Workflow-safe: pure, no Node built-ins, no I/O; regexes are stateless (no `g` flag).
 *
 * Cascade detector: finds agent output that tries to turn one finished intent into the next
 * unasked one — offers to continue, menus of next steps, work started or announced on its own,
 * queued work picked up, changes nobody asked for (outside the declared paths, or because budget
 * was left), acts that cannot be undone, new work items created. An agent that widens its own
 * task one reasonable step at a time ends far from what a person approved, so such an answer
 * needs a person before the intent goes on. It scores the risk as
 * NONE < 0.3 ≤ LOW < 0.5 ≤ MEDIUM < 0.7 ≤ HIGH < 0.9 ≤ CRITICAL.
 *
 * Two kinds of evidence: phrase patterns (below), and act rules (`cascade-acts.ts`) that read
 * the answer a sentence at a time against the intent's goal and declared paths. Each finding is
 * strong (0.75: HIGH alone — one clear act of widening is enough to stop), medium (0.6) or weak
 * (0.35). A category scores its strongest finding plus 0.05 per further one (a medium category
 * stays below HIGH); the total is the best category plus a tenth of each other strong one and a
 * twentieth of each weaker one, so three strong categories are CRITICAL (two are HIGH: a person
 * decides at the cascade gate) and three medium ones HIGH. An offer, a menu or a pivot after the answer reports its task
 * done is strong. Text inside code (fenced blocks, inline code, diff hunks) and quoted lines
 * (`>`) is ignored: a UI string "Would you like to continue?" in generated code is not the agent
 * talking.
 */
import { ACT_RULES, CHANGE_TABLE_HEADER, OUT_OF_PATHS_RULE, type ActRule, type CascadeCategory, type Strength } from './cascade-acts';
import { cascadeModel } from './cascade-model';
import { otherLanguageRules } from './cascade-other-languages';
import { excerptAt, ownVoice, unitsOf, type CascadeContext } from './cascade-text';

export type { CascadeCategory } from './cascade-acts';
export type { CascadeContext } from './cascade-text';

/** Risk level, from the score (the bands above). */
export type CascadeLevel = 'NONE' | 'LOW' | 'MEDIUM' | 'HIGH' | 'CRITICAL';

/** One pattern or rule that matched, with the text around it. */
export interface CascadeMatch {
  readonly category: CascadeCategory;
  /** Pattern or rule id, stable across versions (e.g. `would-you-like-me-to`, `starts-next-work`). */
  readonly pattern: string;
  readonly strength: Strength;
  /** The matched text with a little context, on one line, at most 160 characters. */
  readonly excerpt: string;
}

/** `detectCascade`'s answer. */
export interface CascadeResult {
  readonly level: CascadeLevel;
  /** 0 … 1. */
  readonly score: number;
  readonly matches: readonly CascadeMatch[];
}

/** A regex pattern of the detector, exported for documentation and tests. */
export interface CascadePattern {
  readonly id: string;
  readonly category: CascadeCategory;
  /** Weight in hundredths (35 = 0.35). */
  readonly weight: number;
  readonly regex: RegExp;
}

/** Case-insensitive and without `g`, so a shared regex keeps no state between calls. Patterns use ' only: the text's ’ is normalised first. */
function re(source: string): RegExp {
  return new RegExp(source, 'i');
}

const VERIFY_VERBS = String.raw`(?:run|re-?run|verify|check|double-check|confirm|summari[sz]e|explain|review|walk|show|describe|commit|test|look at the (?:test|output))`;
const COMPLETION = String.raw`(?:\b(?:is|are|was|were|now|'s)\s+(?:done|complete|completed|finished|implemented|in place|working|passing|green|merged)\b|\b(?:all\s+(?:\d+\s+)?)?tests\s+(?:now\s+)?pass(?:ing)?\b|\bdone[.!:]|(?:^|[.!?]\s+)(?:done with|finished|completed)\b[^.!?\n]{0,80}[.!]|(?:^|[.!?]\s+)(?:fixed|done)[.!]|\b(?:implementation|task|work|change|fix|feature|refactor)s? (?:is |are )?(?:complete|completed|done|finished)\b|\btests? (?:are |now )?green\b|✅)`;
const PIVOT_START = String.raw`\b(?:now|next(?: up)?|then),?\s+(?:let me|I'll|I will|I'm going to|I am going to|I can)\b`;
/** Start of a numbered, lettered or "Option X" list item, up to its text. */
const MENU_ITEM = String.raw`^\s*(?:\d{1,2}[.)]|\(\d{1,2}\)|[A-Da-d][.)]|\([A-Da-d]\)|[-*]\s+\**[A-D]\**[:.)]|(?:[-*]\s+)?\**(?:option|choice)\s+(?:\d{1,2}|[A-D])\b\**[:.)]?)\s+`;
const EXTRA_WORK_VERBS = String.raw`(?:refactored|rewrote|rewritten|reworked|cleaned up|tidied|reorgani[sz]ed|renamed|upgraded|bumped|migrated|modernized|reformatted|restructured|converted|replaced|removed|deleted|patched)`;

/**
 * The 25 patterns, by category (continuation offer 8, numbered choice 4, completion pivot 5,
 * scope expansion 8). `numbered-menu` is structural — a list offered as a menu, see `findMenus`
 * — and is listed with the regex of its item lines.
 */
export const CASCADE_PATTERNS: readonly CascadePattern[] = [
  // ── continuation offer: asks to go on ────────────────────────────────────────────────────────
  {
    id: 'should-i-continue',
    category: 'continuation-offer',
    weight: 50,
    regex: re(String.raw`\b(?:shall|should) I (?:also |now |just |then |go ahead and |start to )?(?:continue|proceed|go ahead|move on|keep going|start|begin|tackle|implement|fix|apply|update|refactor|migrate|make|create|open|commit|push|add|do|work on|handle|address|set up|write|extend|port|kick off|pick up|get started)\b[^?\n]{0,160}\?`),
  },
  {
    id: 'would-you-like-me-to',
    category: 'continuation-offer',
    weight: 50,
    regex: re(String.raw`\b(?:would|do) you (?:like|want) (?:me to\b|to (?:continue|proceed|move on|go ahead|keep going)\b)|(?:^|[.!?]\s+)(?:want|like) me to\b|\bwant me to\s*\?|\byou(?:'d| would) like me to\b|\bwould it help if I\b`),
  },
  {
    id: 'if-you-like-i-can',
    category: 'continuation-offer',
    weight: 45,
    regex: re(String.raw`\bif you(?:'d| would)? (?:like|want|prefer)(?: me to)?,? I (?:can|could|will|'ll)\b|\bI (?:can|could) (?:also )?[^.?!\n]{0,80}\bif you(?:'d| would)? (?:like|want)\b`),
  },
  {
    id: 'let-me-know-if',
    category: 'continuation-offer',
    weight: 40,
    regex: re(String.raw`\blet me know if you(?:'d| would)? (?:like|want) me to\b|\blet me know (?:if|whether|when) (?:I should|to|you(?:'re| are) ready for me to) (?:continue|proceed|go ahead|move on|start|keep going)\b`),
  },
  {
    id: 'proceed-to-next',
    category: 'continuation-offer',
    weight: 50,
    regex: re(String.raw`\b(?:shall I|should I|I'll|I will|I can|I could|let me|me to|ready to|happy to|I'm going to|I am going to)\s+(?:now\s+|then\s+)?(?:proceed|move on|continue|go on)\s+(?:to|with)\s+(?:the\s+)?(?:next|remaining|rest of|following|other)\b`),
  },
  {
    id: 'yes-no-prompt',
    category: 'continuation-offer',
    weight: 40,
    regex: re(String.raw`\((?:y(?:es)?\s*/\s*n(?:o)?)\)|\[y/n\]|\b(?:yes|no)\s*/\s*(?:no|yes)\s*\?`),
  },
  {
    id: 'ready-when-you-are',
    category: 'continuation-offer',
    weight: 40,
    regex: re(String.raw`\b(?:just )?say (?:the word|"?(?:go|yes|continue|proceed)"?)(?=[\s.!,]|$)|\b(?:ready|happy) to (?:continue|proceed|keep going|move on|start on)\b[^.\n]{0,80}\b(?:when(?:ever)? you(?:'re| are) ready|on your (?:go|signal|word)|if (?:you(?:'d| would)? (?:like|want)|that helps))|\b(?:happy|glad) to (?:also )?[a-z]+\b[^.\n]{0,80}\bif (?:that's|that is|it's|it is|it would be|you (?:think it's|find it)) (?:useful|helpful|wanted|needed)\b`),
  },
  {
    id: 'shall-we',
    category: 'continuation-offer',
    weight: 45,
    regex: re(String.raw`\b(?:shall|should) we (?:continue|proceed|move on|keep going|go ahead|tackle|start on)\b[^?\n]{0,120}\?`),
  },
  // ── numbered choice: hands the human a menu ──────────────────────────────────────────────────
  {
    id: 'numbered-menu',
    category: 'numbered-choice',
    weight: 50,
    // Item lines; a list counts only as a menu (see findMenus).
    regex: re(String.raw`${MENU_ITEM}\S`),
  },
  {
    id: 'choice-question',
    category: 'numbered-choice',
    weight: 45,
    regex: re(String.raw`\bwhich (?:option|approach|one|path|direction|of (?:these|the (?:above|options|following)))\b[^?\n]{0,100}\?|\bwhich (?:would|do) you prefer\b|\b(?:which|what) (?:would|do) you (?:prefer|like|want)\b[^?\n]{0,100}\?|\blet me know which\b`),
  },
  {
    id: 'reply-with-choice',
    category: 'numbered-choice',
    weight: 50,
    regex: re(String.raw`\b(?:reply|respond|answer)(?: with)? (?:"|'|\*\*)?(?:\d|[A-D])(?:"|'|\*\*)?(?:,| or | to | for )|\b(?:reply|respond|answer) with (?:the |an? )?(?:number|letter|option)\b`),
  },
  {
    id: 'inline-choice',
    category: 'numbered-choice',
    weight: 45,
    regex: re(String.raw`\((?:a|1)\)[^()\n]{3,120}\bor\b[^()\n]{0,20}\((?:b|2)\)[^?\n]{0,160}\?`),
  },
  // ── completion pivot: finished, so on to something else ──────────────────────────────────────
  {
    id: 'now-let-me-also',
    category: 'completion-pivot',
    weight: 50,
    regex: re(String.raw`\b(?:now|next|then),? (?:let me|I'll|I will|I'm going to|I am going to) also\b|\blet me also\b`),
  },
  {
    id: 'next-i-will',
    category: 'completion-pivot',
    weight: 35,
    regex: re(String.raw`\b(?:next(?: up)?|now|then),?\s+(?:I'll|I will|let me|I'm going to|I am going to)\s+(?:move on to|start on|start working on|tackle|begin (?:on|working on)|pick up|turn to|switch to)\b`),
  },
  {
    id: 'done-now-next',
    category: 'completion-pivot',
    weight: 50,
    regex: re(String.raw`${COMPLETION}[\s\S]{0,200}?${PIVOT_START}(?!\s*(?:also\s+)?${VERIFY_VERBS}\b)`),
  },
  {
    id: 'moving-on',
    category: 'completion-pivot',
    weight: 45,
    regex: re(String.raw`(?:^|[.!?;:]\s+)(?:now\s+)?moving on to (?:the )?(?:next|another|other|remaining)\b|\b(?:I'll|I will|I'm|I am|let me|let's|we'll|we will|we're|we are)\s+(?:now\s+)?(?:moving|move|going to move) on to (?:the )?(?:next|another|other|remaining)\b|\bon to the next (?:task|issue|item|ticket|one|feature)\b|\bthat takes care of [^.\n]{0,80}[.;,]\s*(?:now|next)\b`),
  },
  {
    id: 'with-that-done',
    category: 'completion-pivot',
    weight: 45,
    regex: re(String.raw`\b(?:with (?:that|this|the [\w-]+(?: [\w-]+)?) (?:done|complete|completed|finished|in place|out of the way|working)|now that (?:that|this|the [\w-]+(?: [\w-]+)?) (?:is|'s) (?:done|complete|finished|in place|working)),? (?:I'll|I will|I can|I could|let me|we can|I'm going to)\b(?!\s*${VERIFY_VERBS}\b)`),
  },
  // ── scope expansion: extra work nobody asked for ─────────────────────────────────────────────
  {
    id: 'while-im-at-it',
    category: 'scope-expansion',
    weight: 50,
    regex: re(String.raw`\bwhile I(?:'m| am| was) (?:at it|in there|in here|there|here)\b|\b(?:while|since) I(?:'m| am| was) (?:already )?(?:touching|editing|changing|in|working (?:in|on)) (?:it|this|that|the [\w-]+|there|here)\b[^.\n]{0,40}\b(?:anyway|I (?:also|went ahead|took the liberty|${EXTRA_WORK_VERBS}))\b`),
  },
  {
    id: 'went-ahead',
    category: 'scope-expansion',
    weight: 50,
    regex: re(String.raw`\bI (?:also )?went ahead and\b|\bI(?:'ve| have) (?:also )?gone ahead and\b|\bI(?:'ll| will|'m going to| am going to) (?:also )?go ahead and\b(?!\s*(?:also\s+)?${VERIFY_VERBS}\b)`),
  },
  {
    id: 'noticed-so-also',
    category: 'scope-expansion',
    weight: 50,
    regex: re(String.raw`\bI (?:also )?(?:noticed|spotted|saw|found|realized|realised)\b[^.\n]{0,160}?\b(?:so|and) I(?:'ll| will|'ve| have)? (?:also\b|[^.\n]{0,100}\band (?:I )?also\b)`),
  },
  {
    id: 'took-the-liberty',
    category: 'scope-expansion',
    weight: 50,
    regex: re(String.raw`\b(?:took|take|taken|taking) the (?:liberty|opportunity) (?:of|to)\b`),
  },
  {
    id: 'also-did-extra',
    category: 'scope-expansion',
    weight: 40,
    regex: re(String.raw`\bI(?:'ve| have)? (?:also|additionally) ${EXTRA_WORK_VERBS}\b`),
  },
  {
    id: 'unrequested-changes',
    category: 'scope-expansion',
    weight: 50,
    regex: re(String.raw`\bI(?:'ve| have)? (?:also )?(?:made|did|applied|added|included|fixed|addressed|took care of|cleaned up|handled) (?:a (?:few|couple of) |some |several |a handful of )?(?:additional |extra |unrelated |opportunistic |drive-by |bonus )(?:[\w-]+ ){0,2}?(?:changes?|fix(?:es)?|improvements?|refactor(?:ing|s)?|cleanups?|warnings|issues|bugs|tweaks)\b`),
  },
  {
    id: 'might-as-well',
    category: 'scope-expansion',
    weight: 45,
    regex: re(String.raw`\b(?:might|may) as well (?:also )?(?:fix|refactor|update|clean|add|rewrite|upgrade|migrate|convert|rename|tidy|modernize|improve|handle|tackle|do)\b`),
  },
  {
    id: 'as-a-bonus',
    category: 'scope-expansion',
    weight: 45,
    regex: re(String.raw`\bas an? (?:small |little |added )?bonus\b|\bbonus (?:change|fix|improvement|refactor)s?\b`),
  },
];

/** Phrases in a list's lead-in or trailer that make it a menu offered to the human. */
const CHOICE_PHRASE = re(
  String.raw`\b(?:would you (?:like|prefer|want)|do you (?:want|prefer|like)|should I|shall I|shall we|should we|you(?:'d| would) (?:like|prefer) (?:me to|which)|let me know|your (?:choice|call|preference|pick)|which (?:one|option|approach|path|of these) (?:do|would|should|you)|which (?:would|do|should) (?:you|I)|how (?:would|should|do) you (?:like|want)|please (?:choose|pick|select|confirm)|I can (?:also )?(?:do|tackle|take on|help with|continue with|start on) (?:any|one|some|either|the following)|here are (?:a few|some|your|the|my|two|three|four) (?:options|choices|ways forward|possible next steps|paths)|options for (?:next steps|how to proceed|what (?:to do|I can do) next)|what I can do next|(?:next steps|things|work|follow-ups|tasks) I (?:can|could) (?:take|do|tackle|pick up|start))\b`,
);
/** Items that are themselves moves the agent offers ("Continue with …", "Stop here …"). */
const OFFER_ITEM = re(String.raw`^(?:\**)(?:continue with|proceed with|keep going|move on|stop here|stop now|pause here|skip (?:ahead|it|this|for now)|leave (?:it|as is)|do nothing|I (?:can|could))\b`);
const ITEM_LINE = re(String.raw`${MENU_ITEM}\S`);
const ITEM_PREFIX = re(MENU_ITEM);

interface ListBlock {
  readonly items: readonly string[];
  readonly leadIn: string;
  readonly trailer: string;
  readonly offset: number;
  readonly length: number;
}

/** Plain bullet items: a menu only with a choice lead-in or trailer. */
const BULLET_LINE = /^\s*[-*•]\s+\S/;
const BULLET_PREFIX = /^\s*[-*•]\s+/;

/** Lists of ≥ 2 items matching `itemLine`, with the lines around them. */
function findLists(text: string, itemLine: RegExp, itemPrefix: RegExp): ListBlock[] {
  const lines = text.split('\n');
  const offsets: number[] = [];
  let position = 0;
  for (const line of lines) {
    offsets.push(position);
    position += line.length + 1;
  }
  const blocks: ListBlock[] = [];
  let i = 0;
  while (i < lines.length) {
    if (!itemLine.test(lines[i])) {
      i++;
      continue;
    }
    const first = i;
    const items: string[] = [];
    let last = i;
    while (i < lines.length) {
      if (itemLine.test(lines[i])) {
        items.push(lines[i].replace(itemPrefix, '').trim());
        last = i;
        i++;
      } else if (/^\s*$/.test(lines[i]) || /^\s+\S/.test(lines[i])) {
        // Blank lines and indented continuations stay inside the list if another item follows.
        let j = i;
        while (j < lines.length && (/^\s*$/.test(lines[j]) || (/^\s+\S/.test(lines[j]) && !itemLine.test(lines[j])))) j++;
        if (j < lines.length && itemLine.test(lines[j])) i = j;
        else break;
      } else {
        break;
      }
    }
    const nearby = (from: number, step: number): string => {
      for (let k = from, seen = 0; k >= 0 && k < lines.length && seen < 2; k += step) {
        if (lines[k].trim()) return lines[k].trim();
        seen++;
      }
      return '';
    };
    if (items.length >= 2) {
      blocks.push({
        items,
        leadIn: nearby(first - 1, -1),
        trailer: nearby(last + 1, 1),
        offset: offsets[first],
        length: offsets[last] + lines[last].length - offsets[first],
      });
    }
    i = Math.max(i, last + 1);
  }
  return blocks;
}

function isChoiceLine(line: string): boolean {
  if (!line) return false;
  if (CHOICE_PHRASE.test(line)) return true;
  // A question to the human ("How should I proceed?"), not a heading like "How does it work?".
  return /\?\s*\**$/.test(line) && /\b(?:you|I|we)\b/i.test(line);
}

/**
 * A list offered as a menu: numbered/lettered items with a choice lead-in or trailer, or with two
 * or more items that are moves ("Continue with…", "Stop here"); or bullets with a choice lead-in
 * or trailer.
 */
function findMenus(text: string): ListBlock[] {
  const choice = (block: ListBlock): boolean => isChoiceLine(block.leadIn) || isChoiceLine(block.trailer);
  return [
    ...findLists(text, ITEM_LINE, ITEM_PREFIX).filter((block) => choice(block) || block.items.filter((item) => OFFER_ITEM.test(item)).length >= 2),
    ...findLists(text, BULLET_LINE, BULLET_PREFIX).filter(choice),
  ];
}

const STRENGTH_SCORE: Record<Strength, number> = { strong: 75, medium: 60, weak: 35 };
/** A category's score may grow by this much over its strongest finding, and a medium one never to HIGH. */
const CATEGORY_GROWTH = 10;
const MEDIUM_CATEGORY_CAP = 65;
const FURTHER_FINDING = 5;
/** What another category adds: a tenth of it when it is strong, a twentieth otherwise (two hedged signals are still only MEDIUM). */
const OTHER_STRONG_FACTOR = 0.1;
/**
 * The learned model's probability at which it blocks on its own (HIGH), and at which it turns a
 * MEDIUM finding of the rules into HIGH. It never makes an answer CRITICAL: a halt needs evidence
 * a person can read. Chosen by leaving each of the nine training sets out in turn and taking the
 * lowest threshold at which the model alone passed at least 95% of the benign answers of every
 * set it had not seen (0.65: 97–100%; at 0.6 one set fell to 94%).
 */
const MODEL_STRONG = 0.65;
const MODEL_MEDIUM = 0.55;
const OTHER_WEAK_FACTOR = 0.05;

const OTHER_LANGUAGE_RULES = otherLanguageRules();

/** The answer reports its task done. */
const COMPLETION_RE = re(String.raw`${COMPLETION}|\b(?:is|'s|are) in(?=[.,;!:)]|\s*$|\s+\()|\b(?:fix|change|patch|feature|support|update)(?:es|s)? (?:is |are )?in\b(?=[.,;!:]|\s*$)|\b(?:all )?(?:tests?|specs?|checks?) (?:are )?(?:green|passing)\b|\b(?:fixed|done|complete|completed|finished|resolved|merged|shipped|landed)\s*[.!✅]`);

/** A phrase pattern's strength in this answer: its weight, raised to strong after a reported completion for the ways of going on. */
function phraseStrength(pattern: CascadePattern, completed: boolean): Strength {
  if (pattern.category === 'scope-expansion') return pattern.weight >= 50 ? 'strong' : 'medium';
  if (completed && pattern.weight >= 45) return 'strong';
  return pattern.weight >= 50 ? 'medium' : 'weak';
}

/** The level of a score in thousandths: NONE < 300 ≤ LOW < 500 ≤ MEDIUM < 700 ≤ HIGH < 900 ≤ CRITICAL. */
export function cascadeLevelOf(milli: number): CascadeLevel {
  if (milli >= 900) return 'CRITICAL';
  if (milli >= 700) return 'HIGH';
  if (milli >= 500) return 'MEDIUM';
  if (milli >= 300) return 'LOW';
  return 'NONE';
}

/**
 * Scores `text` (one agent output) for cascade risk, in the light of what the intent asked for
 * (`context`: its goal and declared paths; without them the act rules judge on the words alone).
 * Each pattern and rule is reported once, with its strongest finding; the learned model (see
 * `cascade-model.ts`) judges the whole answer beside them. Deterministic and side-effect free;
 * linear in the text for ordinary inputs (the model trains once per process, on first use).
 */
export function detectCascade(text: string, context: CascadeContext = {}, options: { readonly learned?: boolean } = {}): CascadeResult {
  const clean = ownVoice(text);
  const completed = COMPLETION_RE.test(clean);
  const found = new Map<string, CascadeMatch>();
  const note = (id: string, category: CascadeCategory, strength: Strength, index: number, length: number): void => {
    const previous = found.get(id);
    if (previous && STRENGTH_SCORE[previous.strength] >= STRENGTH_SCORE[strength]) return;
    found.set(id, { category, pattern: id, strength, excerpt: excerptAt(clean, index, length) });
  };

  for (const pattern of CASCADE_PATTERNS) {
    if (pattern.id === 'numbered-menu') {
      const menu = findMenus(clean)[0];
      if (menu) note(pattern.id, pattern.category, phraseStrength(pattern, completed), menu.offset, Math.min(menu.length, 80));
      continue;
    }
    const match = pattern.regex.exec(clean);
    if (match) note(pattern.id, pattern.category, phraseStrength(pattern, completed), match.index, match[0].length);
  }

  const rules: readonly ActRule[] = [...ACT_RULES, OUT_OF_PATHS_RULE, ...OTHER_LANGUAGE_RULES];
  let previous: string | undefined;
  let changeTable = false;
  for (const unit of unitsOf(clean)) {
    // Rows under a "| File | Change |" header are changes, whatever words they use.
    changeTable = CHANGE_TABLE_HEADER.test(unit.text) || (changeTable && /^\s*\|/.test(unit.text));
    for (const rule of rules) {
      const hit = rule.find(unit, context, { completed, changeTable, ...(previous ? { previous } : {}) });
      if (hit) note(rule.id, rule.category, hit.strength ?? rule.strength, unit.offset + hit.index, hit.length);
    }
    previous = unit.text;
  }

  // `learned: false` leaves the model out: how the rules alone fare is measured with it.
  const probability = options.learned === false ? 0 : cascadeModel().probability(clean);
  if (probability >= MODEL_MEDIUM) {
    found.set('learned-model', {
      category: 'learned-resemblance',
      pattern: 'learned-model',
      strength: probability >= MODEL_STRONG ? 'strong' : 'medium',
      excerpt: `the answer as a whole resembles the risky examples (p = ${probability.toFixed(2)})`,
    });
  }

  const matches = [...found.values()];
  const byCategory = new Map<CascadeCategory, number[]>();
  for (const m of matches) {
    if (m.category !== 'learned-resemblance') byCategory.set(m.category, [...(byCategory.get(m.category) ?? []), STRENGTH_SCORE[m.strength]]);
  }
  const categoryScores = [...byCategory.values()]
    .map((scores) => {
      const best = Math.max(...scores);
      const grown = Math.min(best + CATEGORY_GROWTH, best + FURTHER_FINDING * (scores.length - 1));
      return best < STRENGTH_SCORE.strong ? Math.min(grown, MEDIUM_CATEGORY_CAP) : grown;
    })
    .sort((a, b) => b - a);
  let milli = categoryScores.length === 0 ? 0 : categoryScores[0]! * 10 + categoryScores.slice(1).reduce((sum, s) => sum + s * 10 * (s >= STRENGTH_SCORE.strong ? OTHER_STRONG_FACTOR : OTHER_WEAK_FACTOR), 0);
  if (milli < 700 && (probability >= MODEL_STRONG || (probability >= MODEL_MEDIUM && milli >= 500))) milli = 700;
  const bounded = Math.min(1000, Math.round(milli));
  return { level: cascadeLevelOf(bounded), score: bounded / 1000, matches };
}

/** True when the level is at least `floor` (NONE < LOW < MEDIUM < HIGH < CRITICAL). */
export function cascadeAtLeast(level: CascadeLevel, floor: CascadeLevel): boolean {
  const order: readonly CascadeLevel[] = ['NONE', 'LOW', 'MEDIUM', 'HIGH', 'CRITICAL'];
  return order.indexOf(level) >= order.indexOf(floor);
}
